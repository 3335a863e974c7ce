// CUDA tests of the graph ops against the CPU reference: csr_softmax_aggregate,
// gat_attention_aggregate and gatv2_attention_aggregate (short rows, rows split into chunks, empty
// rows, heads wider than a warp), csr_softmax, gat_edge_scores, gatv2_edge_scores, head_dot.
// Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/csr_softmax_aggregate.h"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/gat_edge_scores.h"
#include "gat/framework/ops/gatv2_attention_aggregate.h"
#include "gat/framework/ops/head_dot.h"
#include "gat/framework/ops/matmul.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

namespace {

struct AggregateResult {
  Tensor out, lse, grad_scores, grad_value;
};

// Runs forward and backward of the op's kernels on the device of the inputs.
AggregateResult run_aggregate(const Graph& g, const Tensor& s, const Tensor& v, const Tensor& grad_out,
                              const DropoutKey& key) {
  AggregateResult r;
  const int64_t N = g.num_dst_nodes(), H = s.size(1);
  const Device d = s.device();
  r.out = Tensor::empty({N, H, v.size(2)}, v.dtype(), d);
  r.lse = Tensor::empty({N, H}, v.dtype(), d);
  r.grad_scores = Tensor::empty(s.shape(), s.dtype(), d);
  r.grad_value = Tensor::empty(v.shape(), v.dtype(), d);
  ops::CsrSoftmaxAggregateInputs in;
  in.graph = &g;
  in.edge_scores = s;
  in.node_value = v;
  in.attn_dropout = key;
  ops::CsrSoftmaxAggregateForwardArgs forward{in};
  forward.out = &r.out;
  forward.lse = &r.lse;
  ops::kernels::csr_softmax_aggregate_forward(forward);
  ops::CsrSoftmaxAggregateBackwardArgs backward{in};
  backward.lse = r.lse;
  backward.grad_out = grad_out;
  backward.grad_scores = &r.grad_scores;
  backward.grad_value = &r.grad_value;
  ops::kernels::csr_softmax_aggregate_backward(backward);
  return r;
}

// CUDA f32 against the CPU op in f64 on the same values (so the CPU's own f32 rounding in rows of
// 100,000 edges does not count against the device), and CUDA f64 against CPU f64.
void expect_aggregate_matches_cpu(const std::string& what, const Graph& g, int64_t H, int64_t F,
                                  const DropoutKey& key, std::mt19937_64& rng) {
  const Graph gd = g.to(Device::cuda);
  const Tensor s = random_tensor({g.num_edges(), H}, rng, -4, 4);
  const Tensor v = random_tensor({g.num_src_nodes(), H, F}, rng);
  const Tensor go = random_tensor({g.num_dst_nodes(), H, F}, rng);
  const AggregateResult want = run_aggregate(g, s, v, go, key);
  for (DType dtype : {DType::f32, DType::f64}) {
    auto on_device = [&](const Tensor& t) { return t.to(dtype).to(Device::cuda); };
    // The f64 reference of the f32 run uses the f32-rounded inputs.
    const Tensor s_ = on_device(s), v_ = on_device(v), go_ = on_device(go);
    const AggregateResult ref = dtype == DType::f32
                                    ? run_aggregate(g, s_.to(Device::cpu).to(DType::f64),
                                                    v_.to(Device::cpu).to(DType::f64),
                                                    go_.to(Device::cpu).to(DType::f64), key)
                                    : want;
    const AggregateResult got = run_aggregate(gd, s_, v_, go_, key);
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    const std::string tag = what + " H=" + std::to_string(H) + " F=" + std::to_string(F) +
                            " p=" + std::to_string(key.p) + " " + dtype_name(dtype);
    EXPECT_LE(rel_error(got.out, ref.out), tol) << tag << ": out";
    EXPECT_LE(rel_error(got.lse, ref.lse), tol) << tag << ": lse";
    EXPECT_LE(rel_error(got.grad_scores, ref.grad_scores), tol) << tag << ": d scores";
    EXPECT_LE(rel_error(got.grad_value, ref.grad_value), tol) << tag << ": d value";
  }
}

const DropoutKey kDrop{0.3f, 42, 7};
const std::vector<std::pair<int64_t, int64_t>> kHeadsFeatures = {{1, 1}, {8, 8}, {1, 64}, {4, 64}, {1, 256}};

}  // namespace

TEST(CudaCsrSoftmaxAggregate, MatchesCpuOnRandomGraphs) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(1);
  const Graph g = random_graph(3000, 30000, 0, rng);
  for (auto [H, F] : kHeadsFeatures)
    for (const DropoutKey& key : {DropoutKey{}, kDrop})
      expect_aggregate_matches_cpu("random graph", g, H, F, key, rng);
  // F not a multiple of the vector width: the scalar path.
  expect_aggregate_matches_cpu("random graph", g, 3, 5, kDrop, rng);
  // Many rows cut into chunks, each way: the hubs' 65 and more of the random rows'.
  const Graph hubs = hubs_graph(2000, 8000, 5, 70, rng);
  ASSERT_EQ(hubs.chunk_edges(), 8);
  ASSERT_GT(hubs.num_row_chunks(), 65);
  ASSERT_GT(hubs.num_t_row_chunks(), 65);
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {8, 8}})
    expect_aggregate_matches_cpu("hubs graph", hubs, H, F, kDrop, rng);
}

TEST(CudaCsrSoftmaxAggregate, MatchesCpuWithAHubOf100000Edges) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(2);
  const Graph g = random_graph(120000, 200000, 100000, rng);
  ASSERT_EQ(g.max_in_degree(), 100000);
  ASSERT_GE(g.max_out_degree(), 90000);
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 8}, {1, 64}})
    for (const DropoutKey& key : {DropoutKey{}, kDrop})
      expect_aggregate_matches_cpu("hub graph", g, H, F, key, rng);
}

TEST(CudaCsrSoftmaxAggregate, DegenerateGraphs) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(3);
  expect_aggregate_matches_cpu("one node", Graph::from_edges(1, {0}, {0}), 2, 4, DropoutKey{}, rng);
  expect_aggregate_matches_cpu("one node, no edge", Graph::from_edges(1, {}, {}), 2, 4, DropoutKey{}, rng);
  expect_aggregate_matches_cpu("no edges", Graph::from_edges(50, {}, {}), 1, 64, kDrop, rng);
  expect_aggregate_matches_cpu("mixed", mixed_graph(), 3, 5, kDrop, rng);
}

TEST(CudaCsrSoftmaxAggregate, DropoutMasksMatchCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  // One self loop per node and values of one: out[i,h] = keep(i*H + h) / (1 - p) exactly.
  const int32_t N = 10000;
  std::vector<int32_t> nodes(N);
  for (int32_t i = 0; i < N; ++i) nodes[i] = i;
  const Graph g = Graph::from_edges(N, nodes, nodes);
  const Tensor s = Tensor::zeros({N, 4}), v = Tensor::full({N, 4, 1}, 1.0);
  const Tensor cpu = ops::csr_softmax_aggregate(g, s, v, kDrop);
  const Tensor dev = ops::csr_softmax_aggregate(g.to(Device::cuda), s.to(Device::cuda), v.to(Device::cuda), kDrop);
  EXPECT_TRUE(bitwise_equal(dev, cpu));
}

TEST(CudaCsrSoftmaxAggregate, GradientsMatchFiniteDifferencesOnDevice) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(4);
  const Graph mixed = mixed_graph().to(Device::cuda);
  for (int64_t H : {1, 3})
    for (int64_t F : {1, 4, 5})
      for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
        auto f = [&](const std::vector<Tensor>& in) {
          return ops::csr_softmax_aggregate(mixed, in[0], in[1], key);
        };
        expect_gradients_match("cuda csr_softmax_aggregate H=" + std::to_string(H) + " F=" +
                                   std::to_string(F) + " p=" + std::to_string(key.p),
                               f,
                               {random_tensor({mixed.num_edges(), H}, rng, -2, 2, DType::f64, Device::cuda),
                                random_tensor({mixed.num_nodes(), H, F}, rng, -1, 1, DType::f64, Device::cuda)});
      }
  // A row of 1,200 edges and a source of 975: split into chunks and merged.
  const Graph hub = random_graph(1300, 0, 1200, rng).to(Device::cuda);
  auto f = [&](const std::vector<Tensor>& in) { return ops::csr_softmax_aggregate(hub, in[0], in[1], kDrop); };
  expect_gradients_match("cuda csr_softmax_aggregate, split row", f,
                         {random_tensor({hub.num_edges(), 1}, rng, -2, 2, DType::f64, Device::cuda),
                          random_tensor({hub.num_nodes(), 1, 2}, rng, -1, 1, DType::f64, Device::cuda)});
}

