// A network of your own from gat's layers: two GATConv layers joined by a residual connection,
// LayerNorm and a Linear head, trained on Cora by a loop of its own: Adam with a cosine
// learning-rate schedule, gradient clipping, the test accuracy taken at the best validation epoch.
//
//   custom_network [DATA_DIR] [--epochs N]     (DATA_DIR: the Planetoid files; or $GAT_DATA_DIR)
#include <gat/framework/autograd.h>
#include <gat/framework/cuda_runtime.h>
#include <gat/framework/ops/accuracy.h>
#include <gat/framework/ops/activations.h>
#include <gat/framework/ops/arithmetic.h>
#include <gat/framework/ops/cross_entropy.h>
#include <gat/framework/optim.h>
#include <gat/layers/dropout.h>
#include <gat/layers/gat_conv.h>
#include <gat/layers/layer_norm.h>
#include <gat/layers/linear.h>
#include <gat/train/trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

using namespace gat;

class ResidualGAT : public Module {
 public:
  ResidualGAT(int64_t in_features, int64_t classes, Generator& init) {
    conv1 = register_module("conv1", std::make_shared<GATConv>(conv_options(in_features), init));
    conv2 = register_module("conv2", std::make_shared<GATConv>(conv_options(kWidth), init));
    norm = register_module("norm", std::make_shared<LayerNorm>(kWidth));
    head = register_module("head", std::make_shared<Linear>(kWidth, classes, true, init));
    dropout = register_module("dropout", std::make_shared<Dropout>(0.6));
  }

  // x (N, F) -> logits (N, classes)
  Tensor forward(const Features& x, const Graph& graph, Generator& gen) {
    Tensor h = ops::elu(conv1->forward(dropout->forward(x, gen), graph, gen));  // (N, 64)
    h = ops::add(h, conv2->forward(dropout->forward(h, gen), graph, gen));      // residual
    h = ops::elu(norm->forward(h));
    return head->forward(dropout->forward(h, gen));
  }

 private:
  static constexpr int64_t kWidth = 64;  // 8 heads x 8 features, concatenated
  static GATConvOptions conv_options(int64_t in) {
    GATConvOptions o;
    o.in_channels = in;
    o.out_channels = kWidth / 8;
    o.heads = 8;
    o.dropout = 0.6;  // on the attention weights
    return o;
  }
  std::shared_ptr<GATConv> conv1, conv2;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> head;
  std::shared_ptr<Dropout> dropout;
};

int main(int argc, char** argv) {
  const char* env = std::getenv("GAT_DATA_DIR");
  std::string data_dir = env ? env : "";
  int64_t epochs = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--epochs" && i + 1 < argc) {
      // Whole and in range: atoll read "abc" as 0, "1x" as 1 and 1e20 as 9.2e18 epochs.
      char* end = nullptr;
      errno = 0;
      epochs = std::strtoll(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || errno != 0 || epochs < 1 || epochs > 1000000)
        return std::fprintf(stderr, "custom_network: --epochs '%s' is not a whole number in [1, 1000000]\n",
                            argv[i]),
               2;
    } else if (arg[0] != '-') {
      data_dir = arg;
    } else {
      return std::fprintf(stderr, "usage: custom_network [DATA_DIR] [--epochs N]\n"), 2;
    }
  }
  if (data_dir.empty()) return std::fprintf(stderr, "custom_network: give DATA_DIR or set GAT_DATA_DIR\n"), 2;
  try {
    const Device device = cuda::available() ? Device::cuda : Device::cpu;
    const Dataset data = dataset_to(load_training_dataset("cora", data_dir), device);
    const Features x = Features::choose(data.x);  // sparse: Cora's features are 1.3% non-zero

    Generator init(0), dropout(1);
    ResidualGAT model(data.num_features(), data.num_classes, init);
    model.to(device);
    AdamOptions adam;
    adam.lr = 0.005;
    adam.weight_decay = 5e-4;
    Adam optimizer(model.parameters(), adam);
    CosineAnnealingLR schedule(optimizer, epochs);

    double best_val = -1, test_at_best = 0;
    int64_t best_epoch = 0;
    for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
      model.train();
      Tensor loss =
          ops::masked_cross_entropy(model.forward(x, data.graph, dropout), data.y, data.train_index);
      loss.backward();
      const double grad_norm = clip_grad_norm(model.parameters(), 2.0);
      optimizer.step();
      optimizer.zero_grad();
      schedule.step();

      model.eval();
      autograd::NoGradGuard no_grad;
      const Tensor logits = model.forward(x, data.graph, dropout);
      const double val = ops::accuracy(logits, data.y, data.val_index);
      if (val > best_val) {  // test accuracy at the best validation epoch
        best_val = val;
        best_epoch = epoch;
        test_at_best = ops::accuracy(logits, data.y, data.test_index);
      }
      if (epoch % 50 == 0)
        std::printf("epoch %4lld  loss %.4f  |grad| %.3f  lr %.5f  val_acc %.4f\n",
                    static_cast<long long>(epoch), loss.item(), grad_norm, optimizer.lr(), val);
    }
    std::printf("best epoch %lld: val_acc %.4f  test_acc %.4f\n", static_cast<long long>(best_epoch),
                best_val, test_at_best);
  } catch (const Error& e) {
    std::fprintf(stderr, "custom_network: %s\n", e.what());
    return 1;
  }
  return 0;
}
