// Google Benchmark timings of csr_softmax_aggregate and gat_attention_aggregate forward and
// backward, CPU and CUDA, on generated random graphs (uniform sources, in-degrees uniform in
// [0, 2 * avg]):
//   384 nodes, degree 18, H*F = 1*64             (the original kernel's benchmark shape)
//   1,000,000 nodes, 16,000,000 edges, H*F = 1*64 and 8*8
// CUDA times are CUDA events around the launches on gat::cuda::stream(), synchronised, reported
// as manual time. Every run reports `bytes`: the bytes the op must move at least (below), and
// `bandwidth` = bytes / time, so the time of the memory bound is bytes / peak bandwidth
// (4.3 TB/s on an H200: bound_ms = bytes / 4.3e9). gat_attention_aggregate runs as a training
// step runs it: the forward with the positive sums d er is formed from (on CUDA; the CPU forward
// has no use for them), the backward with d el, d er and d values.
//
// Also the CPU's batched dropout draws on each SIMD path the CPU has (dropout_keep4_blocks).
//
//   bench_graph_ops [--benchmark_filter=...]     (CUDA benchmarks only where a device is present)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gat/framework/cuda_runtime.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/rng_cpu.h"
#include "timing.h"

using namespace gat;

namespace {

struct Problem {
  Graph graph;
  Tensor scores, value, grad_out, out, lse, grad_scores, grad_value;
  Tensor el, er, pos_out, pos_weight, grad_el, grad_er;  // gat_attention_aggregate's
  // The kernels' arguments over the tensors above, set once (the Problem stays where it is made).
  ops::CsrSoftmaxAggregateForwardArgs scores_forward;
  ops::CsrSoftmaxAggregateBackwardArgs scores_backward;
  ops::GatAttentionForwardArgs gat_forward;
  ops::GatAttentionBackwardArgs gat_backward;
};

Tensor random_f32(const Shape& shape, std::mt19937_64& rng, Device device) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape).to(device);
}

// The problem for (N, average degree, H, F, device), built once and kept for every benchmark.
Problem& problem(int64_t N, int64_t avg_degree, int64_t H, int64_t F, Device device) {
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, Device>, std::unique_ptr<Problem>> cache;
  auto& slot = cache[{N, avg_degree, H, F, device}];
  if (slot) return *slot;
  std::mt19937_64 rng(static_cast<uint64_t>(N * 31 + avg_degree));
  std::uniform_int_distribution<int32_t> degree(0, static_cast<int32_t>(2 * avg_degree));
  std::uniform_int_distribution<int32_t> source(0, static_cast<int32_t>(N - 1));
  std::vector<int32_t> row_ptr{0}, col_idx;
  for (int64_t i = 0; i < N; ++i) {
    const int32_t d = degree(rng);
    for (int32_t k = 0; k < d; ++k) col_idx.push_back(source(rng));
    row_ptr.push_back(static_cast<int32_t>(col_idx.size()));
  }
  auto p = std::make_unique<Problem>();
  p->graph = Graph::from_csr(std::move(row_ptr), std::move(col_idx)).to(device);
  const int64_t E = p->graph.num_edges();
  p->scores = random_f32({E, H}, rng, device);
  p->value = random_f32({N, H, F}, rng, device);
  p->grad_out = random_f32({N, H, F}, rng, device);
  p->out = Tensor::empty({N, H, F}, DType::f32, device);
  p->lse = Tensor::empty({N, H}, DType::f32, device);
  p->grad_scores = Tensor::empty({E, H}, DType::f32, device);
  p->grad_value = Tensor::empty({N, H, F}, DType::f32, device);
  p->el = random_f32({N, H}, rng, device);
  p->er = random_f32({N, H}, rng, device);
  if (device == Device::cuda) {
    p->pos_out = Tensor::empty({N, H, F}, DType::f32, device);
    p->pos_weight = Tensor::empty({N, H}, DType::f32, device);
  }
  p->grad_el = Tensor::empty({N, H}, DType::f32, device);
  p->grad_er = Tensor::empty({N, H}, DType::f32, device);

  ops::CsrSoftmaxAggregateInputs scores;
  scores.graph = &p->graph;
  scores.edge_scores = p->scores;
  scores.node_value = p->value;
  p->scores_forward = {scores, &p->out, &p->lse};
  p->scores_backward = {scores, p->lse, p->grad_out, &p->grad_scores, &p->grad_value};
  ops::GatAttentionInputs gat;
  gat.graph = &p->graph;
  gat.el = p->el;
  gat.er = p->er;
  gat.node_value = p->value;
  gat.negative_slope = 0.2;
  const bool positive = p->pos_out.defined();
  p->gat_forward = {gat};
  p->gat_forward.out = &p->out;
  p->gat_forward.lse = &p->lse;
  p->gat_forward.pos_out = positive ? &p->pos_out : nullptr;
  p->gat_forward.pos_weight = positive ? &p->pos_weight : nullptr;
  p->gat_backward = {gat};
  p->gat_backward.out = p->out;
  p->gat_backward.lse = p->lse;
  p->gat_backward.pos_out = p->pos_out;
  p->gat_backward.pos_weight = p->pos_weight;
  p->gat_backward.grad_out = p->grad_out;
  p->gat_backward.grad_el = &p->grad_el;
  p->gat_backward.grad_er = &p->grad_er;
  p->gat_backward.grad_value = &p->grad_value;
  slot = std::move(p);
  return *slot;
}

