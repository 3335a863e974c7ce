// The GAT layer, model and training loop on CUDA: forward, backward and attention weights
// against the CPU (f32, relative error <= 1e-5), f64 gradient checks on the device, training
// that follows the CPU run and is bitwise reproducible, and checkpoints across devices.
// Skipped without a device.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gat/datasets/generator.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/io.h"
#include "gat_testing.h"
#include "gradcheck.h"
#include "gat/layers/gat_conv.h"
#include "gat/models/gat.h"
#include "gat/train/trainer.h"

using namespace gat;
using namespace gat::testing;

namespace {

Dataset generated_dataset() {
  GeneratorOptions go;
  go.num_nodes = 1500;
  go.avg_degree = 10;
  go.num_classes = 5;
  go.num_features = 24;
  go.train_per_class = 20;
  go.val_size = 300;
  go.test_size = 600;
  go.seed = 7;
  return generate_sbm(go);
}

struct Trajectory {
  std::vector<double> losses, val_losses;
  TrainResult result;
  std::vector<Tensor> params;  // on the host
};

// `host_sync_in_forward` reads a value back inside the forward pass, which a CUDA graph cannot
// record: the trainer must fall back to eager steps.
Trajectory train_on(Device device, const Dataset& host_data, int64_t epochs, int64_t patience = 100,
                    bool cuda_graphs = TrainOptions{}.cuda_graphs, bool host_sync_in_forward = false) {
  const Dataset data = dataset_to(host_data, device);
  Generator gen(11);
  GAT model(GATConfig{data.num_features(), data.num_classes}, gen);
  model.to(device);
  auto forward = [&](const Features& x, const Graph& g, Generator& gn) {
    Tensor logits = model.forward(x, g, gn);
    if (host_sync_in_forward) (void)logits.to(Device::cpu);
    return logits;
  };
  TrainOptions options;
  options.max_epochs = epochs;
  options.patience = patience;
  options.cuda_graphs = cuda_graphs;
  Trajectory t;
  t.result = train_node_classifier(model, forward, data, options, gen, [&](const EpochStats& s) {
    t.losses.push_back(s.loss);
    t.val_losses.push_back(s.val_loss);
  });
  for (const Tensor& p : model.parameters()) t.params.push_back(p.to(Device::cpu));
  return t;
}

}  // namespace

TEST(CudaGATConv, ForwardBackwardAndAttentionMatchTheCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(1);
  const int64_t N = 400;
  const Graph graph = small_graph(N, rng);
  const Graph graph_gpu = graph.to(Device::cuda);
  for (bool concat : {true, false}) {
    const GATConvOptions o = conv_options(16, 8, 4, concat, true, 0.5, DType::f32);
    Generator init_cpu(3), init_gpu(3);
    GATConv cpu(o, init_cpu), gpu(o, init_gpu);
    gpu.to(Device::cuda);
    const Tensor x = random_tensor({N, 16}, rng, -1, 1, DType::f32);
    Tensor x_cpu = x.clone(), x_gpu = x.to(Device::cuda);
    x_cpu.set_requires_grad();
    x_gpu.set_requires_grad();
    Generator gen_cpu(9), gen_gpu(9);  // the same attention-dropout masks on both devices
    GATConv::Attention att_cpu, att_gpu;
    const Tensor out_cpu = cpu.forward(x_cpu, graph, gen_cpu, &att_cpu);
    const Tensor out_gpu = gpu.forward(x_gpu, graph_gpu, gen_gpu, &att_gpu);
    ASSERT_TRUE(out_gpu.is_cuda());
    EXPECT_LE(rel_error(out_gpu, out_cpu), 1e-5) << "concat " << concat;
    EXPECT_LE(rel_error(att_gpu.weights, att_cpu.weights), 1e-5);

    const Tensor grad = random_tensor(out_cpu.shape(), rng, -1, 1, DType::f32);
    out_cpu.backward(grad);
    out_gpu.backward(grad.to(Device::cuda));
    EXPECT_LE(rel_error(x_gpu.grad(), x_cpu.grad()), 1e-5) << "d x, concat " << concat;
    const auto params_cpu = cpu.named_parameters(), params_gpu = gpu.named_parameters();
    ASSERT_EQ(params_cpu.size(), params_gpu.size());
    for (size_t i = 0; i < params_cpu.size(); ++i) {
      ASSERT_TRUE(params_gpu[i].second.grad().defined()) << params_gpu[i].first;
      EXPECT_LE(rel_error(params_gpu[i].second.grad(), params_cpu[i].second.grad()), 1e-5)
          << "d " << params_cpu[i].first << ", concat " << concat;
    }
  }
}