TEST(CudaCsrSoftmaxAggregate, ExtremeScoresStayFinite) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(5);
  const Graph g = random_graph(2000, 20000, 1000, rng);
  std::vector<float> sv(static_cast<size_t>(g.num_edges() * 2));
  for (size_t k = 0; k < sv.size(); ++k) sv[k] = (k % 3 == 0 ? -1e4f : 1e4f) + 0.25f * (k % 5);
  const Tensor s = Tensor::from_vector(sv, {g.num_edges(), 2});
  const Tensor v = random_tensor({g.num_nodes(), 2, 8}, rng, -1, 1, DType::f32);
  const Tensor go = random_tensor({g.num_nodes(), 2, 8}, rng, -1, 1, DType::f32);
  const AggregateResult got = run_aggregate(g.to(Device::cuda), s.to(Device::cuda),
                                            v.to(Device::cuda), go.to(Device::cuda), kDrop);
  const AggregateResult want = run_aggregate(g, s.to(DType::f64), v.to(DType::f64), go.to(DType::f64), kDrop);
  for (const Tensor* t : {&got.out, &got.grad_scores, &got.grad_value})
    for (float x : t->to_vector<float>()) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LE(rel_error(got.out, want.out), 1e-5);
  // The backward pass recomputes weights from lse, which f32 holds to ulp(1e4) ~ 1e-3.
  EXPECT_LE(rel_error(got.grad_value, want.grad_value), 2e-3);
  EXPECT_LE(rel_error(got.grad_scores, want.grad_scores), 5e-3);
}

TEST(CudaCsrSoftmaxAggregate, RunsAreBitwiseIdentical) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(6);
  const Graph g = random_graph(50000, 400000, 30000, rng).to(Device::cuda);
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {8, 8}, {3, 5}}) {
    const Tensor s = random_tensor({g.num_edges(), H}, rng, -3, 3, DType::f32, Device::cuda);
    const Tensor v = random_tensor({g.num_nodes(), H, F}, rng, -1, 1, DType::f32, Device::cuda);
    const Tensor go = random_tensor({g.num_nodes(), H, F}, rng, -1, 1, DType::f32, Device::cuda);
    const AggregateResult a = run_aggregate(g, s, v, go, kDrop), b = run_aggregate(g, s, v, go, kDrop);
    EXPECT_TRUE(bitwise_equal(a.out, b.out)) << H << "x" << F;
    EXPECT_TRUE(bitwise_equal(a.lse, b.lse)) << H << "x" << F;
    EXPECT_TRUE(bitwise_equal(a.grad_scores, b.grad_scores)) << H << "x" << F;
    EXPECT_TRUE(bitwise_equal(a.grad_value, b.grad_value)) << H << "x" << F;
  }
}

TEST(CudaCsrSoftmaxAggregate, EachGradientAloneEqualsTheOneComputedWithTheOther) {
  // The transposed pass gathers G once for both gradients: asking for either alone must give
  // the same bits as asking for both, on the chunked sources of a hub too, and with the heads of
  // 256 features that take two tiles.
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  const Graph g = random_graph(20000, 120000, 5000, rng).to(Device::cuda);
  ASSERT_GT(g.max_out_degree(), g.chunk_edges());
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {8, 8}, {1, 256}, {3, 5}}) {
    const Tensor s = random_tensor({g.num_edges(), H}, rng, -3, 3, DType::f32, Device::cuda);
    const Tensor v = random_tensor({g.num_nodes(), H, F}, rng, -1, 1, DType::f32, Device::cuda);
    const Tensor go = random_tensor({g.num_nodes(), H, F}, rng, -1, 1, DType::f32, Device::cuda);
    const AggregateResult both = run_aggregate(g, s, v, go, kDrop);
    Tensor ds_alone = Tensor::empty(s.shape(), s.dtype(), Device::cuda);
    Tensor dv_alone = Tensor::empty(v.shape(), v.dtype(), Device::cuda);
    ops::CsrSoftmaxAggregateBackwardArgs backward;
    backward.graph = &g;
    backward.edge_scores = s;
    backward.node_value = v;
    backward.attn_dropout = kDrop;
    backward.lse = both.lse;
    backward.grad_out = go;
    backward.grad_scores = &ds_alone;  // d scores alone
    ops::kernels::csr_softmax_aggregate_backward(backward);
    backward.grad_scores = nullptr;  // d values alone
    backward.grad_value = &dv_alone;
    ops::kernels::csr_softmax_aggregate_backward(backward);
    EXPECT_TRUE(bitwise_equal(ds_alone, both.grad_scores)) << H << "x" << F;
    EXPECT_TRUE(bitwise_equal(dv_alone, both.grad_value)) << H << "x" << F;
  }
}

// ---- gat_attention_aggregate -------------------------------------------------------------

struct GatResult {
  Tensor out, d_el, d_er, d_term, d_value;
};

// The fused op's output and gradients through autograd, on the device of the inputs; `term` (the
// edge term) may be undefined.
GatResult run_gat(const Graph& g, Tensor el, Tensor er, Tensor v, const Tensor& grad_out,
                  const DropoutKey& key, Tensor term = Tensor()) {
  el = el.detach().set_requires_grad(), er = er.detach().set_requires_grad(), v = v.detach().set_requires_grad();
  if (term.defined()) term = term.detach().set_requires_grad();
  GatResult r;
  r.out = ops::gat_attention_aggregate(g, el, er, v, 0.2, key, term);
  r.out.backward(grad_out);
  r.d_el = el.grad(), r.d_er = er.grad(), r.d_value = v.grad();
  if (term.defined()) r.d_term = term.grad();
  return r;
}

// CUDA f32 against the CPU in f64 on the same (f32-rounded) values, and CUDA f64 against CPU f64;
// with an edge term (E, H) when with_term.
void expect_gat_matches_cpu(const std::string& what, const Graph& g, int64_t H, int64_t F,
                            const DropoutKey& key, std::mt19937_64& rng, bool with_term = false) {
  const Graph gd = g.to(Device::cuda);
  const int64_t Ns = g.num_src_nodes(), N = g.num_dst_nodes();
  const Tensor el = random_tensor({Ns, H}, rng, -3, 3), er = random_tensor({N, H}, rng, -3, 3);
  const Tensor term = with_term ? random_tensor({g.num_edges(), H}, rng, -3, 3) : Tensor();
  const Tensor v = random_tensor({Ns, H, F}, rng), go = random_tensor({N, H, F}, rng);
  for (DType dtype : {DType::f32, DType::f64}) {
    auto rounded = [&](const Tensor& t) { return t.defined() ? t.to(dtype).to(DType::f64) : t; };
    const GatResult want = run_gat(g, rounded(el), rounded(er), rounded(v), rounded(go), key, rounded(term));
    auto dev = [&](const Tensor& t) { return t.defined() ? t.to(dtype).to(Device::cuda) : t; };
    const GatResult got = run_gat(gd, dev(el), dev(er), dev(v), dev(go), key, dev(term));
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    const std::string tag = what + " H=" + std::to_string(H) + " F=" + std::to_string(F) +
                            " p=" + std::to_string(key.p) + " " + dtype_name(dtype) +
                            (with_term ? " edge term" : "");
    EXPECT_LE(rel_error(got.out, want.out), tol) << tag << ": out";
    EXPECT_LE(rel_error(got.d_el, want.d_el), tol) << tag << ": d el";
    EXPECT_LE(rel_error(got.d_er, want.d_er), tol) << tag << ": d er";
    EXPECT_LE(rel_error(got.d_value, want.d_value), tol) << tag << ": d value";
    if (with_term) {
      EXPECT_LE(rel_error(got.d_term, want.d_term), tol) << tag << ": d edge term";
    }
  }
}

