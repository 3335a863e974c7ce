// gat_bench: this project's side of bench/compare_pyg.py. Each subcommand measures one workload
// and prints one JSON object on the last line of stdout.
//
//   gat_bench kernel  --graph FILE --heads H --features F [--device cuda|cpu]
//       csr_softmax_aggregate forward and backward (both gradients) on the graph in FILE
//       (int64 N, int64 E, int32 row_ptr[N+1], int32 col_idx[E]; see compare_pyg.py)
//   gat_bench gatconv --graph FILE --in 64 --heads 8 --out 8 [--device ...]
//       one GATConv forward + backward, time and peak device memory
//   gat_bench train   --dataset cora [--data-dir DIR] [--device ...]
//       one training step (forward, backward, Adam) and 200 epochs with evaluation
//
// GPU times come from CUDA events around many launches (median of repeats), CPU times from a
// steady clock.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <vector>

#if GAT_WITH_CUDA
#include "framework/cuda_check.h"
#endif

#include "framework/cuda_runtime.h"
#include "framework/graph.h"
#include "framework/ops/csr_softmax_aggregate.h"

using namespace gat;

namespace {

Graph read_graph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GAT_CHECK(in, "gat_bench: cannot open graph file ", path);
  int64_t n = 0, e = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  in.read(reinterpret_cast<char*>(&e), 8);
  GAT_CHECK(in && n >= 0 && e >= 0, "gat_bench: ", path, ": bad header");
  std::vector<int32_t> row_ptr(static_cast<size_t>(n) + 1), col_idx(static_cast<size_t>(e));
  in.read(reinterpret_cast<char*>(row_ptr.data()), static_cast<std::streamsize>(row_ptr.size() * 4));
  in.read(reinterpret_cast<char*>(col_idx.data()), static_cast<std::streamsize>(col_idx.size() * 4));
  GAT_CHECK(in, "gat_bench: ", path, ": truncated (", n, " nodes, ", e, " edges announced)");
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
  for (int r = 0; r < reps; ++r) {
#if GAT_WITH_CUDA
    if (device == Device::cuda) {
      cudaEvent_t start, stop;
      CUDA_CHECK(cudaEventCreate(&start));
      CUDA_CHECK(cudaEventCreate(&stop));
      CUDA_CHECK(cudaEventRecord(start, cuda::stream()));
      for (int i = 0; i < inner; ++i) fn();
      CUDA_CHECK(cudaEventRecord(stop, cuda::stream()));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      CUDA_CHECK(cudaEventDestroy(start));
      CUDA_CHECK(cudaEventDestroy(stop));
      times.push_back(ms / inner);
      continue;
    }
#endif
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) fn();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / inner);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

nlohmann::json bench_kernel(const std::string& graph_path, int64_t heads, int64_t features, Device device) {
  Graph graph = read_graph(graph_path).to(device);
  const int64_t n = graph.num_nodes(), e = graph.num_edges();
  Tensor scores = random_f32({e, heads}, 1, device);          // (E, H)
  Tensor value = random_f32({n, heads, features}, 2, device);  // (N, H, F)
  Tensor grad_out = random_f32({n, heads, features}, 3, device);
  Tensor out = Tensor::empty({n, heads, features}, DType::f32, device);
  Tensor lse = Tensor::empty({n, heads}, DType::f32, device);
  Tensor grad_scores = Tensor::empty({e, heads}, DType::f32, device);
  Tensor grad_value = Tensor::empty({n, heads, features}, DType::f32, device);
  const DropoutKey no_dropout{};
  auto forward = [&] {
    if (device == Device::cuda)
      ops::cuda_impl::csr_softmax_aggregate_forward(graph, scores, value, no_dropout, out, lse);
    else
      ops::cpu_impl::csr_softmax_aggregate_forward(graph, scores, value, no_dropout, out, lse);
  };
  auto backward = [&] {
    if (device == Device::cuda)
      ops::cuda_impl::csr_softmax_aggregate_backward(graph, scores, value, lse, grad_out, no_dropout,
                                                     &grad_scores, &grad_value);
    else
      ops::cpu_impl::csr_softmax_aggregate_backward(graph, scores, value, lse, grad_out, no_dropout,
                                                    &grad_scores, &grad_value);
  };
  // Small graphs: many launches per timing so launch gaps, not timer resolution, dominate.
  const int inner = e < 100000 ? 200 : 1;
  forward();
  const double fwd = median_ms(device, forward, 15, inner);
  const double bwd = median_ms(device, backward, 15, inner);
  return {{"workload", "kernel"}, {"device", device_name(device)}, {"nodes", n}, {"edges", e},
          {"heads", heads}, {"features", features}, {"forward_ms", fwd}, {"backward_ms", bwd}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gat_bench: this project's side of bench/compare_pyg.py"};
  app.require_subcommand(1);
  std::string device_flag = "auto", graph_path, dataset = "cora", data_dir;
  int64_t heads = 1, features = 64, in_channels = 64, out_channels = 8;
  auto* kernel = app.add_subcommand("kernel", "csr_softmax_aggregate forward and backward");
  kernel->add_option("--graph", graph_path, "graph file")->required();
  kernel->add_option("--heads", heads);
  kernel->add_option("--features", features);
  for (auto* sub : {kernel}) sub->add_option("--device", device_flag)->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = device_flag == "cpu" || (device_flag == "auto" && !cuda::available())
                              ? Device::cpu : Device::cuda;
    nlohmann::json result;
    if (*kernel) result = bench_kernel(graph_path, heads, features, device);
    std::cout << result.dump() << std::endl;
  } catch (const Error& e) {
    std::fprintf(stderr, "gat_bench: %s\n", e.what());
    return 1;
  }
  (void)in_channels; (void)out_channels; (void)dataset; (void)data_dir;
  return 0;
}