TEST(CudaGATConv, GradientsOnTheDevice) {
  GAT_SKIP_WITHOUT_CUDA();
  for (bool concat : {true, false}) {
    std::mt19937_64 rng(2);
    const Graph graph = small_graph(7, rng).to(Device::cuda);
    Generator init(5);
    GATConv conv(conv_options(5, 4, 3, concat, true, 0.5), init);
    conv.to(Device::cuda);
    conv.bias = random_tensor(conv.bias.shape(), rng, -1, 1, DType::f64, Device::cuda);
    const std::vector<Tensor*> slots = slots_of(conv);
    expect_gradients_match(std::string("cuda GATConv residual dropout, concat ") + (concat ? "on" : "off"),
                           with_slots(slots, [&](const Tensor& x) {
                             Generator gen(99);
                             return conv.forward(x, graph, gen);
                           }),
                           gradcheck_inputs(random_tensor({7, 5}, rng, -1, 1, DType::f64, Device::cuda), slots));
  }
}

TEST(CudaGAT, ModelGradientsOnTheDevice) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(21);
  const Graph graph = small_graph(7, rng).to(Device::cuda);
  Generator init(8);
  GAT model(small_config(5, 3, DType::f64), init);
  model.to(Device::cuda);
  // Non-zero biases: a node whose attention edges are all dropped would otherwise feed exactly 0
  // into the ELU, where its second derivative jumps and central differences lose accuracy.
  model.conv1->bias = random_tensor(model.conv1->bias.shape(), rng, -1, 1, DType::f64, Device::cuda);
  model.conv2->bias = random_tensor(model.conv2->bias.shape(), rng, -1, 1, DType::f64, Device::cuda);
  std::vector<Tensor*> slots = slots_of(*model.conv1);
  for (Tensor* s : slots_of(*model.conv2)) slots.push_back(s);
  expect_gradients_match("cuda GAT train mode", with_slots(slots, [&](const Tensor& x) {
                           Generator gen(77);
                           return model.forward(x, graph, gen);
                         }),
                         gradcheck_inputs(random_tensor({7, 5}, rng, -1, 1, DType::f64, Device::cuda), slots),
                         1e-6, 1e-5);
}

TEST(CudaTraining, FollowsTheCpuAndIsBitwiseReproducible) {
  GAT_SKIP_WITHOUT_CUDA();
  const Dataset data = generated_dataset();
  const Trajectory cpu = train_on(Device::cpu, data, 5);
  const Trajectory gpu = train_on(Device::cuda, data, 5);
  ASSERT_EQ(gpu.losses.size(), 5u);
  for (size_t e = 0; e < cpu.losses.size(); ++e) {
    EXPECT_NEAR(gpu.losses[e], cpu.losses[e], 1e-4 * std::abs(cpu.losses[e])) << "epoch " << e + 1;
    EXPECT_NEAR(gpu.val_losses[e], cpu.val_losses[e], 1e-4 * std::abs(cpu.val_losses[e])) << "epoch " << e + 1;
  }
  const Trajectory again = train_on(Device::cuda, data, 5);
  EXPECT_EQ(again.losses, gpu.losses);
  ASSERT_EQ(again.params.size(), gpu.params.size());
  for (size_t i = 0; i < gpu.params.size(); ++i)
    EXPECT_EQ(std::memcmp(again.params[i].raw_data(), gpu.params[i].raw_data(), gpu.params[i].nbytes()), 0)
        << "parameter " << i;
}

namespace {
void expect_same_run(const Trajectory& a, const Trajectory& b, const std::string& what) {
  EXPECT_EQ(a.losses, b.losses) << what;
  EXPECT_EQ(a.val_losses, b.val_losses) << what;
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(std::memcmp(a.params[i].raw_data(), b.params[i].raw_data(), a.params[i].nbytes()), 0)
        << what << ": parameter " << i;
}
}  // namespace