TEST(CudaGatAttentionAggregate, MatchesCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(21);
  const Graph g = random_graph(3000, 30000, 0, rng);
  // {1, 256} and {2, 33}: heads wider than one group of lanes (the unfused backward); {3, 5}: the
  // scalar path.
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 8}, {4, 64}, {1, 256}, {3, 5}, {2, 33}})
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) expect_gat_matches_cpu("random graph", g, H, F, key, rng);
  // The edge term through the fused backward ({8, 8}, {3, 5}) and the unfused one ({1, 256}).
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {3, 5}, {1, 256}})
    expect_gat_matches_cpu("random graph", g, H, F, kDrop, rng, true);
  expect_gat_matches_cpu("looped", g.with_self_loops(), 8, 8, kDrop, rng);
  expect_gat_matches_cpu("mixed", mixed_graph(), 3, 4, kDrop, rng);
  expect_gat_matches_cpu("no edges", Graph::from_edges(50, {}, {}), 2, 8, kDrop, rng);
  const Graph hub = random_graph(120000, 200000, 100000, rng);
  // {8, 8}: 90,000 uncut rows in lanes of 8 (with_gather_vec), whose grid (2,813 blocks) is more than
  // an H200 holds at once, so the rows and the chunks are two launches there (launch_together); the
  // other shapes and graphs take one.
  // {3, 1}: 3 heads of one feature in a group of 4 lanes, whose dropout window (8 blocks of 4
  // decisions a lane: 42 edges) ends inside a 64-edge chunk of the hub's row, at a head count that
  // is not a multiple of 4.
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {8, 8}, {3, 1}})
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) expect_gat_matches_cpu("hub graph", hub, H, F, key, rng);
  expect_gat_matches_cpu("hub graph", hub, 8, 8, kDrop, rng, true);
  // Many rows cut into chunks, each way (Cora's shape: chunks of 8 edges, rows of many lengths).
  const Graph hubs = hubs_graph(2000, 8000, 5, 70, rng);
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {8, 8}})
    expect_gat_matches_cpu("hubs graph", hubs, H, F, kDrop, rng);
}

TEST(CudaGatAttentionAggregate, GradientsMatchFiniteDifferencesOnDevice) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(22);
  // Empty rows and a loop; a row of 1,200 edges and a source of 975 (chunks); the looped graph.
  const Graph hub = random_graph(1300, 0, 1200, rng);
  for (const auto& [name, graph] : std::vector<std::pair<std::string, Graph>>{
           {"mixed", mixed_graph()}, {"hub", hub}, {"looped mixed", mixed_graph().with_self_loops()}}) {
    const Graph g = graph.to(Device::cuda);
    const int64_t N = g.num_nodes(), H = name == "hub" ? 1 : 3, F = 4;
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
      const std::string tag = name + " p=" + std::to_string(key.p);
      auto f = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key);
      };
      expect_gradients_match("cuda gat_attention_aggregate " + tag, f,
                             {random_tensor({N, H}, rng, -2, 2, DType::f64, Device::cuda),
                              random_tensor({N, H}, rng, -2, 2, DType::f64, Device::cuda),
                              random_tensor({N, H, F}, rng, -1, 1, DType::f64, Device::cuda)});
      auto with_term = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, in[3]);
      };
      expect_gradients_match("cuda gat_attention_aggregate with edge term " + tag, with_term,
                             {random_tensor({N, H}, rng, -2, 2, DType::f64, Device::cuda),
                              random_tensor({N, H}, rng, -2, 2, DType::f64, Device::cuda),
                              random_tensor({N, H, F}, rng, -1, 1, DType::f64, Device::cuda),
                              random_tensor({g.num_edges(), H}, rng, -2, 2, DType::f64, Device::cuda)});
      auto with_bias = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, Tensor(), in[3]);
      };
      expect_gradients_match("cuda gat_attention_aggregate with bias " + tag, with_bias,
                             {random_tensor({N, H}, rng, -2, 2, DType::f64, Device::cuda),
                              random_tensor({N, H}, rng, -2, 2, DType::f64, Device::cuda),
                              random_tensor({N, H, F}, rng, -1, 1, DType::f64, Device::cuda),
                              random_tensor({H, F}, rng, -1, 1, DType::f64, Device::cuda)});
    }
  }
}

// The fused bias (GATConv's concatenated heads): out plus bias and every gradient, the bias's
// included, against the CPU in f64, through the fused backward ({8, 8} and, on 300,000 nodes,
// several rows a thread: d bias summed in head_rows_dot's pass; {3, 5}: summed after it) and the
// unfused one ({1, 256}). d node_value takes the positive sums' storage: no block of its own at
// the backward's peak, where one appears when er needs no gradient (no positive sums kept).
TEST(CudaGatAttentionAggregate, BiasMatchesCpuAndDValuesReuseThePositiveSums) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(44);
  const Graph g = random_graph(3000, 30000, 0, rng), large = random_graph(300000, 600000, 0, rng);
  const Graph gd = g.to(Device::cuda);
  const int64_t N = g.num_nodes();
  for (auto [graph, H, F] : std::vector<std::tuple<const Graph*, int64_t, int64_t>>{
           {&g, 8, 8}, {&g, 3, 5}, {&g, 1, 256}, {&large, 8, 8}}) {
    const Graph& cpu_graph = *graph;
    const Graph cuda_graph = cpu_graph.to(Device::cuda);
    const int64_t rows = cpu_graph.num_nodes();
    const std::vector<Tensor> inputs{random_tensor({rows, H}, rng, -3, 3, DType::f32),
                                     random_tensor({rows, H}, rng, -3, 3, DType::f32),
                                     random_tensor({rows, H, F}, rng, -1, 1, DType::f32),
                                     random_tensor({H, F}, rng, -1, 1, DType::f32)};
    const Tensor go = random_tensor({rows, H, F}, rng, -1, 1, DType::f32);
    auto run = [&](const Graph& graph, DType dtype, Device device) {
      std::vector<Tensor> in;
      for (const Tensor& t : inputs) in.push_back(t.to(dtype).to(device).set_requires_grad());
      const Tensor out = ops::gat_attention_aggregate(graph, in[0], in[1], in[2], 0.2, kDrop, Tensor(), in[3]);
      out.backward(go.to(dtype).to(device));
      std::vector<Tensor> results{out.detach()};
      for (const Tensor& t : in) results.push_back(t.grad());
      return results;
    };
    const std::vector<Tensor> want = run(cpu_graph, DType::f64, Device::cpu), got = run(cuda_graph, DType::f32, Device::cuda);
    const char* names[] = {"out", "d el", "d er", "d value", "d bias"};
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << "N=" << rows << " H=" << H << " F=" << F << ": " << names[k];
  }
  const int64_t H = 8, F = 8;
  // The gradients that had a buffer of their own at the backward's peak: d node_value, d el and
  // d er take the storage of pos_out, pos_weight and lse when the forward kept the positive sums
  // (er needs a gradient), and have their own otherwise.
  auto allocated_gradients = [&](bool er_needs_grad) {
    Tensor el = random_tensor({N, H}, rng, -3, 3, DType::f32, Device::cuda).set_requires_grad();
    Tensor er = random_tensor({N, H}, rng, -3, 3, DType::f32, Device::cuda);
    if (er_needs_grad) er.set_requires_grad();
    Tensor v = random_tensor({N, H, F}, rng, -1, 1, DType::f32, Device::cuda).set_requires_grad();
    const Tensor out = ops::gat_attention_aggregate(gd, el, er, v, 0.2, kDrop);
    const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32, Device::cuda);
    cuda::synchronize();
    cuda::reset_peak_memory();
    out.backward(go);
    std::set<std::string> names;
    for (const cuda::PeakBlocks& b : cuda::peak_memory_breakdown())
      if (b.what == "d node_value" || b.what == "d el" || b.what == "d er") names.insert(b.what);
    return names;
  };
  EXPECT_EQ(allocated_gradients(true), std::set<std::string>{});
  EXPECT_EQ(allocated_gradients(false), (std::set<std::string>{"d el", "d node_value"}));
}

