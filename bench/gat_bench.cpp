// gat_bench: this project's side of bench/compare_pyg.py. Each subcommand measures one workload
// and prints one JSON object on the last line of stdout.
//
//   gat_bench kernel  --graph FILE --heads H --features F [--op scores|gat] [--device cuda|cpu]
//       csr_softmax_aggregate forward and backward (both gradients) on the graph in FILE
//       (int64 N, int64 E, int32 row_ptr[N+1], int32 col_idx[E]; see compare_pyg.py); with
//       --op gat, gat_attention_aggregate's kernels as a training step runs them (the forward
//       with the positive sums on CUDA, the backward with d el, d er and d values)
//   gat_bench gatconv --graph FILE --in 64 --heads 8 --out 8 [--edge-dim D] [--self-loops]
//                     [--device ...]
//       one GATConv forward + backward, time and peak device memory; with --edge-dim, random
//       edge features (E, D) (no gradient, as data); --self-loops adds them (fill_value mean)
//   gat_bench gatv2conv --graph FILE --in 64 --heads 8 --out 8 [--self-loops] [--device ...]
//       the same for GATv2Conv
//   gat_bench train   --dataset cora [--data-dir DIR] [--precision f32|bf16] [--device ...]
//       one training step (forward, backward, Adam) and 200 epochs with evaluation, the model in
//       GATConfig::precision (docs/precision.md)
//   gat_bench sampled --nodes N --degree D --features F --classes C --train N_TRAIN --val N_VAL
//                     [--signal 0.5] [--intra-fraction 0.8] [--seed S] [--fanouts 10,10]
//                     [--batch-size 1024] [--sample-on cpu|device] [--gather-on cpu|device]
//                     [--write DIR] [--no-eval] [--inference-batch-size N] [--device ...]
//       mini-batch training on a generated graph (datasets/generator.h; --signal and
//       --intra-fraction are its options, with its defaults; the features stay in host memory):
//       the sampler alone over one epoch's batches (on CUDA with the blocks' graphs built on the
//       device, ops::block_graph, as the loader does), the loader alone (made: loader_make_ms,
//       which registers the features for the GPU's gather; then sampling and the rows' gather, by
//       the GPU from mapped host memory, or with --gather-on cpu by the host, then copied), one
//       training epoch (sampled_step over the loader's batches) and, unless
//       --no-eval, its test accuracy from the exact layer-wise inference (in chunks of
//       --inference-batch-size destinations; default SampledTraining's, every node). --write DIR
//       first writes the dataset for bench/neighbor_sampling.py's PyG side: graph.bin (as
//       --graph), x.bin (N, F) f32, y.bin (N,) i32, train.bin, val.bin, test.bin i32 node ids
//       (the stages of generating the graph go to stderr as they end)
//
// GPU times come from CUDA events around many launches (median of repeats), CPU times from a
// steady clock.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gat/datasets/generator.h"
#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/detail/clock.h"
#include "gat/framework/graph.h"
#include "gat/framework/io.h"
#include "gat/framework/neighbor_sampler.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/block_graph.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/process.h"
#include "gat/framework/progress.h"
#include "gat/framework/quote.h"
#include "gat/layers/gat_conv.h"
#include "gat/layers/gatv2_conv.h"
#include "gat/models/gat.h"
#include "gat/train/neighbor_loader.h"
#include "gat/train/sampled_training.h"
#include "gat/train/trainer.h"
#include "timing.h"

using namespace gat;
using gat::detail::ms_since;

namespace {

Graph read_graph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GAT_CHECK(in, "gat_bench: cannot open graph file ", path);
  int64_t n = 0, e = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  in.read(reinterpret_cast<char*>(&e), 8);
  // (An empty file, /dev/null, read as "bad header (0 nodes, 0 edges; each count in range)".)
  GAT_CHECK(in, "gat_bench: ", path, ": shorter than the 16-byte header (node and edge counts, int64)");
  // int32 row_ptr and col_idx: at most 2^31 - 1 nodes and edges (a bigger count asked for a
  // vector of 2^61 entries, whose error named no file).
  constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();
  GAT_CHECK(in && n >= 0 && e >= 0 && n <= kMaxCount && e <= kMaxCount, "gat_bench: ", path, ": bad header (",
            n, " nodes, ", e, " edges; each count in [0, ", kMaxCount, "])");
  std::vector<int32_t> row_ptr(static_cast<size_t>(n) + 1), col_idx(static_cast<size_t>(e));
  in.read(reinterpret_cast<char*>(row_ptr.data()), static_cast<std::streamsize>(row_ptr.size() * 4));
  in.read(reinterpret_cast<char*>(col_idx.data()), static_cast<std::streamsize>(col_idx.size() * 4));
  GAT_CHECK(in, "gat_bench: ", path, ": truncated (", n, " nodes, ", e, " edges announced)");
  // Bytes past the announced arrays: not this format (/dev/zero read as an empty graph, exit 0).
  GAT_CHECK(in.peek() == std::ifstream::traits_type::eof(), "gat_bench: ", path, ": bytes after the ", n,
            " nodes and ", e, " edges announced (not a graph file of this format)");
  return Graph::from_csr(std::move(row_ptr), std::move(col_idx));
}