TEST(CudaTraining, RecordedGraphsReplayTheEagerStepsBitForBit) {
  GAT_SKIP_WITHOUT_CUDA();
  const Dataset data = generated_dataset();
  const Trajectory replayed = train_on(Device::cuda, data, 30, 100, true);  // graphs on
  const Trajectory eager = train_on(Device::cuda, data, 30, 100, false);
  EXPECT_EQ(replayed.result.cuda_graphs_note, "recorded");
  EXPECT_EQ(eager.result.cuda_graphs_note, "off");
  ASSERT_EQ(replayed.losses.size(), 30u);
  // Dropout draws fresh masks at every replay: the training loss changes from epoch to epoch
  // exactly as in the eager run.
  expect_same_run(replayed, eager, "graphs vs eager");
}

TEST(CudaTraining, AStepThatCannotBeRecordedRunsEagerly) {
  GAT_SKIP_WITHOUT_CUDA();
  const Dataset data = generated_dataset();
  const Trajectory fallback = train_on(Device::cuda, data, 10, 100, true, true);
  const Trajectory eager = train_on(Device::cuda, data, 10, 100, false, true);
  EXPECT_EQ(fallback.result.cuda_graphs_note.rfind("not recorded: ", 0), 0u)
      << fallback.result.cuda_graphs_note;
  expect_same_run(fallback, eager, "fallback vs eager");
  // The device is usable afterwards: recording works again.
  EXPECT_EQ(train_on(Device::cuda, data, 3, 100, true).result.cuda_graphs_note, "recorded");
}

TEST(CudaTraining, CheckpointsMoveBetweenDevices) {
  GAT_SKIP_WITHOUT_CUDA();
  Generator init_a(1), init_b(2);
  GAT on_gpu(small_config(6, 3, DType::f32), init_a);
  on_gpu.to(Device::cuda);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("gat_cuda_ckpt_" + std::to_string(::getpid()) + ".safetensors")).string();
  io::save(on_gpu, path);
  GAT on_cpu(small_config(6, 3, DType::f32), init_b);
  io::load_into(on_cpu, path);
  const auto a = on_gpu.named_parameters(), b = on_cpu.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(rel_error(b[i].second, a[i].second), 0.0) << a[i].first;
  GAT back_on_gpu(small_config(6, 3, DType::f32), init_b);
  back_on_gpu.to(Device::cuda);
  io::load_into(back_on_gpu, path);
  EXPECT_TRUE(back_on_gpu.conv1->att_src.is_cuda());
  EXPECT_EQ(rel_error(back_on_gpu.conv1->att_src, on_gpu.conv1->att_src), 0.0);
  std::filesystem::remove(path);
}

// The acceptance figures on the real data: Cora with the paper's recipe (dropout
// included), 50 epochs on both devices, and 200-epoch runs on the GPU. Three tests rather than one
// so that each fits a compute-sanitizer run: racecheck took 9 minutes over the 650 epochs of one.
class CudaCoraTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    GAT_SKIP_WITHOUT_CUDA();
    try {
      cora = load_training_dataset("cora");
    } catch (const Error& e) {
      GTEST_SKIP() << "Cora not available: " << e.what();
    }
  }
  Dataset cora;
};

TEST_F(CudaCoraTraining, LossesFollowTheCpuFor50Epochs) {
  const Trajectory cpu = train_on(Device::cpu, cora, 50, 1000);
  const Trajectory gpu = train_on(Device::cuda, cora, 50, 1000);
  ASSERT_EQ(gpu.losses.size(), 50u);
  for (size_t e = 0; e < cpu.losses.size(); ++e)
    EXPECT_NEAR(gpu.losses[e], cpu.losses[e], 1e-4 * std::abs(cpu.losses[e])) << "epoch " << e + 1;
}

TEST_F(CudaCoraTraining, TwoRunsAreBitwiseIdenticalAfter200Epochs) {
  const Trajectory first = train_on(Device::cuda, cora, 200, 1000, false);
  const Trajectory second = train_on(Device::cuda, cora, 200, 1000, false);
  ASSERT_EQ(first.losses.size(), 200u);
  expect_same_run(first, second, "two runs");
}

TEST_F(CudaCoraTraining, AReplayedRunIsBitwiseTheEagerRunAfter200Epochs) {
  const Trajectory eager = train_on(Device::cuda, cora, 200, 1000, false);
  const Trajectory replayed = train_on(Device::cuda, cora, 200, 1000, true);
  ASSERT_EQ(replayed.losses.size(), 200u);
  EXPECT_EQ(replayed.result.cuda_graphs_note, "recorded");
  expect_same_run(eager, replayed, "graphs vs eager");
}