// gat_projected_attention on CUDA (f32) against the CPU (f64): out and the gradients of wh,
// att_src, att_dst, edge term and bias, with both dropouts, through the fused backward
// ({8, 8}, {3, 5}), the unfused one ({1, 256}), and a hub's chunks; with values and el packed in
// one row for the forward (H F + H <= 16: {1, 8} in vectors, {2, 5} and {1, 7} in scalars, the
// hub's chunks, and without value dropout, where the rows hold wh itself); f64 gradients against
// finite differences on the device (packed: {3, 4}); and runs bitwise identical.
TEST(CudaGatProjectedAttention, MatchesCpuAndFiniteDifferences) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(45);
  const DropoutKey value_drop{0.4f, 43, 7}, no_drop{};
  // The hub graph has rows enough for 8 heads of 8 features to take lanes of 8 (with_gather_vec),
  // whose epilogue draws two blocks of output dropout decisions a lane.
  const int64_t hub_rows = std::max<int64_t>(20000, cuda::resident_threads() / 8 + 1);
  const Graph random = random_graph(3000, 30000, 0, rng), hub = random_graph(hub_rows, 2 * hub_rows, 5000, rng);
  for (const auto& [name, g, H, F, value_key] : std::vector<std::tuple<std::string, Graph, int64_t, int64_t, DropoutKey>>{
           {"random", random, 8, 8, value_drop}, {"random", random, 3, 5, value_drop},
           {"random", random, 1, 256, value_drop}, {"hub", hub, 8, 8, value_drop},
           {"random", random, 1, 8, value_drop}, {"random", random, 2, 5, value_drop},
           {"hub", hub, 1, 7, value_drop}, {"hub", hub, 1, 8, no_drop}}) {
    const int64_t N = g.num_nodes();
    const std::vector<Tensor> inputs{random_tensor({N, H, F}, rng, -1, 1, DType::f32),
                                     random_tensor({H, F}, rng, -1, 1, DType::f32),
                                     random_tensor({H, F}, rng, -1, 1, DType::f32),
                                     random_tensor({g.num_edges(), H}, rng, -2, 2, DType::f32),
                                     random_tensor({H, F}, rng, -1, 1, DType::f32)};
    const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32);
    const Graph gd = g.to(Device::cuda);
    auto run = [&, key = value_key](const Graph& graph, DType dtype, Device device) {
      std::vector<Tensor> in;
      for (const Tensor& t : inputs) in.push_back(t.to(dtype).to(device).set_requires_grad());
      const Tensor out = ops::gat_projected_attention(graph, in[0], in[1], in[2], 0.2, kDrop, key, in[3], in[4]);
      out.backward(go.to(dtype).to(device));
      std::vector<Tensor> results{out.detach()};
      for (const Tensor& t : in) results.push_back(t.grad());
      return results;
    };
    const std::vector<Tensor> want = run(g, DType::f64, Device::cpu), got = run(gd, DType::f32, Device::cuda),
                              again = run(gd, DType::f32, Device::cuda);
    const char* names[] = {"out", "d wh", "d att_src", "d att_dst", "d edge term", "d bias"};
    for (size_t k = 0; k < want.size(); ++k) {
      const std::string tag = name + " H=" + std::to_string(H) + " F=" + std::to_string(F) +
                              (value_key.active() ? "" : " without value dropout") + ": " + names[k];
      EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << tag;
      EXPECT_TRUE(bitwise_equal(got[k], again[k])) << tag;
    }
  }
  const Graph g = mixed_graph().with_self_loops().to(Device::cuda);
  const int64_t N = g.num_nodes(), H = 3, F = 4;
  auto f = [&](const std::vector<Tensor>& in) {
    return ops::gat_projected_attention(g, in[0], in[1], in[2], 0.2, kDrop, value_drop, in[3], in[4]);
  };
  expect_gradients_match("cuda gat_projected_attention", f,
                         {random_tensor({N, H, F}, rng, -1, 1, DType::f64, Device::cuda),
                          random_tensor({H, F}, rng, -1, 1, DType::f64, Device::cuda),
                          random_tensor({H, F}, rng, -1, 1, DType::f64, Device::cuda),
                          random_tensor({g.num_edges(), H}, rng, -2, 2, DType::f64, Device::cuda),
                          random_tensor({H, F}, rng, -1, 1, DType::f64, Device::cuda)});
}

// gat_linear_attention on CUDA (f32) against the CPU (f64): out and the gradients of x, weight,
// att_src, att_dst, edge term and bias with both dropouts. The fused forward (linear_head_dot.h)
// takes K % 4 == 0, F dividing 8, H F a multiple of 8 dividing 256 and two tiles of x within 48 KB
// of shared memory: {K, H, F} = {32, 8, 8} (the 100M-edge model's first layer: 8 octets of
// columns a row, 4 rows a warp) on a random graph and a hub's, {4, 1, 8} (one octet, 32 rows a
// warp), {8, 16, 1} (two octets, without value dropout), {8, 32, 8} (32 octets, one row a warp);
// the fused backward reads the forward's bits there, and draws the decisions where only it fits:
// {12, 2, 4} (x's tiles too large), {8, 3, 4} (H F = 12); neither fits {6, 8, 8} (K % 4 != 0),
// {8, 3, 5}. Without d x the backward is the fused pass, with d x the composed one. Runs bitwise
// identical; f64 gradients against finite differences on the device through both fused kernels
// ({4, 2, 8}, the bits between them).
TEST(CudaGatLinearAttention, MatchesCpuAndFiniteDifferences) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(46);
  const DropoutKey value_drop{0.4f, 43, 7}, no_drop{};
  // The hub graph has rows enough for 8 heads of 8 features to take lanes of 8 (with_gather_vec),
  // whose epilogue draws two blocks of output dropout decisions a lane.
  const int64_t hub_rows = std::max<int64_t>(20000, cuda::resident_threads() / 8 + 1);
  const Graph random = random_graph(3000, 30000, 0, rng), hub = random_graph(hub_rows, 2 * hub_rows, 5000, rng);
  for (const auto& [name, g, K, H, F, value_key] :
       std::vector<std::tuple<std::string, Graph, int64_t, int64_t, int64_t, DropoutKey>>{
           {"random", random, 32, 8, 8, value_drop}, {"hub", hub, 32, 8, 8, value_drop},
           {"random", random, 4, 1, 8, value_drop}, {"random", random, 8, 16, 1, no_drop},
           {"random", random, 8, 32, 8, value_drop}, {"random", random, 12, 2, 4, value_drop},
           {"random", random, 8, 3, 4, value_drop}, {"random", random, 6, 8, 8, value_drop},
           {"random", random, 8, 3, 5, value_drop}})
    for (bool x_grad : {false, true}) {
      const int64_t N = g.num_nodes();
      const std::vector<Tensor> inputs{random_tensor({N, K}, rng, -1, 1, DType::f32),
                                       random_tensor({K, H * F}, rng, -1, 1, DType::f32),
                                       random_tensor({H, F}, rng, -1, 1, DType::f32),
                                       random_tensor({H, F}, rng, -1, 1, DType::f32),
                                       random_tensor({g.num_edges(), H}, rng, -2, 2, DType::f32),
                                       random_tensor({H, F}, rng, -1, 1, DType::f32)};
      const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32);
      const Graph gd = g.to(Device::cuda);
      auto run = [&, key = value_key, x_grad = x_grad](const Graph& graph, DType dtype, Device device) {
        std::vector<Tensor> in;
        for (size_t k = 0; k < inputs.size(); ++k) {
          in.push_back(inputs[k].to(dtype).to(device));
          if (k > 0 || x_grad) in.back().set_requires_grad();
        }
        const Tensor out = ops::gat_linear_attention(graph, in[0], in[1], in[2], in[3], 0.2, kDrop, key, in[4], in[5]);
        out.backward(go.to(dtype).to(device));
        std::vector<Tensor> results{out.detach()};
        for (const Tensor& t : in)
          if (t.requires_grad()) results.push_back(t.grad());
        return results;
      };
      const std::vector<Tensor> want = run(g, DType::f64, Device::cpu), got = run(gd, DType::f32, Device::cuda),
                                again = run(gd, DType::f32, Device::cuda);
      ASSERT_EQ(want.size(), got.size());
      const std::vector<std::string> names = x_grad ? std::vector<std::string>{"out", "d x", "d weight", "d att_src",
                                                                               "d att_dst", "d edge term", "d bias"}
                                                    : std::vector<std::string>{"out", "d weight", "d att_src", "d att_dst",
                                                                               "d edge term", "d bias"};
      for (size_t k = 0; k < want.size(); ++k) {
        const std::string tag = name + " K=" + std::to_string(K) + " H=" + std::to_string(H) + " F=" +
                                std::to_string(F) + (value_key.active() ? "" : " without value dropout") +
                                (x_grad ? " with d x" : "") + ": " + names[k];
        EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << tag;
        EXPECT_TRUE(bitwise_equal(got[k], again[k])) << tag;
      }
    }
  const Graph g = mixed_graph().with_self_loops().to(Device::cuda);
  const int64_t N = g.num_nodes(), K = 4, H = 2, F = 8;
  const Tensor x = random_tensor({N, K}, rng, -1, 1, DType::f64, Device::cuda);  // no d x: the fused backward
  auto f = [&](const std::vector<Tensor>& in) {
    return ops::gat_linear_attention(g, x, in[0], in[1], in[2], 0.2, kDrop, value_drop, in[3], in[4]);
  };
  expect_gradients_match("cuda gat_linear_attention", f,
                         {random_tensor({K, H * F}, rng, -1, 1, DType::f64, Device::cuda),
                          random_tensor({H, F}, rng, -1, 1, DType::f64, Device::cuda),
                          random_tensor({H, F}, rng, -1, 1, DType::f64, Device::cuda),
                          random_tensor({g.num_edges(), H}, rng, -2, 2, DType::f64, Device::cuda),
                          random_tensor({H, F}, rng, -1, 1, DType::f64, Device::cuda)});
}