Tensor random_f32(const Shape& shape, uint64_t seed, Device device) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape).to(device);
}

// Median milliseconds of fn() over `reps` repeats of `inner` calls each, after a warm-up.
double median_ms(Device device, const std::function<void()>& fn, int reps = 10, int inner = 1) {
  for (int i = 0; i < 2; ++i) fn();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) times.push_back(bench::time_ms(device, fn, inner) / inner);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// What the inputs of both attention kernels share: the graph, the values (N, H, F) and no dropout.
template <class Inputs>
Inputs kernel_inputs(const Graph& graph, const Tensor& value) {
  Inputs in;
  in.graph = &graph;
  in.node_value = value;
  in.attn_dropout = DropoutKey{};
  return in;
}

nlohmann::json bench_kernel(const std::string& graph_path, int64_t heads, int64_t features,
                            const std::string& op, Device device) {
  Graph graph = read_graph(graph_path).to(device);
  const int64_t n = graph.num_nodes(), e = graph.num_edges();
  Tensor value = random_f32({n, heads, features}, 2, device);  // (N, H, F)
  Tensor grad_out = random_f32({n, heads, features}, 3, device);
  Tensor out = Tensor::empty({n, heads, features}, DType::f32, device);
  Tensor lse = Tensor::empty({n, heads}, DType::f32, device);
  Tensor grad_value = Tensor::empty({n, heads, features}, DType::f32, device);
  // The kernels themselves, without the op's allocations and autograd record.
  std::function<void()> forward, backward;
  Tensor scores, grad_scores, el, er, pos_out, pos_weight, grad_el, grad_er;
  if (op == "scores") {
    scores = random_f32({e, heads}, 1, device);  // (E, H)
    grad_scores = Tensor::empty({e, heads}, DType::f32, device);
    auto in = kernel_inputs<ops::CsrSoftmaxAggregateInputs>(graph, value);
    in.edge_scores = scores;
    forward = [args = ops::CsrSoftmaxAggregateForwardArgs{in, &out, &lse}] {
      ops::kernels::csr_softmax_aggregate_forward(args);
    };
    backward = [args = ops::CsrSoftmaxAggregateBackwardArgs{in, lse, grad_out, &grad_scores, &grad_value}] {
      ops::kernels::csr_softmax_aggregate_backward(args);
    };
  } else {
    el = random_f32({n, heads}, 1, device), er = random_f32({n, heads}, 4, device);  // (N, H)
    grad_el = Tensor::empty({n, heads}, DType::f32, device);
    grad_er = Tensor::empty({n, heads}, DType::f32, device);
    const bool positive = device == Device::cuda;  // as gat_attention_aggregate asks in training
    if (positive) {
      pos_out = Tensor::empty({n, heads, features}, DType::f32, device);
      pos_weight = Tensor::empty({n, heads}, DType::f32, device);
    }
    auto in = kernel_inputs<ops::GatAttentionInputs>(graph, value);
    in.el = el;
    in.er = er;
    in.negative_slope = 0.2;
    ops::GatAttentionForwardArgs fwd_args{in};
    fwd_args.out = &out;
    fwd_args.lse = &lse;
    fwd_args.pos_out = positive ? &pos_out : nullptr;
    fwd_args.pos_weight = positive ? &pos_weight : nullptr;
    ops::GatAttentionBackwardArgs bwd_args{in};
    bwd_args.out = out;
    bwd_args.lse = lse;
    bwd_args.pos_out = pos_out;
    bwd_args.pos_weight = pos_weight;
    bwd_args.grad_out = grad_out;
    bwd_args.grad_el = &grad_el;
    bwd_args.grad_er = &grad_er;
    bwd_args.grad_value = &grad_value;
    forward = [fwd_args] { ops::kernels::gat_attention_aggregate_forward(fwd_args); };
    backward = [bwd_args] { ops::kernels::gat_attention_aggregate_backward(bwd_args); };
  }
  // Small graphs: many launches per timing so launch gaps, not timer resolution, dominate.
  const int inner = e < 100000 ? 200 : 1;
  forward();
  const double fwd = median_ms(device, forward, 15, inner);
  const double bwd = median_ms(device, backward, 15, inner);
  return {{"workload", "kernel"}, {"op", op},          {"device", device_name(device)},
          {"nodes", n},           {"edges", e},        {"heads", heads},
          {"features", features}, {"forward_ms", fwd}, {"backward_ms", bwd}};
}