// Which op: csr_softmax_aggregate with stored scores, or gat_attention_aggregate.
enum class Op { scores, gat };

void forward(const Problem& p, Op op) {
  if (op == Op::scores) return ops::kernels::csr_softmax_aggregate_forward(p.scores_forward);
  ops::kernels::gat_attention_aggregate_forward(p.gat_forward);
}

void backward(const Problem& p, Op op) {
  if (op == Op::scores) return ops::kernels::csr_softmax_aggregate_backward(p.scores_backward);
  ops::kernels::gat_attention_aggregate_backward(p.gat_backward);
}

// Bytes that must move at least (4-byte indices and values), csr_softmax_aggregate:
//  forward:  row_ptr, edge_src, scores (E,H), one gathered V row per edge (E,H,F), out, lse
//  backward: over CSR rows   row_ptr, edge_src, scores, lse, G (N,H,F), gathered V (E,H,F), ds
//            over transpose  t_row_ptr, t_edge_dst, t_edge_id, gathered scores and lse (E,H),
//                            gathered G (E,H,F), dV (N,H,F)
// gat_attention_aggregate (CUDA's schedule; the CPU's moves more):
//  forward:  row_ptr, edge_src, gathered el (E,H), er (N,H), gathered V (E,H,F), out, lse, and
//            on CUDA pos_out (N,H,F) and pos_weight (N,H)
//  backward: per node  G, out, pos_out (N,H,F), pos_weight, D and d er (N,H)
//            over transpose  t_row_ptr, t_edge_dst, t_edge_id, gathered er, lse and D (E,H),
//                            el, V, gathered G (E,H,F), dV, d el
double bytes_moved(const Problem& p, Op op, bool is_backward) {
  const double N = static_cast<double>(p.graph.num_nodes()), E = static_cast<double>(p.graph.num_edges());
  const double H = static_cast<double>(p.scores.size(1)), HF = H * static_cast<double>(p.value.size(2));
  if (op == Op::gat) {
    const double positive_sums = p.pos_out.defined() ? N * HF + N * H : 0;  // CUDA only
    if (!is_backward) return 4 * ((N + 1) + E + E * H + N * H + E * HF + N * HF + N * H + positive_sums);
    const double nodes = 3 * N * HF + 3 * N * H;
    const double transpose = (N + 1) + 2 * E + 3 * E * H + N * H + N * HF + E * HF + N * HF + N * H;
    return 4 * (nodes + transpose);
  }
  if (!is_backward) return 4 * ((N + 1) + E + E * H + E * HF + N * HF + N * H);
  const double rows = (N + 1) + E + E * H + N * H + N * HF + E * HF + E * H;
  const double transpose = (N + 1) + 2 * E + 2 * E * H + E * HF + N * HF;
  return 4 * (rows + transpose);
}