namespace {

// The edge term (E, H) with each pair whose score el[src] + er[dst] + term lies within 1e-3 of
// LeakyReLU's kink moved 2e-3 away from it: there an f32 run and an f64 one may take different
// sides, and every gradient through that score differs by the slopes' ratio (one draw of the test
// below had a score 3e-7 from 0, and the CPU's own f32 run missed its f64 one by 3e-3 as the
// device did). el and er (N, H).
Tensor term_off_the_kink(const Graph& g, const Tensor& el, const Tensor& er, const Tensor& term) {
  const int64_t H = term.size(1);
  const std::vector<double> el_ = host_f64(el), er_ = host_f64(er);
  std::vector<double> t = host_f64(term);
  const std::vector<int32_t> src = g.edge_src().to_vector<int32_t>(), dst = g.edge_dst().to_vector<int32_t>();
  for (size_t e = 0; e < src.size(); ++e)
    for (int64_t h = 0; h < H; ++h) {
      double& term_eh = t[e * H + h];
      const double score = el_[src[e] * H + h] + er_[dst[e] * H + h] + term_eh;
      if (std::abs(score) < 1e-3) term_eh += score < 0 ? -2e-3 : 2e-3;
    }
  return Tensor::from_vector(t, term.shape()).to(term.dtype());
}

}  // namespace

// The output activation (ops::OutputActivation: ELU, then dropout) on CUDA (f32): out and the
// gradients of el, er, values, edge term and bias of gat_attention_aggregate, through the fused
// backward (head_rows_dot takes the activation's backward: {8, 8} in vectors, {3, 5} in scalars,
// {1, 8} with the gradient packed in the walk's rows, a hub's chunks) and the unfused one
// ({1, 256}: elu_dropout's kernel first), and of gat_linear_attention on the 100M-edge model's
// first layer ({32, 8, 8}); with and without the output dropout. Against the CPU (f64) for
// alpha 1; alpha 0.7 has a kink at 0, where an f32 output and an f64 one may take different
// sides (G jumps by 0.3 g), so there the reference is the composition elu_dropout(op) on the
// device, which also takes G from the output but D from the stored out + bias. The forward is
// the composition's bit for bit (the epilogue draws the decisions elu_dropout draws); runs are
// bitwise identical; f64 gradients against finite differences on the device, on a graph with
// empty rows and a loop.
TEST(CudaGatOutputActivation, MatchesCpuAndFiniteDifferences) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(47);
  // The hub graph has rows enough for 8 heads of 8 features to take lanes of 8 (with_gather_vec),
  // whose epilogue draws two blocks of output dropout decisions a lane.
  const int64_t hub_rows = std::max<int64_t>(20000, cuda::resident_threads() / 8 + 1);
  const Graph random = random_graph(3000, 30000, 0, rng), hub = random_graph(hub_rows, 2 * hub_rows, 5000, rng);
  const DropoutKey out_drop{0.5f, 44, 7};
  for (const auto& [name, g, K, H, F] : std::vector<std::tuple<std::string, Graph, int64_t, int64_t, int64_t>>{
           {"random", random, 0, 8, 8}, {"random", random, 0, 3, 5}, {"random", random, 0, 1, 8},
           {"hub", hub, 0, 8, 8}, {"random", random, 0, 1, 256}, {"random", random, 32, 8, 8}, {"hub", hub, 32, 8, 8}})
    for (const auto& [alpha, key] :
         std::vector<std::pair<double, DropoutKey>>{{1.0, out_drop}, {1.0, DropoutKey{}}, {0.7, out_drop}}) {
      const int64_t N = g.num_nodes();
      const bool linear = K > 0;  // gat_linear_attention of x (N, K) and weight (K, H F); else el, er, values
      std::vector<Tensor> inputs;
      if (linear) inputs = {random_tensor({N, K}, rng, -1, 1, DType::f32), random_tensor({K, H * F}, rng, -0.5, 0.5, DType::f32),
                            random_tensor({H, F}, rng, -1, 1, DType::f32), random_tensor({H, F}, rng, -1, 1, DType::f32)};
      else inputs = {random_tensor({N, H}, rng, -3, 3, DType::f32), random_tensor({N, H}, rng, -3, 3, DType::f32),
                     random_tensor({N, H, F}, rng, -3, 3, DType::f32)};
      const Tensor term = random_tensor({g.num_edges(), H}, rng, -2, 2, DType::f32);
      if (linear) {  // el and er of gat_linear_attention: head_dot of x W (N, H, F) with att_src, att_dst
        const Tensor projected = ops::matmul(inputs[0].to(DType::f64), inputs[1].to(DType::f64)).view({N, H, F});
        inputs.push_back(term_off_the_kink(g, ops::head_dot(projected, inputs[2].to(DType::f64)),
                                           ops::head_dot(projected, inputs[3].to(DType::f64)), term));
      } else {
        inputs.push_back(term_off_the_kink(g, inputs[0], inputs[1], term));
      }
      inputs.push_back(random_tensor({H, F}, rng, -1, 1, DType::f32));
      const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32);
      const Graph gd = g.to(Device::cuda);
      auto op = [&, linear = linear](const Graph& graph, const std::vector<Tensor>& in, const ops::OutputActivation& act) {
        const Tensor& term = in[in.size() - 2];
        const Tensor& bias = in.back();
        return linear ? ops::gat_linear_attention(graph, in[0], in[1], in[2], in[3], 0.2, kDrop, DropoutKey{0.4f, 43, 7},
                                                  term, bias, act)
                      : ops::gat_attention_aggregate(graph, in[0], in[1], in[2], 0.2, kDrop, term, bias, act);
      };
      const ops::OutputActivation activation{true, alpha, key};
      auto run = [&, alpha = alpha, key = key](const Graph& graph, DType dtype, Device device, bool composed) {
        std::vector<Tensor> in;
        for (const Tensor& t : inputs) in.push_back(t.to(dtype).to(device).set_requires_grad());
        const Tensor out = composed ? ops::elu_dropout(op(graph, in, {}), alpha, key) : op(graph, in, activation);
        out.backward(go.to(dtype).to(device));
        std::vector<Tensor> results{out.detach()};
        for (const Tensor& t : in) results.push_back(t.grad());
        return results;
      };
      const std::vector<Tensor> got = run(gd, DType::f32, Device::cuda, false), again = run(gd, DType::f32, Device::cuda, false);
      const std::vector<Tensor> want = alpha == 1.0 ? run(g, DType::f64, Device::cpu, false) : run(gd, DType::f32, Device::cuda, true);
      const std::string tag = name + " K=" + std::to_string(K) + " H=" + std::to_string(H) + " F=" + std::to_string(F) +
                              " alpha " + std::to_string(alpha) + " p=" + std::to_string(key.p);
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << tag << ": result " << k;
        EXPECT_TRUE(bitwise_equal(got[k], again[k])) << tag << ": result " << k;
      }
      std::vector<Tensor> in;
      for (const Tensor& t : inputs) in.push_back(t.to(Device::cuda));
      EXPECT_TRUE(bitwise_equal(got[0], ops::elu_dropout(op(gd, in, {}), alpha, key))) << tag << ": the epilogue";
    }
  const Graph g = mixed_graph().to(Device::cuda);  // empty rows and a loop
  const int64_t N = g.num_nodes(), H = 2, F = 4;
  auto f = [&](const std::vector<Tensor>& in) {
    return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop, in[3], in[4], {true, 1.0, out_drop});
  };
  expect_gradients_match("cuda gat_attention_aggregate with the output activation", f,
                         {random_tensor({N, H}, rng, -2, 2, DType::f64, Device::cuda),
                          random_tensor({N, H}, rng, -2, 2, DType::f64, Device::cuda),
                          random_tensor({N, H, F}, rng, -2, 2, DType::f64, Device::cuda),
                          random_tensor({g.num_edges(), H}, rng, -2, 2, DType::f64, Device::cuda),
                          random_tensor({H, F}, rng, -1, 1, DType::f64, Device::cuda)});
}