// One forward + backward of a Layer (GATConv or GATv2Conv) built with `options`, with self loops
// or not and with random edge features (E, edge_dim) when edge_dim > 0 (GATConv only), as the
// PyG side of compare_pyg.py: the median time and the peak device memory above what the graph, x
// and the parameters hold.
template <class Layer, class Options>
nlohmann::json bench_conv(const char* workload, const std::string& graph_path, Options options,
                          int64_t edge_dim, bool self_loops, Device device) {
  Graph graph = read_graph(graph_path).to(device);
  options.add_self_loops = self_loops;
  Generator init(1);
  Layer conv(options, init);
  conv.to(device);
  Tensor x = random_f32({graph.num_nodes(), options.in_channels}, 4, device).set_requires_grad();
  const Tensor edge_attr = edge_dim > 0 ? random_f32({graph.num_edges(), edge_dim}, 5, device) : Tensor();
  Generator gen(2);
  auto forward = [&] {  // edge features: GATConv's
    if constexpr (std::is_same_v<Layer, GATConv>)
      return conv.forward(x, graph, edge_attr, gen);
    else
      return conv.forward(x, graph, gen);
  };
  auto step = [&] {
    ops::sum(forward()).backward();
    conv.zero_grad();
    x.zero_grad();
  };
  step();
  cuda::synchronize();
  const size_t base = cuda::memory_allocated();
  cuda::reset_peak_memory();
  const double ms = median_ms(device, step, 5);
  const size_t peak = cuda::peak_memory_allocated() - base;
  // What was alive at that peak (x, the graph and the parameters included): [name, bytes, blocks].
  nlohmann::json blocks = nlohmann::json::array();
  for (const cuda::PeakBlocks& b : cuda::peak_memory_breakdown())
    blocks.push_back({b.what, b.bytes, b.count});
  return {{"workload", workload},        {"device", device_name(device)},
          {"nodes", graph.num_nodes()},  {"edges", graph.num_edges()},
          {"edge_dim", edge_dim},        {"self_loops", self_loops},
          {"forward_backward_ms", ms},   {"peak_bytes", peak},
          {"peak_device_blocks", blocks}};
}

// in -> heads x out options of either layer.
template <class Options>
Options conv_options(int64_t in, int64_t heads, int64_t out_ch) {
  Options options;
  options.in_channels = in;
  options.out_channels = out_ch;
  options.heads = heads;
  return options;
}