void run(benchmark::State& state, Op op, int64_t N, int64_t avg_degree, int64_t H, int64_t F, Device device,
         bool is_backward) {
  Problem& p = problem(N, avg_degree, H, F, device);
  forward(p, op);  // lse (and the positive sums) for the backward pass; also the warm-up
  auto step = [&] { is_backward ? backward(p, op) : forward(p, op); };
  for (auto _ : state) state.SetIterationTime(bench::time_ms(device, step) / 1e3);
  const double bytes = bytes_moved(p, op, is_backward);
  state.counters["bytes"] = benchmark::Counter(bytes);
  state.counters["bandwidth"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["edges"] = benchmark::Counter(static_cast<double>(p.graph.num_edges()));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  struct Shape4 {
    int64_t N, degree, H, F;
  };
  const std::vector<Shape4> shapes = {{384, 18, 1, 64}, {1000000, 16, 1, 64}, {1000000, 16, 8, 8}};
  std::vector<Device> devices = {Device::cpu};
  if (cuda::available())
    devices.push_back(Device::cuda);
  else
    std::fprintf(stderr, "bench_graph_ops: CUDA benchmarks skipped (%s)\n", cuda::unavailable_reason());
  for (Op op : {Op::scores, Op::gat})
    for (Device device : devices)
      for (const Shape4& s : shapes)
        for (bool is_backward : {false, true}) {
          const std::string name =
              std::string(op == Op::scores ? "csr_softmax_aggregate_" : "gat_attention_aggregate_") +
              (is_backward ? "backward" : "forward") + "/" + device_name(device) +
              "/N=" + std::to_string(s.N) + "/deg=" + std::to_string(s.degree) + "/H=" + std::to_string(s.H) +
              "/F=" + std::to_string(s.F);
          auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
            run(st, op, s.N, s.degree, s.H, s.F, device, is_backward);
          });
          b->Unit(benchmark::kMillisecond);
          if (device == Device::cuda)
            b->UseManualTime();
          else
            b->UseRealTime();  // OpenMP threads: wall time, not the main thread's CPU time
        }
  // The CPU's batched dropout draws (framework/rng_cpu.h), each SIMD path this CPU has:
  // items_per_second counts Philox blocks (four dropout decisions each).
  const std::pair<detail::Keep4Path, const char*> paths[] = {{detail::Keep4Path::scalar, "scalar"},
                                                             {detail::Keep4Path::avx2, "avx2"},
                                                             {detail::Keep4Path::avx512, "avx512"}};
  for (const auto& [path, path_name] : paths) {
    if (!detail::keep4_path_supported(path)) continue;
    benchmark::RegisterBenchmark((std::string("dropout_keep4_blocks/cpu/") + path_name).c_str(),
                                 [path = path](benchmark::State& st) {
                                   const int64_t n = 1 << 20;
                                   std::vector<uint64_t> blocks(n);
                                   std::vector<uint8_t> keep(n);
                                   for (int64_t k = 0; k < n; ++k) blocks[k] = static_cast<uint64_t>(k);
                                   const DropoutKey key{0.6f, 1, 2};
                                   for (auto _ : st) {
                                     detail::keep4_blocks_on(path, key, blocks.data(), n, keep.data());
                                     benchmark::DoNotOptimize(keep.data());
                                   }
                                   st.SetItemsProcessed(st.iterations() * n);
                                 })
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