TEST(CudaGatAttentionAggregate, RunsAreBitwiseIdentical) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(23);
  const Graph g = random_graph(20000, 200000, 5000, rng).to(Device::cuda);
  const int64_t N = g.num_nodes(), H = 8, F = 8;
  const Tensor el = random_tensor({N, H}, rng, -3, 3, DType::f32, Device::cuda);
  const Tensor er = random_tensor({N, H}, rng, -3, 3, DType::f32, Device::cuda);
  const Tensor v = random_tensor({N, H, F}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor term = random_tensor({g.num_edges(), H}, rng, -3, 3, DType::f32, Device::cuda);
  for (const Tensor& t : {term, Tensor()}) {
    const GatResult a = run_gat(g, el, er, v, go, kDrop, t), b = run_gat(g, el, er, v, go, kDrop, t);
    EXPECT_TRUE(bitwise_equal(a.out, b.out));
    EXPECT_TRUE(bitwise_equal(a.d_el, b.d_el));
    EXPECT_TRUE(bitwise_equal(a.d_er, b.d_er));
    if (t.defined()) {
      EXPECT_TRUE(bitwise_equal(a.d_term, b.d_term));
    }
    EXPECT_TRUE(bitwise_equal(a.d_value, b.d_value));
  }
}

// The kernels of gat_attention_aggregate as a CUDA training step runs them: the forward with the
// positive sums (pos_out, pos_weight), then the backward with every gradient (d er from the sums).
struct GatKernelsResult {
  Tensor out, lse, pos_out, pos_weight, d_el, d_er, d_term, d_value;
};
GatKernelsResult run_gat_kernels(const Graph& g, const Tensor& el, const Tensor& er, const Tensor& term,
                                 const Tensor& v, const Tensor& go, double slope, const DropoutKey& key) {
  const int64_t N = g.num_dst_nodes(), H = el.size(1), F = v.size(2);
  const DType dt = v.dtype();
  const Device d = v.device();
  GatKernelsResult r;
  r.out = Tensor::empty({N, H, F}, dt, d), r.lse = Tensor::empty({N, H}, dt, d);
  r.pos_out = Tensor::empty({N, H, F}, dt, d), r.pos_weight = Tensor::empty({N, H}, dt, d);
  r.d_el = Tensor::empty(el.shape(), dt, d), r.d_er = Tensor::empty(er.shape(), dt, d);
  r.d_value = Tensor::empty(v.shape(), dt, d);
  if (term.defined()) r.d_term = Tensor::empty(term.shape(), dt, d);
  ops::GatAttentionInputs in;
  in.graph = &g;
  in.el = el;
  in.er = er;
  in.edge_term = term;
  in.node_value = v;
  in.negative_slope = slope;
  in.attn_dropout = key;
  ops::GatAttentionForwardArgs forward{in};
  forward.out = &r.out;
  forward.lse = &r.lse;
  forward.pos_out = &r.pos_out;
  forward.pos_weight = &r.pos_weight;
  ops::kernels::gat_attention_aggregate_forward(forward);
  ops::GatAttentionBackwardArgs backward{in};
  backward.out = r.out;
  backward.lse = r.lse;
  backward.pos_out = r.pos_out;
  backward.pos_weight = r.pos_weight;
  backward.grad_out = go;
  backward.grad_el = &r.d_el;
  backward.grad_er = &r.d_er;
  backward.grad_edge_term = term.defined() ? &r.d_term : nullptr;
  backward.grad_value = &r.d_value;
  ops::kernels::gat_attention_aggregate_backward(backward);
  return r;
}

TEST(CudaGatAttentionAggregate, PositiveSumsAndDerMatchCpu) {
  // pos_out and pos_weight (chunk partials merged on the hub's row) and the d er that the backward
  // forms from them, against the CPU's definitions and its d er summed over the edges: f32 against
  // the CPU in f64 on the same values, f64 against f64; with and without dropout and edge term; a
  // negative slope, whose positive scores come from negative arguments. The training forward
  // (with the sums) gives the evaluation forward's out and lse bit for bit.
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(24);
  const std::vector<std::pair<std::string, Graph>> graphs = {
      {"random", random_graph(3000, 30000, 0, rng)},
      {"hub", random_graph(20000, 60000, 5000, rng)},
      {"mixed", mixed_graph()},
      {"no edges", Graph::from_edges(50, {}, {})}};
  ASSERT_GT(graphs[1].second.max_in_degree(), graphs[1].second.chunk_edges());
  for (const auto& [name, g] : graphs) {
    const Graph gd = g.to(Device::cuda);
    for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {1, 4}, {3, 5}})
      for (double slope : {0.2, -0.5})
        for (const DropoutKey& key : {DropoutKey{}, kDrop})
          for (bool with_term : {false, true}) {
            const int64_t N = g.num_nodes();
            const Tensor el = random_tensor({N, H}, rng, -3, 3), er = random_tensor({N, H}, rng, -3, 3);
            const Tensor term = with_term ? random_tensor({g.num_edges(), H}, rng, -3, 3) : Tensor();
            const Tensor v = random_tensor({N, H, F}, rng), go = random_tensor({N, H, F}, rng);
            for (DType dtype : {DType::f32, DType::f64}) {
              auto rounded = [&](const Tensor& t) { return t.defined() ? t.to(dtype).to(DType::f64) : t; };
              auto dev = [&](const Tensor& t) { return t.defined() ? t.to(dtype).to(Device::cuda) : t; };
              const GatKernelsResult want = run_gat_kernels(g, rounded(el), rounded(er), rounded(term),
                                                            rounded(v), rounded(go), slope, key);
              const GatKernelsResult got = run_gat_kernels(gd, dev(el), dev(er), dev(term), dev(v), dev(go),
                                                           slope, key);
              const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
              const std::string tag = name + " H=" + std::to_string(H) + " F=" + std::to_string(F) +
                                      " slope " + std::to_string(slope) + " p=" + std::to_string(key.p) +
                                      " " + dtype_name(dtype) + (with_term ? " edge term" : "");
              expect_close(got.pos_out, want.pos_out, tag + ": pos_out", tol);
              expect_close(got.pos_weight, want.pos_weight, tag + ": pos_weight", tol);
              // d er = (1 - c)(G . pos_out - D pos_weight) is a difference of terms as large as
              // sum_f |G pos_out| + pos_weight sum_f |G out|; f32 (any summation order) is exact to a
              // few ulp of those, not of d er, which on the small mixed graph is about 300 times
              // smaller (the H200 saw 3e-5 of max |d er|): the error is measured against the terms.
              const std::vector<double> g64 = host_f64(rounded(go)), po = host_f64(want.pos_out),
                                        o = host_f64(want.out), pw = host_f64(want.pos_weight),
                                        der_got = host_f64(got.d_er), der_want = host_f64(want.d_er);
              double terms = 0, worst = 0;
              for (size_t t = 0; t < der_want.size(); ++t) {
                double a = 0, b = 0;
                for (int64_t f = 0; f < F; ++f) {
                  a += std::abs(g64[t * F + f] * po[t * F + f]);
                  b += std::abs(g64[t * F + f] * o[t * F + f]);
                }
                terms = std::max({terms, a + pw[t] * b, std::abs(der_want[t])});
                worst = std::max(worst, std::abs(der_got[t] - der_want[t]));
              }
              EXPECT_LE(worst, tol * terms) << tag << ": d er";
              expect_close(got.d_el, want.d_el, tag + ": d el", tol);
              expect_close(got.d_value, want.d_value, tag + ": d value", tol);
              if (with_term) {
                expect_close(got.d_term, want.d_term, tag + ": d edge term", tol);
              }
              Tensor out = Tensor::empty(got.out.shape(), dtype, Device::cuda);
              Tensor lse = Tensor::empty(got.lse.shape(), dtype, Device::cuda);
              ops::GatAttentionForwardArgs forward;  // without the positive sums
              forward.graph = &gd;
              forward.el = dev(el);
              forward.er = dev(er);
              forward.edge_term = dev(term);
              forward.node_value = dev(v);
              forward.negative_slope = slope;
              forward.attn_dropout = key;
              forward.out = &out;
              forward.lse = &lse;
              ops::kernels::gat_attention_aggregate_forward(forward);
              EXPECT_TRUE(bitwise_equal(out, got.out)) << tag;
              EXPECT_TRUE(bitwise_equal(lse, got.lse)) << tag;
            }
          }
  }
}

TEST(CudaGatAttentionAggregate, DerWithoutThePositiveSumsIsAnError) {
  GAT_SKIP_WITHOUT_CUDA();
  const Graph g = mixed_graph().to(Device::cuda);
  const int64_t N = g.num_nodes(), H = 2, F = 4;
  const Tensor el = Tensor::zeros({N, H}).to(Device::cuda), v = Tensor::zeros({N, H, F}).to(Device::cuda);
  Tensor out = Tensor::empty({N, H, F}, DType::f32, Device::cuda), lse = Tensor::empty({N, H}, DType::f32, Device::cuda);
  ops::GatAttentionInputs in;
  in.graph = &g;
  in.el = el;
  in.er = el;
  in.node_value = v;
  in.negative_slope = 0.2;
  ops::GatAttentionForwardArgs forward{in};
  forward.out = &out;
  forward.lse = &lse;
  ops::kernels::gat_attention_aggregate_forward(forward);
  Tensor der = Tensor::empty({N, H}, DType::f32, Device::cuda);
  ops::GatAttentionBackwardArgs backward{in};  // without pos_out and pos_weight
  backward.out = out;
  backward.lse = lse;
  backward.grad_out = out;
  backward.grad_er = &der;
  expect_error([&] { ops::kernels::gat_attention_aggregate_backward(backward); }, {"gat_attention_aggregate backward (d er on CUDA)", "'pos_out' is an undefined tensor"});
}