// `epochs` epochs with evaluation; the median step and epoch after 10 epochs of warm-up.
// The features are made beforehand, as PyG's side loads and normalises its data before timing.
nlohmann::json train_epochs(const Dataset& data, const Features& x, DType precision, bool cuda_graphs,
                            int64_t epochs) {
  GATConfig config;
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.precision = precision;
  Generator init(0);
  GAT model(config, init);
  model.to(data.x.device());
  ForwardFn forward = [&](const Features& x, const Graph& g, Generator& gen) {
    return model.forward(x, g, gen);
  };
  TrainOptions options;
  options.max_epochs = epochs;
  options.patience = 1 << 30;  // run all epochs
  options.cuda_graphs = cuda_graphs;
  std::vector<double> step_ms, epoch_ms;
  Generator gen(0);
  const auto t0 = std::chrono::steady_clock::now();
  const TrainResult r =
      train_node_classifier(model, forward, data, x, options, gen, [&](const EpochStats& s) {
        step_ms.push_back(s.step_ms);
        epoch_ms.push_back(s.ms);
      });
  cuda::synchronize();
  const double total = ms_since(t0);
  auto steady_median = [](std::vector<double> v) {  // after 10 epochs of warm-up
    v.erase(v.begin(), v.begin() + std::min<std::ptrdiff_t>(10, static_cast<std::ptrdiff_t>(v.size()) - 1));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  // Epochs 1 and 2 hold the one-off costs (caches; recording the graphs before epoch 2's step).
  return {{"step_ms", steady_median(step_ms)},
          {"epoch_ms", steady_median(epoch_ms)},
          {"first_epochs_ms", {epoch_ms.at(0), epoch_ms.at(1)}},
          {"epochs200_ms", total},
          {"cuda_graphs", r.cuda_graphs_note}};
}

// On CUDA both ways: replaying recorded graphs (the default) and eager steps. A 3-epoch run
// first warms the process up (CUDA's lazy module loading, cuBLAS's first calls), as
// compare_pyg.py's PyG side is warm when its 200 epochs are timed.
nlohmann::json bench_train(const std::string& dataset, const std::string& data_dir, DType precision,
                           Device device) {
  const Dataset data = dataset_to(load_training_dataset(dataset, data_dir), device);
  nlohmann::json out = {{"workload", "train"},
                        {"dataset", dataset},
                        {"precision", dtype_name(precision)},
                        {"device", device_name(device)}};
  const Features x = Features::choose(data.x);
  train_epochs(data, x, precision, true, 3);
  out.update(train_epochs(data, x, precision, true, 200));
  if (device == Device::cuda) {
    const nlohmann::json eager = train_epochs(data, x, precision, false, 200);
    out["eager_step_ms"] = eager["step_ms"];
    out["eager_epochs200_ms"] = eager["epochs200_ms"];
  }
  return out;
}

// The raw bytes of a host tensor to DIR/name.
// Each file is written as gat_train writes its outputs (io::OutputFile): never through a link
// or into a device or FIFO, whole or not at all (std::ofstream wrote through a link planted in
// DIR, and a full disk's failed flush at its close went unchecked).
void write_raw(const std::string& dir, const std::string& name, const std::vector<const Tensor*>& tensors,
               const std::string& header = "") {
  io::OutputFile out(dir + "/" + name, "gat_bench --write");
  out.write(header);
  for (const Tensor* t : tensors) out.write(t->raw_data(), t->nbytes());
  out.commit();
}

// The dataset as bench/neighbor_sampling.py reads it (the graph as read_graph reads it).
void write_dataset(const Dataset& data, const std::string& dir) {
  const int64_t n = data.graph.num_nodes(), e = data.graph.num_edges();
  std::string header(16, '\0');  // int64 N, int64 E (little-endian hosts)
  std::memcpy(header.data(), &n, 8);
  std::memcpy(header.data() + 8, &e, 8);
  write_raw(dir, "graph.bin", {&data.graph.row_ptr(), &data.graph.edge_src()}, header);
  write_raw(dir, "x.bin", {&data.x});
  write_raw(dir, "y.bin", {&data.y});
  write_raw(dir, "train.bin", {&data.train_index});
  write_raw(dir, "val.bin", {&data.val_index});
  write_raw(dir, "test.bin", {&data.test_index});
}

struct SampledBench {
  int64_t nodes = 0, classes = 0, features = 0, train = 0, val = 0;
  double degree = 0;
  double signal = GeneratorOptions{}.signal;                  // how far the features say the class
  double intra_fraction = GeneratorOptions{}.intra_fraction;  // how often a neighbour shares it
  uint64_t seed = 0;  // the generator's, the sampler's and the loader's
  // The loader's options but its seed: batch_size 1024, fanouts {10, 10}; with gather_on_device
  // the GPU reads the rows from mapped host memory.
  NeighborLoaderOptions loader{1024, {10, 10}};
  bool evaluate = true;  // the exact layer-wise inference after the epoch
  int64_t inference_batch_size = SampledTraining{}.inference_batch_size;
  std::string write_dir;
};

nlohmann::json bench_sampled(const SampledBench& b, Device device) {
  GeneratorOptions g;
  g.num_nodes = b.nodes;
  g.avg_degree = b.degree;
  g.seed = b.seed;
  g.num_classes = b.classes;
  g.num_features = b.features;
  g.signal = b.signal;
  g.intra_fraction = b.intra_fraction;
  // Checked before the division: --classes 0 divided by zero (SIGFPE).
  GAT_CHECK(b.classes > 0 && b.train >= 0, "gat_bench sampled: --classes ", b.classes,
            " must be positive and --train ", b.train, " not negative");
  g.train_per_class = b.train / b.classes + (b.train % b.classes != 0);
  g.val_size = b.val;
  g.test_size = b.nodes;  // the rest
  auto t0 = std::chrono::steady_clock::now();
  const std::clock_t cpu0 = std::clock();  // the process's CPU time: every thread's
  const Dataset data = generate_sbm(g);
  const double generate_cpu_ms = 1e3 * static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  nlohmann::json out = {{"workload", "sampled"},
                        {"device", device_name(device)},
                        {"nodes", data.num_nodes()},
                        {"edges", data.graph.num_edges()},
                        {"features", data.num_features()},
                        {"classes", data.num_classes},
                        {"signal", b.signal},
                        {"intra_fraction", b.intra_fraction},
                        {"train_nodes", data.train_index.numel()},
                        {"test_nodes", data.test_index.numel()},
                        {"fanouts", b.loader.fanouts},
                        {"batch_size", b.loader.batch_size},
                        {"sample_on", b.loader.sample_on_device && device == Device::cuda ? "device" : "cpu"},
                        {"gather_on", b.loader.gather_on_device && device == Device::cuda ? "device" : "cpu"},
                        {"generate_ms", ms_since(t0)},
                        {"generate_cpu_ms", generate_cpu_ms}};
  if (!b.write_dir.empty()) {
    t0 = std::chrono::steady_clock::now();
    write_dataset(data, b.write_dir);
    out["write_ms"] = ms_since(t0);
  }
  NeighborLoaderOptions lo = b.loader;
  lo.seed = b.seed;
  const std::vector<int32_t> train = data.train_index.to_vector<int32_t>();
  const auto batches = static_cast<int64_t>((train.size() + static_cast<size_t>(b.loader.batch_size) - 1) /
                                            static_cast<size_t>(b.loader.batch_size));
  // The sampler alone, one epoch's batches, as the loader takes them: on CUDA the blocks built on
  // the device with their loops (ops::block_graph), on the CPU the host's blocks. The edges
  // counted are the sampled ones, without the loops.
  {
    const NeighborSampler sampler(data.graph, {b.loader.fanouts, false, b.seed},
                                  b.loader.sample_on_device ? device : Device::cpu);
    const std::vector<int32_t> order = shuffle_nodes(train, b.seed, 0);
    auto sample = [&](int64_t k) {  // batch k's sampled edges
      const auto first = order.begin() + k * b.loader.batch_size;
      const auto last = order.begin() + std::min<int64_t>((k + 1) * b.loader.batch_size, order.size());
      const std::vector<int32_t> seeds(first, last);
      int64_t edges = 0;
      if (sampler.device() == Device::cuda) {
        for (const ops::SampledLayer& layer : sampler.sample_layers(seeds, static_cast<uint64_t>(k))) {
          ops::block_graph(layer.row_ptr, layer.col, layer.src_nodes.numel());
          edges += layer.col.numel();
        }
      } else {
        for (const SampledBlock& block : sampler.sample(seeds, static_cast<uint64_t>(k)).blocks)
          edges += block.graph.num_edges();
      }
      return edges;
    };
    sample(0);  // warm-up
    int64_t edges = 0;
    t0 = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < batches; ++k) edges += sample(k);
    if (sampler.device() == Device::cuda) cuda::synchronize();
    const double ms = ms_since(t0);
    out["sample_epoch_ms"] = ms;
    out["sample_seeds_per_s"] = static_cast<double>(train.size()) / ms * 1e3;
    out["sample_edges_per_s"] = static_cast<double>(edges) / ms * 1e3;
  }
  // The loader alone: sampling, gathering and copying every batch of an epoch, no step. Making
  // it registers the features for the GPU's gather (NeighborLoaderOptions::gather_on_device), so
  // the training epoch below takes its next epoch rather than a loader of its own.
  t0 = std::chrono::steady_clock::now();
  NeighborLoader loader(data.graph, data.x, data.y, data.edge_attr, train, lo, device);
  out["loader_make_ms"] = ms_since(t0);
  {
    t0 = std::chrono::steady_clock::now();
    loader.start_epoch(0);
    int64_t rows = 0;
    while (std::optional<MiniBatch> batch = loader.next()) rows += batch->x.size(0);
    cuda::synchronize();
    const double ms = ms_since(t0);
    out["loader_epoch_ms"] = ms;
    out["loader_input_rows"] = rows;
    out["loader_bytes_per_s"] = static_cast<double>(rows * data.num_features() * 4) / ms * 1e3;
  }
  // One training epoch (its steps, with their waits for batches), then the exact evaluation.
  GATConfig config;
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.value_dropout = 0.0;  // PyG's GATConv has none
  Generator init(b.seed);
  GAT model(config, init);
  model.to(device);
  const std::unique_ptr<Optimizer> optimizer = make_run_optimizer(model, TrainOptions{});
  Generator gen(b.seed);
  StepTotals totals;
  t0 = std::chrono::steady_clock::now();
  loader.start_epoch(1);
  while (std::optional<MiniBatch> batch = loader.next()) sampled_step(model, *batch, *optimizer, gen, totals);
  cuda::synchronize();
  const double train_ms = ms_since(t0);
  out["train_epoch_ms"] = train_ms;
  out["train_seeds_per_s"] = static_cast<double>(train.size()) / train_ms * 1e3;
  out["train_loss"] = totals.loss_sum / totals.rows;
  out["peak_device_bytes"] = cuda::available() ? cuda::peak_memory_allocated() : 0;
  if (b.evaluate) {
    t0 = std::chrono::steady_clock::now();
    const Tensor logits =
        layerwise_inference(model, data.graph, data.x, data.edge_attr, b.inference_batch_size, device);
    out["inference_ms"] = ms_since(t0);
    out["inference_batch_size"] = b.inference_batch_size;
    out["test_acc"] = evaluate_logits(logits, data).test.acc;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  process::ignore_write_signals();
  process::size_thread_stacks();
  CLI::App app{"gat_bench: this project's side of bench/compare_pyg.py"};
  app.require_subcommand(1);
  std::string device_flag = "auto", graph_path, dataset = "cora", data_dir, kernel_op = "scores";
  int64_t heads = 1, features = 64, in_channels = 64, out_channels = 8, edge_dim = 0;
  bool self_loops = false;
  auto* kernel = app.add_subcommand("kernel", "csr_softmax_aggregate forward and backward");
  kernel->add_option("--graph", graph_path, "graph file")->required();
  // Sizes are checked here, as gat_train's flags are: --batch-size 0 divided by zero (SIGFPE),
  // --heads 0 timed an empty tensor with exit status 0.
  const auto heads_range = CLI::Range(GATConfig::kHeadsRange.lo, GATConfig::kHeadsRange.hi);
  const auto size_range = CLI::Range(int64_t{1}, int64_t{std::numeric_limits<int32_t>::max()});
  const auto batch_range =
      CLI::Range(NeighborLoaderOptions::kBatchSizeRange.lo, NeighborLoaderOptions::kBatchSizeRange.hi);
  kernel->add_option("--heads", heads)->check(heads_range);
  kernel->add_option("--features", features)->check(size_range);
  kernel->add_option("--op", kernel_op, "scores: csr_softmax_aggregate; gat: gat_attention_aggregate")
      ->check(CLI::IsMember({"scores", "gat"}));
  auto* gatconv = app.add_subcommand("gatconv", "one GATConv forward + backward");
  auto* gatv2conv = app.add_subcommand("gatv2conv", "one GATv2Conv forward + backward");
  for (auto* sub : {gatconv, gatv2conv}) {
    sub->add_option("--graph", graph_path, "graph file")->required();
    sub->add_option("--in", in_channels)->check(size_range);
    sub->add_option("--heads", heads)->check(heads_range);
    sub->add_option("--out", out_channels)->check(size_range);
    sub->add_flag("--self-loops", self_loops);
  }
  gatconv->add_option("--edge-dim", edge_dim)
      ->check(CLI::Range(GATConfig::kEdgeDimRange.lo, GATConfig::kEdgeDimRange.hi));
  auto* train = app.add_subcommand("train", "training step and 200 epochs on a dataset");
  train->add_option("--dataset", dataset);
  train->add_option("--data-dir", data_dir);
  std::string precision = "f32";
  train->add_option("--precision", precision, "the model's precision")->check(CLI::IsMember({"f32", "bf16"}));
  SampledBench sampled_bench;
  std::string sample_on = "device", gather_on = "device";
  auto* sampled = app.add_subcommand("sampled", "mini-batch training on a generated graph");
  sampled->add_option("--nodes", sampled_bench.nodes)->required();
  sampled->add_option("--degree", sampled_bench.degree)->required();
  sampled->add_option("--features", sampled_bench.features)->required();
  sampled->add_option("--classes", sampled_bench.classes)->required();
  sampled->add_option("--train", sampled_bench.train, "training nodes (split evenly over the classes)")
      ->required();
  sampled->add_option("--val", sampled_bench.val)->required();
  sampled
      ->add_option("--signal", sampled_bench.signal,
                   "the generator's feature signal (the noise is uniform in [-1, 1))")
      ->capture_default_str();
  sampled
      ->add_option("--intra-fraction", sampled_bench.intra_fraction,
                   "the generator's share of edges drawn inside a class")
      ->capture_default_str();
  // CLI11 read "-1" into the unsigned seed as 2^64 - 1, without a word.
  sampled->add_option("--seed", sampled_bench.seed)->check([](const std::string& v) {
    return v.find('-') == std::string::npos ? std::string() : "'" + v + "' is not a seed in [0, 2^64 - 1]";
  });
  sampled->add_option("--fanouts", sampled_bench.loader.fanouts)
      ->delimiter(',')
      ->check(CLI::Range(NeighborSamplerOptions::kFanoutRange.lo, NeighborSamplerOptions::kFanoutRange.hi));
  sampled->add_option("--batch-size", sampled_bench.loader.batch_size)->check(batch_range);
  sampled->add_option("--sample-on", sample_on)->check(CLI::IsMember({"cpu", "device"}));
  sampled->add_option("--gather-on", gather_on)->check(CLI::IsMember({"cpu", "device"}));
  sampled->add_option("--write", sampled_bench.write_dir, "write the dataset here for PyG");
  sampled->add_flag("!--no-eval", sampled_bench.evaluate, "skip the layer-wise inference after the epoch");
  sampled
      ->add_option("--inference-batch-size", sampled_bench.inference_batch_size,
                   "destinations per chunk of the layer-wise inference")
      ->check(batch_range);
  for (auto* sub : {kernel, gatconv, gatv2conv, train, sampled})
    sub->add_option("--device", device_flag)->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  CLI11_PARSE(app, argc, argv);
  if (*sampled && static_cast<int64_t>(sampled_bench.loader.fanouts.size()) != GAT::kLayers) {
    // (one fanout made "GAT::forward: 1 blocks for 2 layers" after the graph was generated)
    std::fprintf(stderr, "gat_bench: --fanouts: %zu fanouts, the model has %lld layers (one each)\n",
                 sampled_bench.loader.fanouts.size(), static_cast<long long>(GAT::kLayers));
    return 2;
  }
  if (const std::string why = process::unfit_environment(); !why.empty()) {
    std::fprintf(stderr, "gat_bench: %s\n", why.c_str());
    return 1;
  }
  try {
    const Device device =
        device_flag == "cpu" || (device_flag == "auto" && !cuda::available()) ? Device::cpu : Device::cuda;
    nlohmann::json result;
    if (*kernel) result = bench_kernel(graph_path, heads, features, kernel_op, device);
    if (*gatconv) {
      GATConvOptions options = conv_options<GATConvOptions>(in_channels, heads, out_channels);
      options.edge_dim = edge_dim;
      result = bench_conv<GATConv>("gatconv", graph_path, options, edge_dim, self_loops, device);
    }
    if (*gatv2conv)
      result = bench_conv<GATv2Conv>("gatv2conv", graph_path,
                                     conv_options<GATv2ConvOptions>(in_channels, heads, out_channels), 0,
                                     self_loops, device);
    if (*train)
      result = bench_train(dataset, data_dir, precision == dtype_name(DType::bf16) ? DType::bf16 : DType::f32,
                           device);
    if (*sampled) {
      progress::enable(true);  // the generator's and the graph's stages on stderr: minutes at 100M nodes
      sampled_bench.loader.sample_on_device = sample_on == "device";
      sampled_bench.loader.gather_on_device = gather_on == "device";
      result = bench_sampled(sampled_bench, device);
    }
    std::cout << result.dump() << std::endl;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gat_bench: out of memory\n");
    return 1;
  } catch (const std::exception& e) {  // gat::Error and anything from the libraries beneath
    std::fprintf(stderr, "gat_bench: %s\n", cut_long_words(e.what()).c_str());
    return 1;
  }
  return process::check_stdout(0, "gat_bench");
}