// ---- gatv2_attention_aggregate -----------------------------------------------------------

namespace {

// GATv2's inputs xl (Ns, H, F), xr (Nd, H, F), att (H, F) and, when asked, edge_term (E, H, F), in
// f64 on the host.
std::vector<Tensor> gatv2_inputs(const Graph& g, int64_t H, int64_t F, bool edge_term, std::mt19937_64& rng) {
  std::vector<Tensor> in{random_tensor({g.num_src_nodes(), H, F}, rng), random_tensor({g.num_dst_nodes(), H, F}, rng),
                         random_tensor({H, F}, rng)};
  if (edge_term) in.push_back(random_tensor({g.num_edges(), H, F}, rng));
  return in;
}

Tensor gatv2(const Graph& g, const std::vector<Tensor>& in, const DropoutKey& key) {
  return ops::gatv2_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, in.size() > 3 ? in[3] : Tensor());
}

// The output, the scores and the gradients of every input (those in `want`, the others
// undefined) through autograd, on the device of the inputs.
std::vector<Tensor> run_gatv2(const Graph& g, std::vector<Tensor> in, const Tensor& grad_out,
                              const DropoutKey& key, std::vector<bool> want = {true, true, true, true}) {
  for (size_t k = 0; k < in.size(); ++k) {
    in[k] = in[k].detach();
    if (want[k]) in[k].set_requires_grad();
  }
  std::vector<Tensor> r{gatv2(g, in, key)};
  r[0].backward(grad_out);
  r.push_back(ops::gatv2_edge_scores(g, in[0], in[1], in[2], 0.2, in.size() > 3 ? in[3] : Tensor()));
  for (size_t k = 0; k < in.size(); ++k) r.push_back(want[k] ? in[k].grad() : Tensor());
  return r;
}

// CUDA f32 against the CPU in f64 on the same (f32-rounded) values, and CUDA f64 against CPU f64.
void expect_gatv2_matches_cpu(const std::string& what, const Graph& g, int64_t H, int64_t F,
                              bool edge_term, const DropoutKey& key, std::mt19937_64& rng,
                              const std::vector<DType>& dtypes = {DType::f32, DType::f64}) {
  const Graph gd = g.to(Device::cuda);
  const std::vector<Tensor> in = gatv2_inputs(g, H, F, edge_term, rng);
  const Tensor go = random_tensor({g.num_dst_nodes(), H, F}, rng);
  const char* names[] = {"out", "scores", "d xl", "d xr", "d att", "d edge_term"};
  for (DType dtype : dtypes) {
    auto on = [&](const Tensor& t, Device d) { return t.to(dtype).to(d).to(d == Device::cpu ? DType::f64 : dtype); };
    std::vector<Tensor> in_cpu, in_cuda;
    for (const Tensor& t : in) in_cpu.push_back(on(t, Device::cpu)), in_cuda.push_back(on(t, Device::cuda));
    const std::vector<Tensor> want = run_gatv2(g, in_cpu, on(go, Device::cpu), key);
    const std::vector<Tensor> got = run_gatv2(gd, in_cuda, on(go, Device::cuda), key);
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-10;
    const std::string tag = what + " H=" + std::to_string(H) + " F=" + std::to_string(F) + " edge_term=" +
                            std::to_string(edge_term) + " p=" + std::to_string(key.p) + " " + dtype_name(dtype);
    for (size_t k = 0; k < want.size(); ++k) EXPECT_LE(rel_error(got[k], want[k]), tol) << tag << ": " << names[k];
  }
}

}  // namespace

TEST(CudaGatv2AttentionAggregate, MatchesCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(51);
  const Graph g = random_graph(3000, 30000, 0, rng);
  // Heads of 1 to 8, F = 1, 3, 8, 64 (16 lanes of 4 floats; a whole warp of 2 doubles), 60 (15 of
  // 16 lanes of 4 floats, 30 of 32 lanes of 2 doubles: the others join the sums), 5 and 6 (scalars
  // in f32; 3 of 4 lanes of 2 doubles in f64); the edge term on and off. F = 128 in f32: a whole
  // warp of 4 floats per head (in f64 it is refused, below).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {3, 3}, {8, 8}, {1, 64}, {3, 64},
                                                           {8, 3}, {2, 60}, {3, 5}, {3, 6}};
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto [H, F] = shapes[k];
    expect_gatv2_matches_cpu("random graph", g, H, F, k % 2 == 0, kDrop, rng);
    expect_gatv2_matches_cpu("random graph", g, H, F, k % 2 != 0, DropoutKey{}, rng);
  }
  expect_gatv2_matches_cpu("random graph", g, 2, 128, true, kDrop, rng, {DType::f32});
  expect_gatv2_matches_cpu("looped", g.with_self_loops(), 8, 8, true, kDrop, rng);
  expect_gatv2_matches_cpu("mixed", mixed_graph(), 3, 4, true, kDrop, rng);
  expect_gatv2_matches_cpu("no edges", Graph::from_edges(50, {}, {}), 2, 8, true, kDrop, rng);
  expect_gatv2_matches_cpu("no features", mixed_graph(), 2, 0, false, kDrop, rng);
  // Many rows cut into chunks, each way.
  const Graph hubs = hubs_graph(2000, 8000, 5, 70, rng);
  expect_gatv2_matches_cpu("hubs graph", hubs, 8, 8, true, kDrop, rng);
  expect_gatv2_matches_cpu("hubs graph", hubs, 1, 4, false, DropoutKey{}, rng);
}

TEST(CudaGatv2AttentionAggregate, MatchesCpuWithAHubOf100000Edges) {
  // A row of 100,000 edges and long sources: rows and transposed rows cut into chunks.
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(52);
  const Graph hub = random_graph(120000, 200000, 100000, rng);
  expect_gatv2_matches_cpu("hub graph", hub, 1, 4, true, kDrop, rng);
  expect_gatv2_matches_cpu("hub graph", hub, 8, 8, false, kDrop, rng);
}

TEST(CudaGatv2AttentionAggregate, GradientsMatchFiniteDifferencesOnDevice) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(53);
  // Empty rows and a loop; a row of 1,200 edges and a source of 975 (chunks); the looped graph.
  const Graph hub = random_graph(1300, 0, 1200, rng);
  for (const auto& [name, graph] : std::vector<std::pair<std::string, Graph>>{
           {"mixed", mixed_graph()}, {"hub", hub}, {"looped mixed", mixed_graph().with_self_loops()}}) {
    const Graph g = graph.to(Device::cuda);
    const int64_t H = name == "hub" ? 1 : 3, F = name == "hub" ? 2 : 3;
    for (bool edge_term : {false, true}) {
      std::vector<Tensor> in = gatv2_inputs(graph, H, F, edge_term, rng);
      for (Tensor& t : in) t = t.to(Device::cuda);
      expect_gradients_match("cuda gatv2_attention_aggregate " + name + " edge_term=" + std::to_string(edge_term),
                             [&](const std::vector<Tensor>& x) { return gatv2(g, x, kDrop); }, in);
    }
  }
}

TEST(CudaGatv2AttentionAggregate, RunsAndSingleGradientsAreBitwiseIdentical) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(54);
  const Graph g = random_graph(20000, 200000, 5000, rng).to(Device::cuda);
  std::vector<Tensor> in = gatv2_inputs(g, 8, 8, true, rng);
  for (Tensor& t : in) t = t.to(DType::f32).to(Device::cuda);
  const Tensor go = random_tensor({g.num_nodes(), 8, 8}, rng, -1, 1, DType::f32, Device::cuda);
  const std::vector<Tensor> a = run_gatv2(g, in, go, kDrop), b = run_gatv2(g, in, go, kDrop);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(bitwise_equal(a[k], b[k])) << "tensor " << k;
  for (size_t k = 0; k < 4; ++k) {
    std::vector<bool> one(4, false);
    one[k] = true;
    EXPECT_TRUE(bitwise_equal(run_gatv2(g, in, go, kDrop, one)[k + 2], a[k + 2])) << "gradient " << k << " alone";
  }
}

TEST(CudaGatv2AttentionAggregate, HeadsWiderThanAWarpAreRefused) {
  GAT_SKIP_WITHOUT_CUDA();
  const Graph g = mixed_graph().to(Device::cuda);
  const int64_t N = g.num_nodes();
  // 33 vectors of 4 floats, 33 scalars, 33 vectors of 2 doubles.
  for (auto [F, dtype] : std::vector<std::pair<int64_t, DType>>{{132, DType::f32}, {33, DType::f32}, {66, DType::f64}}) {
    const Tensor x = Tensor::zeros({N, 1, F}, dtype, Device::cuda);
    expect_error([&] { ops::gatv2_attention_aggregate(g, x, x, Tensor::zeros({1, F}, dtype, Device::cuda), 0.2); },
                 {"gatv2_attention_aggregate (CUDA)", "F = " + std::to_string(F), "at most 32"});
  }
}

// Bipartite graphs, fewer sources than destinations and more, plain and with self loops for
// i < min(Ns, Nd): a destination row of 2,000 edges and a source of 2,000 out-edges (chunks on
// the device), destinations without in-edges, sources without out-edges.
TEST(CudaBipartiteGraphOps, MatchCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(24);
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{3000, 9000}, {9000, 3000}}) {
    const Graph plain = random_bipartite_graph(ns, nd, 30000, 2000, rng);
    ASSERT_GT(plain.max_in_degree(), plain.chunk_edges());
    ASSERT_GT(plain.max_out_degree(), plain.chunk_edges());
    for (const Graph& g : {plain, plain.with_self_loops()}) {
      const std::string name = std::to_string(ns) + " -> " + std::to_string(nd) +
                               (g.count_self_loops() ? " looped" : "");
      for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 8}, {1, 64}, {2, 33}, {3, 5}}) {
        expect_aggregate_matches_cpu(name, g, H, F, kDrop, rng);
        expect_gat_matches_cpu(name, g, H, F, kDrop, rng);
        if (F <= 32 || F % 2 == 0)  // GATv2's heads fit a warp (F = 33 in f32 does not)
          expect_gatv2_matches_cpu(name, g, H, F, H != 8, kDrop, rng);
      }
      const Tensor s = random_tensor({g.num_edges(), 3}, rng, -4, 4, DType::f32);
      EXPECT_LE(rel_error(ops::csr_softmax(g.to(Device::cuda), s.to(Device::cuda)), ops::csr_softmax(g, s)), 1e-5)
          << name;
      for (int64_t H : {3, 8}) {  // d el and d er of gat_edge_scores, a warp per node per head (3) or for all (8)
        const Tensor el = random_tensor({ns, H}, rng, -1, 1, DType::f32), er = random_tensor({nd, H}, rng, -1, 1, DType::f32);
        const Tensor gs = random_tensor({g.num_edges(), H}, rng, -1, 1, DType::f32);
        auto run = [&](const Graph& graph, Device d) {
          Tensor l = el.to(d).detach().set_requires_grad(), r = er.to(d).detach().set_requires_grad();
          Tensor scores = ops::gat_edge_scores(graph, l, r, 0.2);
          scores.backward(gs.to(d));
          return std::vector<Tensor>{scores, l.grad(), r.grad()};
        };
        const auto want = run(g, Device::cpu), got = run(g.to(Device::cuda), Device::cuda);
        for (size_t k = 0; k < want.size(); ++k) EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << name << " tensor " << k;
      }
    }
  }
}

TEST(CudaBipartiteGraphOps, GradientsMatchFiniteDifferencesOnDevice) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(25);
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{6, 13}, {13, 6}}) {
    const Graph g = random_bipartite_graph(ns, nd, 2 * (ns + nd), 10, rng).with_self_loops().to(Device::cuda);
    const int64_t H = 3, F = 4;
    auto dev = [&](const Shape& shape) { return random_tensor(shape, rng, -2, 2, DType::f64, Device::cuda); };
    const std::string name = std::to_string(ns) + " -> " + std::to_string(nd);
    expect_gradients_match("cuda bipartite gat_attention_aggregate " + name,
                           [&](const std::vector<Tensor>& in) {
                             return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop);
                           },
                           {dev({ns, H}), dev({nd, H}), dev({ns, H, F})});
    expect_gradients_match("cuda bipartite csr_softmax_aggregate " + name,
                           [&](const std::vector<Tensor>& in) { return ops::csr_softmax_aggregate(g, in[0], in[1], kDrop); },
                           {dev({g.num_edges(), H}), dev({ns, H, F})});
    expect_gradients_match("cuda bipartite gatv2_attention_aggregate " + name,
                           [&](const std::vector<Tensor>& in) { return gatv2(g, in, kDrop); },
                           {dev({ns, H, F}), dev({nd, H, F}), dev({H, F}), dev({g.num_edges(), H, F})});
  }
}

TEST(CudaCsrSoftmax, MatchesCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(7);
  const Graph g = random_graph(3000, 30000, 2000, rng);
  const Tensor s = random_tensor({g.num_edges(), 3}, rng, -4, 4, DType::f32);
  EXPECT_LE(rel_error(ops::csr_softmax(g.to(Device::cuda), s.to(Device::cuda)), ops::csr_softmax(g, s)), 1e-5);
}

TEST(CudaGatEdgeScores, MatchesCpuAndGradients) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  const Graph g = random_graph(3000, 30000, 2000, rng);
  const Graph gd = g.to(Device::cuda);
  for (int64_t H : {1, 3, 8, 64}) {  // a warp per node over all heads (1, 8), per head (3, 64)
    const Tensor el = random_tensor({g.num_nodes(), H}, rng, -1, 1, DType::f32);
    const Tensor er = random_tensor({g.num_nodes(), H}, rng, -1, 1, DType::f32);
    const Tensor gs = random_tensor({g.num_edges(), H}, rng, -1, 1, DType::f32);
    const Tensor term = random_tensor({g.num_edges(), H}, rng, -1, 1, DType::f32);
    auto run = [&](const Graph& graph, Device d) {
      Tensor l = el.to(d).detach().set_requires_grad(), r = er.to(d).detach().set_requires_grad();
      Tensor t = term.to(d).detach().set_requires_grad();
      Tensor plain = ops::gat_edge_scores(graph, l, r, 0.2), s = ops::gat_edge_scores(graph, l, r, 0.2, t);
      s.backward(gs.to(d));
      return std::vector<Tensor>{plain, s, l.grad(), r.grad(), t.grad()};
    };
    const auto want = run(g, Device::cpu), got = run(gd, Device::cuda), again = run(gd, Device::cuda);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << "H=" << H << " tensor " << k;
      EXPECT_TRUE(bitwise_equal(got[k], again[k])) << "H=" << H << " tensor " << k;
    }
  }
  const Graph mixed = mixed_graph().to(Device::cuda);
  auto f = [&](const std::vector<Tensor>& in) { return ops::gat_edge_scores(mixed, in[0], in[1], 0.2); };
  expect_gradients_match("cuda gat_edge_scores", f,
                         {random_tensor({8, 3}, rng, -1, 1, DType::f64, Device::cuda),
                          random_tensor({8, 3}, rng, -1, 1, DType::f64, Device::cuda)});
}

TEST(CudaHeadDot, MatchesCpuAndGradients) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(9);
  for (auto [H, F] : kHeadsFeatures) {
    const Tensor x = random_tensor({3000, H, F}, rng, -1, 1, DType::f32);
    const Tensor a = random_tensor({H, F}, rng, -1, 1, DType::f32);
    const Tensor g = random_tensor({3000, H}, rng, -1, 1, DType::f32);
    auto run = [&](Device d) {
      Tensor xd = x.to(d).detach().set_requires_grad(), ad = a.to(d).detach().set_requires_grad();
      Tensor out = ops::head_dot(xd, ad);
      out.backward(g.to(d));
      return std::vector<Tensor>{out, xd.grad(), ad.grad()};
    };
    const auto want = run(Device::cpu), got = run(Device::cuda), again = run(Device::cuda);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << H << "x" << F << " tensor " << k;
      EXPECT_TRUE(bitwise_equal(got[k], again[k])) << H << "x" << F << " tensor " << k;
    }
  }
  auto f = [](const std::vector<Tensor>& in) { return ops::head_dot(in[0], in[1]); };
  expect_gradients_match("cuda head_dot", f,
                         {random_tensor({600, 2, 3}, rng, -1, 1, DType::f64, Device::cuda),
                          random_tensor({2, 3}, rng, -1, 1, DType::f64, Device::cuda)},
                         1e-6, 1e-2);
}
