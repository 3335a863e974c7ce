// Tests of the graph ops: csr_softmax_aggregate, gat_attention_aggregate (and its projected,
// linear and output-activation forms), csr_softmax, gat_edge_scores, gatv2_attention_aggregate,
// gatv2_edge_scores, head_dot. The CPU against dense references and the unfused ops; f64 gradient
// checks on each device (DeviceTest); the CUDA kernels against the CPU (CudaVsCpuTest: short
// rows, rows split into chunks, empty rows, heads wider than a warp, bipartite graphs).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/attention/gat_edge_scores.h"
#include "gat/framework/ops/attention/gatv2_attention_aggregate.h"
#include "gat/framework/ops/attention/head_dot.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/reshape.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

namespace {

// Node 0 receives from 1..deg (a long row); `extra` random edges go into nodes of the first half.
Graph hub_graph(int32_t deg, int64_t extra, std::mt19937_64& rng) {
  std::vector<int32_t> src, dst;
  for (int32_t j = 1; j <= deg; ++j) src.push_back(j), dst.push_back(0);
  std::uniform_int_distribution<int32_t> node(0, deg);
  for (int64_t k = 0; k < extra; ++k) src.push_back(node(rng)), dst.push_back(node(rng) / 2);
  return Graph::from_edges(deg + 1, src, dst);
}

// Dense reference of the op, in double: per row, softmax over its edges, dropout, weighted sum.
std::vector<double> reference_aggregate(const Graph& g, const std::vector<double>& s,
                                        const std::vector<double>& v, int64_t H, int64_t F,
                                        const DropoutKey& key) {
  const int64_t N = g.num_dst_nodes(), E = g.num_edges();
  const std::vector<int32_t> srcs = g.sources(), dsts = g.destinations();
  std::vector<double> out(static_cast<size_t>(N * H * F), 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<int64_t> row;
      for (int64_t e = 0; e < E; ++e)
        if (dsts[e] == i) row.push_back(e);
      if (row.empty()) continue;
      double m = -INFINITY, z = 0;
      for (int64_t e : row) m = std::max(m, s[e * H + h]);
      for (int64_t e : row) z += std::exp(s[e * H + h] - m);
      for (int64_t e : row) {
        double w = std::exp(s[e * H + h] - m) / z;
        if (key.active()) w = key.keep(e * H + h) ? w / (1.0 - key.p) : 0.0;
        for (int64_t f = 0; f < F; ++f) out[(i * H + h) * F + f] += w * v[(srcs[e] * H + h) * F + f];
      }
    }
  return out;
}

bool all_finite(const Tensor& t) {
  for (double x : t.to(DType::f64).to_vector<double>())
    if (!std::isfinite(x)) return false;
  return true;
}

const DropoutKey kDrop{0.3f, 42, 7};
const DropoutKey kValueDrop{0.4f, 43, 7};

// Uniform f32 tensors on the host, one per (shape, bound), in [-bound, bound).
std::vector<Tensor> random_f32(const std::vector<std::pair<Shape, double>>& shapes, std::mt19937_64& rng) {
  std::vector<Tensor> tensors;
  for (const auto& [shape, bound] : shapes)
    tensors.push_back(random_tensor(shape, rng, -bound, bound, DType::f32));
  return tensors;
}

// The inputs of gat_attention_aggregate's kernels (el, er, node_value on g's device; `term`, the
// edge term, may be undefined), given in the order GatAttentionInputs declares them; out_bias
// and activation stay unset.
ops::GatAttentionInputs gat_kernel_inputs(const Graph& g, const Tensor& el, const Tensor& er,
                                          const Tensor& term, const Tensor& v, double slope,
                                          const DropoutKey& key = {}) {
  return {&g, el, er, term, v, slope, key, Tensor(), ops::OutputActivation()};
}

// gat_attention_aggregate's backward kernel for inputs `in` (f32 on the CPU), out and lse of their
// forward, and grad_out: d el, d er, d node_value, and with an output activation the gradient of
// its input.
std::vector<Tensor> gat_kernel_gradients(const ops::GatAttentionInputs& in, const Tensor& out,
                                         const Tensor& lse, const Tensor& grad_out) {
  std::vector<Tensor> d{Tensor::empty(in.el.shape()), Tensor::empty(in.er.shape()),
                        Tensor::empty(in.node_value.shape())};
  if (in.activation.elu) d.push_back(Tensor::empty(out.shape()));
  ops::GatAttentionBackwardArgs b{in};
  b.out = out;
  b.lse = lse;
  b.grad_out = grad_out;
  b.grad_el = &d[0];
  b.grad_er = &d[1];
  b.grad_value = &d[2];
  b.grad_pre = in.activation.elu ? &d[3] : nullptr;
  ops::kernels::gat_attention_aggregate_backward(b);
  return d;
}

}  // namespace

// ---- csr_softmax_aggregate ---------------------------------------------------------------

TEST(CsrSoftmaxAggregate, MatchesDenseReference) {
  std::mt19937_64 rng(1);
  const Graph g = mixed_graph();
  for (int64_t H : {1, 3, 8})    // 8: the CPU's vector of heads
    for (int64_t F : {1, 5, 8})  // 8: a head in one vector
      for (const DropoutKey& key : {DropoutKey{}, kDrop})
        for (DType dtype : {DType::f32, DType::f64}) {
          Tensor s = random_tensor({g.num_edges(), H}, rng, -3, 3, dtype);
          Tensor v = random_tensor({g.num_nodes(), H, F}, rng, -1, 1, dtype);
          Tensor out = ops::csr_softmax_aggregate(g, s, v, key);
          ASSERT_EQ(out.shape(), (Shape{g.num_nodes(), H, F}));
          const auto want = reference_aggregate(g, s.to(DType::f64).to_vector<double>(),
                                                v.to(DType::f64).to_vector<double>(), H, F, key);
          EXPECT_LE(rel_error(out.to(DType::f64).to_vector<double>(), want),
                    dtype == DType::f32 ? 1e-6 : 1e-14)
              << "H=" << H << " F=" << F << " p=" << key.p << " " << dtype_name(dtype);
        }
}

TEST(CsrSoftmaxAggregate, EmptyRowsGiveZerosAndZeroGradients) {
  std::mt19937_64 rng(2);
  const Graph g = mixed_graph();  // rows 0, 6, 7 are empty
  Tensor s = random_tensor({g.num_edges(), 2}, rng).set_requires_grad();
  Tensor v = random_tensor({g.num_nodes(), 2, 3}, rng).set_requires_grad();
  Tensor out = ops::csr_softmax_aggregate(g, s, v);
  const auto o = out.to_vector<double>();
  for (int64_t i : {0, 6, 7})
    for (int64_t k = 0; k < 6; ++k) EXPECT_EQ(o[i * 6 + k], 0.0) << "row " << i;
  // A gradient only on the empty rows (a value of its own for every element) reaches nothing.
  std::vector<double> grad(o.size(), 0.0);
  for (int64_t i : {0, 6, 7})
    for (int64_t k = 0; k < 6; ++k) grad[i * 6 + k] = 1.0 + static_cast<double>(i * 6 + k);
  out.backward(Tensor::from_vector(grad, out.shape()));
  for (double x : s.grad().to_vector<double>()) EXPECT_EQ(x, 0.0);
  for (double x : v.grad().to_vector<double>()) EXPECT_EQ(x, 0.0);
}

class CsrSoftmaxAggregateOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(CsrSoftmaxAggregateOnDevice);

TEST_P(CsrSoftmaxAggregateOnDevice, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(3);
  const Graph g = mixed_graph().to(device());
  for (int64_t H : {1, 3})
    for (int64_t F : {1, 4, 5})  // F = 4: the device's vector path; 1 and 5 its scalar one
      for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
        auto f = [&](const std::vector<Tensor>& in) {
          return ops::csr_softmax_aggregate(g, in[0], in[1], key);
        };
        expect_gradients_match(
            "csr_softmax_aggregate H=" + std::to_string(H) + " F=" + std::to_string(F) +
                " p=" + std::to_string(key.p),
            f, {random_f64({g.num_edges(), H}, rng, -2, 2), random_f64({g.num_nodes(), H, F}, rng)});
      }
}

TEST(CsrSoftmaxAggregate, EachGradientAloneEqualsTheOneComputedWithTheOther) {
  // The backward's row pass serves d scores and the dropped-out weights of d values: asking for
  // either alone must give the same bits as asking for both.
  std::mt19937_64 rng(12);
  const Graph g = random_graph(60, 400, 0, rng);
  const Tensor s0 = random_tensor({g.num_edges(), 3}, rng, -2, 2), v0 = random_tensor({60, 3, 4}, rng);
  const Tensor grad = random_tensor({60, 3, 4}, rng);
  auto grads = [&](bool want_s, bool want_v) {
    Tensor s = s0.clone(), v = v0.clone();
    if (want_s) s.set_requires_grad();
    if (want_v) v.set_requires_grad();
    ops::csr_softmax_aggregate(g, s, v, kDrop).backward(grad);
    return std::make_pair(want_s ? s.grad() : Tensor(), want_v ? v.grad() : Tensor());
  };
  const auto both = grads(true, true);
  EXPECT_TRUE(bitwise_equal(grads(true, false).first, both.first));
  EXPECT_TRUE(bitwise_equal(grads(false, true).second, both.second));
}

TEST_P(CsrSoftmaxAggregateOnDevice, GradientsOfALongRow) {
  std::mt19937_64 rng(4);
  const Graph hub = hub_graph(1000, 0, rng);
  ASSERT_EQ(hub.in_degrees()[0], 1000);
  const Graph g = hub.to(device());
  for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
    auto f = [&](const std::vector<Tensor>& in) { return ops::csr_softmax_aggregate(g, in[0], in[1], key); };
    expect_gradients_match(
        "csr_softmax_aggregate, a row of 1000 edges", f,
        {random_f64({g.num_edges(), 1}, rng, -2, 2), random_f64({g.num_nodes(), 1, 1}, rng)});
  }
  // A row of 1,200 edges and a source of 975: cut into chunks on the device and merged (on the CPU
  // the hub above is the long row).
  if (device() != Device::cuda) return;
  const Graph split = random_graph(1300, 0, 1200, rng).to(device());
  auto f = [&](const std::vector<Tensor>& in) {
    return ops::csr_softmax_aggregate(split, in[0], in[1], kDrop);
  };
  expect_gradients_match(
      "csr_softmax_aggregate, split row", f,
      {random_f64({split.num_edges(), 1}, rng, -2, 2), random_f64({split.num_nodes(), 1, 2}, rng)});
}

TEST(CsrSoftmaxAggregate, ExtremeScoresStayFinite) {
  std::mt19937_64 rng(5);
  const Graph g = mixed_graph();
  const int64_t H = 3;
  std::vector<double> sv(static_cast<size_t>(g.num_edges() * H));
  for (size_t k = 0; k < sv.size(); ++k) sv[k] = (k % 3 == 0 ? -1e4 : 1e4) + 0.25 * (k % 5);
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor s = Tensor::from_vector(sv, {g.num_edges(), H}).to(dtype).set_requires_grad();
    Tensor v = random_tensor({g.num_nodes(), H, 4}, rng, -1, 1, dtype).set_requires_grad();
    Tensor out = ops::csr_softmax_aggregate(g, s, v, kDrop);
    EXPECT_TRUE(all_finite(out)) << dtype_name(dtype);
    out.backward(random_tensor(out.shape(), rng, -1, 1, dtype));
    EXPECT_TRUE(all_finite(s.grad())) << dtype_name(dtype);
    EXPECT_TRUE(all_finite(v.grad())) << dtype_name(dtype);
    const auto want = reference_aggregate(g, s.to(DType::f64).to_vector<double>(),
                                          v.to(DType::f64).to_vector<double>(), H, 4, kDrop);
    EXPECT_LE(rel_error(out.to(DType::f64).to_vector<double>(), want), dtype == DType::f32 ? 1e-6 : 1e-13);
  }
  // Central differences with eps = 1e-4: at |s| = 1e4 a step of 1e-6 is only 1e-10 relative.
  auto f = [&](const std::vector<Tensor>& in) { return ops::csr_softmax_aggregate(g, in[0], in[1]); };
  expect_gradients_match(
      "csr_softmax_aggregate, scores of +-1e4", f,
      {Tensor::from_vector(sv, {g.num_edges(), H}), random_tensor({g.num_nodes(), H, 2}, rng)}, 1e-6, 1e-4);
}

TEST(CsrSoftmaxAggregate, NarrowHeadsGiveTheBitsOfTheFeatureLoop) {
  // A head of at most 8 features is summed as the first lanes of a vector, a gathered row read as 8
  // values: the lanes past F hold the next row's values (or, near the end of the tensor, the row is
  // read feature by feature). Each of the F sums must give the bits of the loop that a head of 9
  // features takes: the same values with 9 - F NaN features appended. Every node is a source, the
  // last one too; f32 and f64, with dropout; d scores and d values.
  std::mt19937_64 rng(14);
  const Graph g = random_graph(50, 300, 0, rng).with_self_loops();
  const int64_t N = g.num_nodes(), E = g.num_edges(), H = 2, wide = 9;
  for (DType dtype : {DType::f32, DType::f64})
    for (int64_t F : {1, 3, 7, 8}) {
      const Tensor s0 = random_tensor({E, H}, rng, -2, 2, dtype),
                   v0 = random_tensor({N, H, F}, rng, -1, 1, dtype),
                   go0 = random_tensor({N, H, F}, rng, -1, 1, dtype);
      auto padded = [&](const Tensor& t) {  // (N, H, F) -> (N, H, wide), NaN past F
        const std::vector<double> narrow = t.to(DType::f64).to_vector<double>();
        std::vector<double> out(static_cast<size_t>(N * H * wide), std::nan(""));
        for (int64_t r = 0; r < N * H; ++r)
          for (int64_t f = 0; f < F; ++f) out[r * wide + f] = narrow[r * F + f];
        return Tensor::from_vector(out, {N, H, wide}).to(dtype);
      };
      auto first_features = [&](const Tensor& t) {  // (N, H, wide) -> (N, H, F)
        const std::vector<double> all = t.to(DType::f64).to_vector<double>();
        std::vector<double> out;
        for (int64_t r = 0; r < N * H; ++r)
          out.insert(out.end(), all.begin() + r * wide, all.begin() + r * wide + F);
        return Tensor::from_vector(out, {N, H, F}).to(dtype);
      };
      auto run = [&](const Tensor& v0_, const Tensor& go) {
        Tensor s = s0.clone().set_requires_grad(), v = v0_.clone().set_requires_grad();
        const Tensor out = ops::csr_softmax_aggregate(g, s, v, kDrop);
        out.backward(go);
        return std::vector<Tensor>{out.detach(), s.grad(), v.grad()};
      };
      const std::vector<Tensor> narrow = run(v0, go0), loop = run(padded(v0), padded(go0));
      const std::string tag = std::string(dtype_name(dtype)) + " F=" + std::to_string(F);
      EXPECT_TRUE(bitwise_equal(narrow[0], first_features(loop[0]))) << tag << " out";
      EXPECT_TRUE(bitwise_equal(narrow[2], first_features(loop[2]))) << tag << " d values";
      EXPECT_TRUE(all_finite(narrow[1])) << tag << " d scores";
      EXPECT_TRUE(all_finite(narrow[2])) << tag << " d values";
    }
}

TEST(CsrSoftmaxAggregate, RunsAreBitwiseIdentical) {
  std::mt19937_64 rng(6);
  const Graph g = random_graph(3000, 40000, 0, rng);
  auto run = [&] {
    Tensor s = random_tensor({g.num_edges(), 2}, rng, -2, 2, DType::f32).set_requires_grad();
    Tensor v = random_tensor({g.num_nodes(), 2, 8}, rng, -1, 1, DType::f32).set_requires_grad();
    Tensor out = ops::csr_softmax_aggregate(g, s, v, kDrop);
    out.backward(random_tensor(out.shape(), rng, -1, 1, DType::f32));
    return std::vector<Tensor>{out, s.grad(), v.grad()};
  };
  const uint64_t seed = rng();
  rng.seed(seed);
  auto a = run();
  rng.seed(seed);
  auto b = run();
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(bitwise_equal(a[k], b[k])) << "tensor " << k;
}

TEST(CsrSoftmaxAggregate, DropoutDropsAboutP) {
  // One self loop per node: out[i,h] = keep(i*H + h) / (1 - p) for a value of ones.
  const int32_t N = 20000;
  std::vector<int32_t> nodes(N);
  for (int32_t i = 0; i < N; ++i) nodes[i] = i;
  const Graph g = Graph::from_edges(N, nodes, nodes);
  const int64_t H = 2;
  for (float p : {0.1f, 0.5f}) {
    const DropoutKey key{p, 9, 3};
    Tensor out = ops::csr_softmax_aggregate(g, Tensor::zeros({N, H}), Tensor::full({N, H, 1}, 1.0), key);
    int64_t dropped = 0;
    for (float x : out.to_vector<float>()) {
      if (x == 0.0f)
        ++dropped;
      else
        EXPECT_FLOAT_EQ(x, 1.0f / (1.0f - p));
    }
    const double rate = static_cast<double>(dropped) / (N * H);
    EXPECT_NEAR(rate, p, 0.01) << "p=" << p;
  }
}

TEST(CsrSoftmaxAggregate, DegenerateGraphs) {
  // No edges at all, and a single node.
  const Graph none = Graph::from_edges(3, {}, {});
  Tensor out = ops::csr_softmax_aggregate(none, Tensor::zeros({0, 2}), Tensor::full({3, 2, 4}, 1.0));
  for (float x : out.to_vector<float>()) EXPECT_EQ(x, 0.0f);
  const Graph one = Graph::from_edges(1, {0}, {0});
  Tensor o1 = ops::csr_softmax_aggregate(one, Tensor::full({1, 1}, 5.0), Tensor::full({1, 1, 3}, 2.0));
  for (float x : o1.to_vector<float>()) EXPECT_EQ(x, 2.0f);
}

// (The shape and dtype errors of every op are in test_backend_ops.cpp.)
TEST(CsrSoftmaxAggregate, AKeyRecordedForACudaGraphIsRefusedOnTheCpu) {
  const Graph g = mixed_graph();
  const int64_t E = g.num_edges();
  // A key made while a CUDA graph records carries a device pointer the CPU cannot read.
  const uint64_t device_base = 0;
  expect_error(
      [&] {
        ops::csr_softmax_aggregate(g, Tensor::zeros({E, 2}), Tensor::zeros({8, 2, 3}),
                                   DropoutKey{0.5f, 0, 0, &device_base});
      },
      {"recorded for a CUDA graph"});
}

// ---- csr_softmax -------------------------------------------------------------------------

TEST(CsrSoftmax, WeightsAreTheRowSoftmax) {
  std::mt19937_64 rng(7);
  const Graph g = mixed_graph();
  const int64_t H = 3;
  Tensor s = random_tensor({g.num_edges(), H}, rng, -3, 3);
  const auto a = ops::csr_softmax(g, s).to_vector<double>();
  const auto sv = s.to_vector<double>();
  const auto dsts = g.destinations();
  for (int64_t i = 0; i < g.num_nodes(); ++i)
    for (int64_t h = 0; h < H; ++h) {
      double z = 0;
      for (int64_t e = 0; e < g.num_edges(); ++e)
        if (dsts[e] == i) z += std::exp(sv[e * H + h]);
      for (int64_t e = 0; e < g.num_edges(); ++e) {
        if (dsts[e] != i) continue;
        EXPECT_NEAR(a[e * H + h], std::exp(sv[e * H + h]) / z, 1e-14);
      }
    }
}

// ---- gat_edge_scores ---------------------------------------------------------------------

TEST(GatEdgeScores, MatchesTheReference) {
  std::mt19937_64 rng(8);
  const Graph g = mixed_graph();
  const auto srcs = g.sources(), dsts = g.destinations();
  for (int64_t H : {1, 3}) {
    Tensor el = random_tensor({g.num_nodes(), H}, rng), er = random_tensor({g.num_nodes(), H}, rng);
    const auto s = ops::gat_edge_scores(g, el, er, 0.2).to_vector<double>();
    const auto l = el.to_vector<double>(), r = er.to_vector<double>();
    for (int64_t e = 0; e < g.num_edges(); ++e)
      for (int64_t h = 0; h < H; ++h) {
        const double x = l[srcs[e] * H + h] + r[dsts[e] * H + h];
        EXPECT_EQ(s[e * H + h], x > 0 ? x : 0.2 * x);
      }
  }
}

class GatEdgeScoresOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(GatEdgeScoresOnDevice);

TEST_P(GatEdgeScoresOnDevice, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(8);
  const Graph g = mixed_graph().to(device());
  for (int64_t H : {1, 3}) {
    auto f = [&](const std::vector<Tensor>& in) { return ops::gat_edge_scores(g, in[0], in[1], 0.2); };
    expect_gradients_match("gat_edge_scores H=" + std::to_string(H), f,
                           {random_f64({g.num_nodes(), H}, rng), random_f64({g.num_nodes(), H}, rng)});
  }
}

TEST(GatEdgeScores, EdgeTermIsAddedInsideTheLeakyRelu) {
  std::mt19937_64 rng(18);
  const Graph g = mixed_graph();
  const auto srcs = g.sources(), dsts = g.destinations();
  for (int64_t H : {1, 3}) {
    Tensor el = random_tensor({g.num_nodes(), H}, rng), er = random_tensor({g.num_nodes(), H}, rng);
    Tensor term = random_tensor({g.num_edges(), H}, rng, -2, 2);
    const auto s = ops::gat_edge_scores(g, el, er, 0.2, term).to_vector<double>();
    const auto l = el.to_vector<double>(), r = er.to_vector<double>(), t = term.to_vector<double>();
    int signs[2] = {0, 0};
    for (int64_t e = 0; e < g.num_edges(); ++e)
      for (int64_t h = 0; h < H; ++h) {
        const double x = l[srcs[e] * H + h] + r[dsts[e] * H + h] + t[e * H + h];
        EXPECT_EQ(s[e * H + h], x > 0 ? x : 0.2 * x);
        ++signs[x > 0];
      }
    EXPECT_GT(signs[0] * signs[1], 0) << "both sides of the LeakyReLU are tested";
    auto f = [&](const std::vector<Tensor>& in) { return ops::gat_edge_scores(g, in[0], in[1], 0.2, in[2]); };
    expect_gradients_match("gat_edge_scores with edge term H=" + std::to_string(H), f, {el, er, term});
  }
  expect_error(
      [&] {
        ops::gat_edge_scores(g, Tensor::zeros({8, 2}), Tensor::zeros({8, 2}), 0.2,
                             Tensor::zeros({g.num_edges() + 1, 2}));
      },
      {"gat_edge_scores", "edge_term"});
}

TEST(GatEdgeScores, ComposedWithAggregateGradients) {
  std::mt19937_64 rng(9);
  const Graph g = hub_graph(50, 100, rng);
  auto f = [&](const std::vector<Tensor>& in) {
    return ops::csr_softmax_aggregate(g, ops::gat_edge_scores(g, in[0], in[1], 0.2), in[2], kDrop);
  };
  expect_gradients_match("gat_edge_scores -> csr_softmax_aggregate", f,
                         {random_tensor({g.num_nodes(), 2}, rng), random_tensor({g.num_nodes(), 2}, rng),
                          random_tensor({g.num_nodes(), 2, 3}, rng)});
}

// ---- gat_attention_aggregate -------------------------------------------------------------

// Output and the gradients of el, er, the edge term and V (those asked for) of a GAT aggregation,
// fused or as gat_edge_scores then csr_softmax_aggregate, for one upstream gradient. `term` may be
// undefined (no edge term).
struct GatRun {
  Tensor out, d_el, d_er, d_term, d_value;
  const Tensor& grad(int k) const { return k == 0 ? d_el : k == 1 ? d_er : k == 2 ? d_term : d_value; }
};
GatRun run_gat(const Graph& g, Tensor el, Tensor er, Tensor term, Tensor v, const Tensor& grad_out,
               bool fused, const DropoutKey& key, std::vector<bool> want = {true, true, true, true}) {
  el = el.detach(), er = er.detach(), v = v.detach();
  if (term.defined()) term = term.detach();
  want[2] = want[2] && term.defined();
  if (want[0]) el.set_requires_grad();
  if (want[1]) er.set_requires_grad();
  if (want[2]) term.set_requires_grad();
  if (want[3]) v.set_requires_grad();
  GatRun r;
  r.out = fused ? ops::gat_attention_aggregate(g, el, er, v, 0.2, key, term)
                : ops::csr_softmax_aggregate(g, ops::gat_edge_scores(g, el, er, 0.2, term), v, key);
  r.out.backward(grad_out);
  if (want[0]) r.d_el = el.grad();
  if (want[1]) r.d_er = er.grad();
  if (want[2]) r.d_term = term.grad();
  if (want[3]) r.d_value = v.grad();
  return r;
}

// Heads h0 .. h0 + count - 1 of t (N, H, ...) as a tensor (N, count, ...) of t's dtype.
Tensor heads_of(const Tensor& t, int64_t h0, int64_t count) {
  const int64_t N = t.size(0), H = t.size(1), inner = t.dim() == 3 ? t.size(2) : 1;
  const std::vector<double> all = t.to(DType::f64).to_vector<double>();
  std::vector<double> part;
  for (int64_t n = 0; n < N; ++n)
    part.insert(part.end(), all.begin() + (n * H + h0) * inner, all.begin() + (n * H + h0 + count) * inner);
  Shape shape = t.shape();
  shape[1] = count;
  return Tensor::from_vector(part, shape).to(t.dtype());
}

// Graphs for the GAT op: empty rows and a loop (mixed), no edge at all, a long row and a long transposed row
// (hub), every node with one loop (looped), loops on some nodes only.
std::vector<std::pair<std::string, Graph>> gat_graphs(int32_t hub_degree, std::mt19937_64& rng) {
  const Graph hub = hub_graph(hub_degree, 4 * hub_degree, rng);
  GraphBuildOptions some_loops;
  some_loops.remove_duplicates = true;
  return {{"mixed", mixed_graph()},
          {"no edges", Graph::from_edges(5, {}, {})},
          {"hub", hub},
          {"looped hub", hub.with_self_loops()},
          {"some loops", Graph::from_edges(6, {0, 1, 2, 3, 4, 5, 3}, {0, 0, 2, 2, 4, 4, 3}, some_loops)}};
}

TEST(GatAttentionAggregate, EqualsTheUnfusedOpsBitForBit) {
  // On the CPU the fused op sums in the unfused ops' orders: the same bits, f32 and f64, with and
  // without dropout and edge term, whatever gradients are asked for.
  std::mt19937_64 rng(31);
  for (const auto& [name, g] : gat_graphs(300, rng))
    for (DType dtype : {DType::f32, DType::f64})
      for (const DropoutKey& key : {DropoutKey{}, kDrop})
        for (int64_t H : {1, 3, 8})  // 8: the CPU's vector of heads, with heads of 8 features
          for (bool with_term : {false, true}) {
            const int64_t N = g.num_nodes(), F = H == 8 ? 8 : 5;
            const Tensor el = random_tensor({N, H}, rng, -2, 2, dtype),
                         er = random_tensor({N, H}, rng, -2, 2, dtype);
            const Tensor term = with_term ? random_tensor({g.num_edges(), H}, rng, -2, 2, dtype) : Tensor();
            const Tensor v = random_tensor({N, H, F}, rng, -1, 1, dtype),
                         go = random_tensor({N, H, F}, rng, -1, 1, dtype);
            const std::string tag = name + " " + dtype_name(dtype) + " H=" + std::to_string(H) +
                                    " p=" + std::to_string(key.p) + (with_term ? " edge term" : "");
            const GatRun want = run_gat(g, el, er, term, v, go, false, key);
            const GatRun got = run_gat(g, el, er, term, v, go, true, key);
            EXPECT_TRUE(bitwise_equal(got.out, want.out)) << tag;
            for (int k = 0; k < 4; ++k) {
              if (k == 2 && !with_term) continue;
              EXPECT_TRUE(bitwise_equal(got.grad(k), want.grad(k))) << tag << " gradient " << k;
              std::vector<bool> want_one(4, false);  // this gradient alone
              want_one[k] = true;
              const GatRun one = run_gat(g, el, er, term, v, go, true, key, want_one);
              EXPECT_TRUE(bitwise_equal(one.grad(k), want.grad(k))) << tag << " gradient " << k << " alone";
            }
          }
}

// The graphs of the GAT ops' gradient checks, with their heads and features: gat_graphs(24) with
// H = 2, F = 3, and (the device's vector path, F = 4) the mixed graph and the looped mixed graph,
// the latter also with H = F = 8 (the CPU's vectors of heads and of features);
// with split_hub, also a row of 1,200 edges and a source of 975, which CUDA cuts into chunks (on
// the CPU its thousands of elements would take minutes and check no other path).
struct GradcheckGraph {
  std::string name;
  Graph graph;
  int64_t H, F;
};
std::vector<GradcheckGraph> gradcheck_graphs(std::mt19937_64& rng, bool split_hub = false) {
  std::vector<GradcheckGraph> graphs;
  for (auto& [name, g] : gat_graphs(24, rng)) graphs.push_back({name, g, 2, 3});
  graphs.push_back({"mixed, F=4", mixed_graph(), 3, 4});
  graphs.push_back({"looped mixed, F=4", mixed_graph().with_self_loops(), 3, 4});
  graphs.push_back({"looped mixed, H=8 F=8", mixed_graph().with_self_loops(), 8, 8});  // the CPU's vectors
  if (split_hub) graphs.push_back({"split hub", random_graph(1300, 0, 1200, rng), 1, 4});
  return graphs;
}

class GatAttentionAggregateOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(GatAttentionAggregateOnDevice);

TEST_P(GatAttentionAggregateOnDevice, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(32);
  for (const auto& [name, graph, H, F] : gradcheck_graphs(rng, device() == Device::cuda))
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
      const Graph g = graph.to(device());
      const int64_t N = g.num_nodes(), E = g.num_edges();
      const std::string tag = name + " p=" + std::to_string(key.p);
      auto f = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key);
      };
      expect_gradients_match(
          "gat_attention_aggregate " + tag, f,
          {random_f64({N, H}, rng, -2, 2), random_f64({N, H}, rng, -2, 2), random_f64({N, H, F}, rng)});
      auto with_term = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, in[3]);
      };
      expect_gradients_match("gat_attention_aggregate with edge term " + tag, with_term,
                             {random_f64({N, H}, rng, -2, 2), random_f64({N, H}, rng, -2, 2),
                              random_f64({N, H, F}, rng), random_f64({E, H}, rng, -2, 2)});
      auto with_bias = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, Tensor(), in[3]);
      };
      expect_gradients_match("gat_attention_aggregate with bias " + tag, with_bias,
                             {random_f64({N, H}, rng, -2, 2), random_f64({N, H}, rng, -2, 2),
                              random_f64({N, H, F}, rng), random_f64({H, F}, rng)});
    }
}

// The fused bias, (H, F) or flat (H F) as GATConv's own, is add_bias over the heads viewed (N, H*F):
// the same values bit for bit, and the same gradients (the CPU backward never reads out); a bias
// of another size is refused.
TEST(GatAttentionAggregate, HeadGroupsGiveTheBitsOfOneHeadAtATime) {
  // The CPU runs a multiple of 8 heads as vectors of 8 (each lane one head), other counts head by
  // head. Heads are independent, so each lane must give the bits of its head alone: 16 heads
  // against the calls for each head (no dropout: its decisions depend on the head count), f32 and
  // f64, heads of 8 features (one vector each) and of 5.
  std::mt19937_64 rng(33);
  for (const auto& [name, g] : gat_graphs(40, rng))
    for (DType dtype : {DType::f32, DType::f64})
      for (int64_t F : {5, 8}) {
        const int64_t N = g.num_nodes(), E = g.num_edges(), H = 16;
        const Tensor el = random_tensor({N, H}, rng, -2, 2, dtype),
                     er = random_tensor({N, H}, rng, -2, 2, dtype),
                     term = random_tensor({E, H}, rng, -2, 2, dtype),
                     v = random_tensor({N, H, F}, rng, -1, 1, dtype),
                     go = random_tensor({N, H, F}, rng, -1, 1, dtype);
        const GatRun all = run_gat(g, el, er, term, v, go, true, DropoutKey{});
        for (int64_t h = 0; h < H; ++h) {
          const std::string tag =
              name + " " + dtype_name(dtype) + " F=" + std::to_string(F) + " head " + std::to_string(h);
          const GatRun one = run_gat(g, heads_of(el, h, 1), heads_of(er, h, 1), heads_of(term, h, 1),
                                     heads_of(v, h, 1), heads_of(go, h, 1), true, DropoutKey{});
          EXPECT_TRUE(bitwise_equal(heads_of(all.out, h, 1), one.out)) << tag;
          for (int k = 0; k < 4; ++k)
            EXPECT_TRUE(bitwise_equal(heads_of(all.grad(k), h, 1), one.grad(k))) << tag << " gradient " << k;
        }
      }
}

TEST(GatAttentionAggregate, BiasIsAddBiasOverTheConcatenatedHeads) {
  std::mt19937_64 rng(36);
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes(), H = 2, F = 3;
  const Tensor el0 = random_tensor({N, H}, rng, -2, 2, DType::f32),
               er0 = random_tensor({N, H}, rng, -2, 2, DType::f32);
  const Tensor v0 = random_tensor({N, H, F}, rng, -1, 1, DType::f32),
               b0 = random_tensor({H, F}, rng, -1, 1, DType::f32);
  const Tensor go = random_tensor({N, H * F}, rng, -1, 1, DType::f32);
  enum Bias { fused, fused_flat, separate };
  auto run = [&](Bias how) {
    std::vector<Tensor> in{el0.clone().set_requires_grad(), er0.clone().set_requires_grad(),
                           v0.clone().set_requires_grad(),
                           (how == fused_flat ? b0.view({H * F}) : b0).clone().set_requires_grad()};
    const Tensor out =
        how != separate
            ? ops::reshape(ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop, Tensor(), in[3]),
                           {N, H * F})
            : ops::add_bias(
                  ops::reshape(ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop), {N, H * F}),
                  ops::reshape(in[3], {H * F}));
    out.backward(go);
    std::vector<Tensor> results{out.detach()};
    for (const Tensor& t : in) results.push_back(t.grad());
    EXPECT_EQ(in[3].grad().shape(), in[3].shape());  // the bias's own shape
    results.back() = results.back().view({H, F});
    return results;
  };
  const std::vector<Tensor> reference = run(separate);
  for (Bias how : {fused, fused_flat}) {
    const std::vector<Tensor> got = run(how);
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(bitwise_equal(got[k], reference[k])) << how << " result " << k;
  }
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, el0, er0, v0, 0.2, {}, Tensor(), b0.view({F, H}));
      },
      {"gat_attention_aggregate", "'bias'"});
}

// The output activation (OutputActivation) of each GAT op is elu_dropout of the op's output
// without it: the same values and gradients bit for bit (the CPU backward takes elu_dropout's
// backward first, then the op's with its result), f32 and f64, with and without the output dropout, alpha 1
// and 0.5, on every graph (rows without edges: ELU of the bias); alpha < 0 or a bad p is refused.
TEST(GatOutputActivation, IsEluDropoutOfTheOutput) {
  std::mt19937_64 rng(47);
  const DropoutKey out_drop{0.5f, 44, 7};
  for (const auto& [name, g] : gat_graphs(40, rng))
    for (DType dtype : {DType::f32, DType::f64})
      for (const auto& [alpha, key] :
           std::vector<std::pair<double, DropoutKey>>{{1.0, out_drop}, {0.5, DropoutKey{}}})
        for (int op = 0; op < 3;
             ++op) {  // gat_attention_aggregate, gat_projected_attention, gat_linear_attention
          const int64_t N = g.num_nodes(), K = 4, H = 2, F = 3;
          const std::string tag = name + " " + dtype_name(dtype) + " alpha " + std::to_string(alpha) +
                                  " p=" + std::to_string(key.p) + " op " + std::to_string(op);
          // el, er, values for op 0; wh, att_src, att_dst for op 1; x, weight, att_src, att_dst for op 2;
          // then the edge term and the bias.
          std::vector<Tensor> inputs;
          if (op == 0)
            inputs = {random_tensor({N, H}, rng, -2, 2, dtype), random_tensor({N, H}, rng, -2, 2, dtype),
                      random_tensor({N, H, F}, rng, -2, 2, dtype)};
          if (op == 1)
            inputs = {random_tensor({N, H, F}, rng, -2, 2, dtype), random_tensor({H, F}, rng, -1, 1, dtype),
                      random_tensor({H, F}, rng, -1, 1, dtype)};
          if (op == 2)
            inputs = {random_tensor({N, K}, rng, -2, 2, dtype), random_tensor({K, H * F}, rng, -1, 1, dtype),
                      random_tensor({H, F}, rng, -1, 1, dtype), random_tensor({H, F}, rng, -1, 1, dtype)};
          inputs.push_back(random_tensor({g.num_edges(), H}, rng, -2, 2, dtype));
          inputs.push_back(random_tensor({H, F}, rng, -1, 1, dtype));
          const Tensor go = random_tensor({N, H, F}, rng, -1, 1, dtype);
          auto run = [&, alpha = alpha, key = key, op = op](bool fused) {
            std::vector<Tensor> in;
            for (const Tensor& t : inputs) in.push_back(t.clone().set_requires_grad());
            const Tensor& term = in[in.size() - 2];
            const Tensor& bias = in.back();
            const ops::OutputActivation activation{true, alpha, key};
            const ops::OutputActivation none = fused ? activation : ops::OutputActivation{};
            Tensor out =
                op == 0   ? ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop, term, bias, none)
                : op == 1 ? ops::gat_projected_attention(g, in[0], in[1], in[2], 0.2, kDrop, kValueDrop, term,
                                                         bias, none)
                          : ops::gat_linear_attention(g, in[0], in[1], in[2], in[3], 0.2, kDrop, kValueDrop,
                                                      term, bias, none);
            if (!fused) out = ops::elu_dropout(out, alpha, key);
            out.backward(go);
            std::vector<Tensor> results{out.detach()};
            for (const Tensor& t : in) results.push_back(t.grad());
            return results;
          };
          const std::vector<Tensor> fused = run(true), composed = run(false);
          EXPECT_TRUE(bitwise_equal(fused[0], composed[0])) << tag << ": out";
          for (size_t k = 1; k < fused.size(); ++k)
            EXPECT_TRUE(bitwise_equal(fused[k], composed[k])) << tag << ": gradient " << k;
        }
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes(), H = 2, F = 3;
  const Tensor el = random_tensor({N, H}, rng), er = random_tensor({N, H}, rng),
               v = random_tensor({N, H, F}, rng);
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, el, er, v, 0.2, {}, Tensor(), Tensor(), {true, -1.0, {}});
      },
      {"gat_attention_aggregate", "alpha -1", "negative"});
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, el, er, v, 0.2, {}, Tensor(), Tensor(), {true, 1.0, {1.5f, 1, 1}});
      },
      {"gat_attention_aggregate", "1.5"});
}

// The CPU kernels of gat_attention_aggregate and their KeptDecisions: the forward leaves there the
// decisions it drew, each kind with at most kMaxKeptDecisions of them, equal to the key's
// KeepMask; the backward reads what it finds there instead of drawing again. Given the decisions
// of other keys (of the same p) there, it gives bit for bit the gradients of a backward with those
// keys and nothing kept. On a small graph both kinds are kept; with 2^19 + 1 heads on 4 nodes the
// attention's E H decisions are over the bound (not kept), the activation's N H F under it.
TEST(GatAttentionAggregate, BackwardReadsTheDecisionsTheForwardKept) {
  std::mt19937_64 rng(53);
  const DropoutKey attn{0.3f, 42, 7}, attn_other{0.3f, 42, 8}, act{0.5f, 44, 7}, act_other{0.5f, 44, 9};
  auto mask_bytes = [](const KeepMask& m) { return std::vector<uint8_t>(m.data(), m.data() + m.size()); };
  struct Case {
    Graph g;
    int64_t H, F;
  };
  for (const Case& c :
       {Case{mixed_graph(), 8, 3}, Case{Graph::from_edges(4, {0, 1, 2, 3}, {1, 2, 3, 0}).with_self_loops(),
                                        (int64_t{1} << 19) + 1, 1}}) {
    const int64_t N = c.g.num_nodes(), E = c.g.num_edges(), H = c.H, F = c.F;
    const auto t = random_f32({{{N, H}, 1.0}, {{N, H}, 1.0}, {{N, H, F}, 1.0}, {{N, H, F}, 1.0}}, rng);
    const Tensor &el = t[0], &er = t[1], &v = t[2], &go = t[3];
    auto inputs = [&](const DropoutKey& a, const DropoutKey& o, ops::KeptDecisions* kept) {
      ops::GatAttentionInputs in = gat_kernel_inputs(c.g, el, er, Tensor(), v, 0.2, a);
      in.activation = {true, 1.0, o};
      in.kept = kept;
      return in;
    };
    ops::KeptDecisions kept;
    Tensor out = Tensor::empty({N, H, F}), lse = Tensor::empty({N, H});
    ops::GatAttentionForwardArgs forward{inputs(attn, act, &kept)};
    forward.out = &out;
    forward.lse = &lse;
    ops::kernels::gat_attention_aggregate_forward(forward);
    const bool attention_kept = E * H <= ops::kMaxKeptDecisions;
    ASSERT_EQ(attention_kept, H == 8);
    EXPECT_EQ(mask_bytes(kept.attention),
              attention_kept ? mask_bytes(KeepMask(attn, E * H)) : std::vector<uint8_t>());
    EXPECT_EQ(mask_bytes(kept.activation), mask_bytes(KeepMask(act, N * H * F)));

    kept.attention = attention_kept ? KeepMask(attn_other, E * H) : KeepMask();
    kept.activation = KeepMask(act_other, N * H * F);
    auto backward = [&](const ops::GatAttentionInputs& in) { return gat_kernel_gradients(in, out, lse, go); };
    const std::vector<Tensor> read = backward(inputs(attn, act, &kept)),
                              drawn =
                                  backward(inputs(attention_kept ? attn_other : attn, act_other, nullptr));
    for (size_t k = 0; k < read.size(); ++k)
      EXPECT_TRUE(bitwise_equal(read[k], drawn[k])) << "H=" << H << " gradient " << k;
  }
}

// The CPU backward's pass 2 reads the dropped-out weights that pass 1 stored when the graph has at
// most kMaxKeptDecisions (edge, head) pairs, and computes them again above that. Both ways give
// the same bits: each of 2^19 + 1 heads (over the bound) with the inputs of a single head (under
// it) gets that head's gradients. No dropout, whose keep index depends on H.
TEST(GatAttentionAggregate, BackwardOverTheBoundOfStoredWeightsGivesTheSameBits) {
  std::mt19937_64 rng(54);
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes(), E = g.num_edges(), F = 3, many = (int64_t{1} << 19) + 1;
  ASSERT_GT(E * many, ops::kMaxKeptDecisions);
  const auto one = random_f32({{{N, 1}, 1.0}, {{N, 1}, 1.0}, {{N, 1, F}, 1.0}, {{N, 1, F}, 1.0}}, rng);
  // t (N, 1, ...) as (N, H, ...), every head a copy of its one head.
  auto repeated = [](const Tensor& t, int64_t H) {
    Shape shape = t.shape();
    shape[1] = H;
    const int64_t rows = t.size(0), width = t.numel() / rows;
    const std::vector<float> from = t.to_vector<float>();
    std::vector<float> to;
    to.reserve(static_cast<size_t>(rows * H * width));
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t h = 0; h < H; ++h)
        to.insert(to.end(), from.begin() + n * width, from.begin() + (n + 1) * width);
    return Tensor::from_vector(to, shape);
  };
  auto gradients = [&](int64_t H) {  // d el, d er, d value
    const Tensor el = repeated(one[0], H), er = repeated(one[1], H), v = repeated(one[2], H),
                 go = repeated(one[3], H);
    const ops::GatAttentionInputs in = gat_kernel_inputs(g, el, er, Tensor(), v, 0.2);
    Tensor out = Tensor::empty({N, H, F}), lse = Tensor::empty({N, H});
    ops::GatAttentionForwardArgs forward{in};
    forward.out = &out;
    forward.lse = &lse;
    ops::kernels::gat_attention_aggregate_forward(forward);
    return gat_kernel_gradients(in, out, lse, go);
  };
  const std::vector<Tensor> stored = gradients(1), recomputed = gradients(many);
  for (size_t k = 0; k < stored.size(); ++k)
    EXPECT_TRUE(bitwise_equal(repeated(stored[k], many), recomputed[k])) << "gradient " << k;
}

// f64 gradients of the three GAT ops through the output activation (with its dropout, bias and
// edge term) against central differences.
TEST_P(GatAttentionAggregateOnDevice, GradientsThroughTheOutputActivation) {
  std::mt19937_64 rng(48);
  const ops::OutputActivation activation{true, 1.0, DropoutKey{0.5f, 44, 7}};
  for (const auto& [name, graph, H, F] : gradcheck_graphs(rng)) {
    const Graph g = graph.to(device());
    const int64_t N = g.num_nodes(), E = g.num_edges(), K = 3;
    auto aggregate = [&](const std::vector<Tensor>& in) {
      return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop, in[3], in[4], activation);
    };
    expect_gradients_match(
        "gat_attention_aggregate with activation " + name, aggregate,
        {random_f64({N, H}, rng, -2, 2), random_f64({N, H}, rng, -2, 2), random_f64({N, H, F}, rng, -2, 2),
         random_f64({E, H}, rng, -2, 2), random_f64({H, F}, rng)});
    auto projected = [&](const std::vector<Tensor>& in) {
      return ops::gat_projected_attention(g, in[0], in[1], in[2], 0.2, kDrop, kValueDrop, in[3], in[4],
                                          activation);
    };
    expect_gradients_match(
        "gat_projected_attention with activation " + name, projected,
        {random_f64({N, H, F}, rng, -2, 2), random_f64({H, F}, rng), random_f64({H, F}, rng),
         random_f64({E, H}, rng, -2, 2), random_f64({H, F}, rng)});
    auto linear = [&](const std::vector<Tensor>& in) {
      return ops::gat_linear_attention(g, in[0], in[1], in[2], in[3], 0.2, kDrop, kValueDrop, in[4], in[5],
                                       activation);
    };
    expect_gradients_match(
        "gat_linear_attention with activation " + name, linear,
        {random_f64({N, K}, rng, -2, 2), random_f64({K, H * F}, rng), random_f64({H, F}, rng),
         random_f64({H, F}, rng), random_f64({E, H}, rng, -2, 2), random_f64({H, F}, rng)});
  }
}

// gat_projected_attention: the composition it stands for, forward bit for bit and gradients to
// rounding (d wh is summed in another order), with and without each dropout, edge term and bias.
TEST(GatProjectedAttention, IsTheComposition) {
  std::mt19937_64 rng(37);
  for (const auto& [name, g] : gat_graphs(40, rng))
    for (const DropoutKey& attn : {DropoutKey{}, kDrop})
      for (const DropoutKey& value : {DropoutKey{}, kValueDrop})
        for (bool extras : {false, true}) {
          const int64_t N = g.num_nodes(), H = 3, F = 4;
          const std::string tag = name + " attention p=" + std::to_string(attn.p) +
                                  " value p=" + std::to_string(value.p) + (extras ? " edge term, bias" : "");
          const std::vector<Tensor> inputs{random_tensor({N, H, F}, rng), random_tensor({H, F}, rng),
                                           random_tensor({H, F}, rng),
                                           extras ? random_tensor({g.num_edges(), H}, rng, -2, 2) : Tensor(),
                                           extras ? random_tensor({H, F}, rng) : Tensor()};
          const Tensor go = random_tensor({N, H, F}, rng);
          auto run = [&](bool fused) {
            std::vector<Tensor> in;  // without the extras att_dst needs no gradient (d att_src alone)
            for (size_t k = 0; k < inputs.size(); ++k)
              in.push_back(!inputs[k].defined() ? inputs[k]
                           : k == 2 && !extras  ? inputs[k].clone()
                                                : inputs[k].clone().set_requires_grad());
            const Tensor out =
                fused ? ops::gat_projected_attention(g, in[0], in[1], in[2], 0.2, attn, value, in[3], in[4])
                      : ops::gat_attention_aggregate(g, ops::head_dot(in[0], in[1]),
                                                     ops::head_dot(in[0], in[2]), ops::dropout(in[0], value),
                                                     0.2, attn, in[3], in[4]);
            out.backward(go);
            std::vector<Tensor> results{out.detach()};
            for (const Tensor& t : in)
              if (t.defined() && t.requires_grad()) results.push_back(t.grad());
            return results;
          };
          const std::vector<Tensor> fused = run(true), composed = run(false);
          EXPECT_TRUE(bitwise_equal(fused[0], composed[0])) << tag << ": out";
          for (size_t k = 1; k < fused.size(); ++k)
            EXPECT_LE(rel_error(fused[k], composed[k]), 1e-14) << tag << ": gradient " << k;
        }
}

TEST_P(GatAttentionAggregateOnDevice, ProjectedGradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(38);
  for (const auto& [name, graph, H, F] : gradcheck_graphs(rng)) {
    const Graph g = graph.to(device());
    const int64_t N = g.num_nodes(), E = g.num_edges();
    auto f = [&](const std::vector<Tensor>& in) {
      return ops::gat_projected_attention(g, in[0], in[1], in[2], 0.2, kDrop, kValueDrop, in[3], in[4]);
    };
    expect_gradients_match("gat_projected_attention " + name, f,
                           {random_f64({N, H, F}, rng), random_f64({H, F}, rng), random_f64({H, F}, rng),
                            random_f64({E, H}, rng, -2, 2), random_f64({H, F}, rng)});
  }
}

TEST(GatProjectedAttention, RejectsMismatchedInputs) {
  std::mt19937_64 rng(39);
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes();
  const Tensor wh = random_tensor({N, 2, 3}, rng), a = random_tensor({2, 3}, rng);
  expect_error(
      [&] {
        ops::gat_projected_attention(g, random_tensor({N + 1, 2, 3}, rng), a, a, 0.2);
      },
      {"gat_projected_attention", "'wh'", "a row per node"});
  expect_error(
      [&] {
        ops::gat_projected_attention(g, wh, random_tensor({3, 2}, rng), a, 0.2);
      },
      {"gat_projected_attention", "'att_src'"});
  expect_error([&] { ops::gat_projected_attention(g, wh, a, a.to(DType::f32), 0.2); },
               {"gat_projected_attention", "'att_dst'"});
  expect_error(
      [&] {
        ops::gat_projected_attention(g, random_tensor({N, 6}, rng), a, a, 0.2);
      },
      {"gat_projected_attention", "'wh'"});
  expect_error(
      [&] { ops::gat_projected_attention(g, wh, a, a, 0.2, {}, {}, Tensor(), random_tensor({7}, rng)); },
      {"gat_projected_attention", "'bias'"});
  expect_error(
      [&] {
        ops::gat_projected_attention(g, wh, a, a, 0.2, {}, {}, random_tensor({g.num_edges() + 1, 2}, rng));
      },
      {"gat_projected_attention", "edge_term"});
}

// gat_linear_attention: gat_projected_attention of matmul(x, weight), forward bit for bit and
// gradients to rounding, with and without each dropout, edge term and bias, and with x needing a
// gradient or not.
TEST(GatLinearAttention, IsTheProjectedOpOfTheProduct) {
  std::mt19937_64 rng(40);
  for (const auto& [name, g] : gat_graphs(40, rng))
    for (const DropoutKey& attn : {DropoutKey{}, kDrop})
      for (const DropoutKey& value : {DropoutKey{}, kValueDrop})
        for (bool extras : {false, true}) {
          const int64_t N = g.num_nodes(), K = 5, H = 3, F = 4;
          const std::string tag = name + " attention p=" + std::to_string(attn.p) +
                                  " value p=" + std::to_string(value.p) +
                                  (extras ? " edge term, bias, d x" : "");
          const std::vector<Tensor> inputs{random_tensor({N, K}, rng),
                                           random_tensor({K, H * F}, rng),
                                           random_tensor({H, F}, rng),
                                           random_tensor({H, F}, rng),
                                           extras ? random_tensor({g.num_edges(), H}, rng, -2, 2) : Tensor(),
                                           extras ? random_tensor({H, F}, rng) : Tensor()};
          const Tensor go = random_tensor({N, H, F}, rng);
          auto run = [&](bool linear) {
            std::vector<Tensor> in;  // x needs a gradient with the extras only
            for (size_t k = 0; k < inputs.size(); ++k)
              in.push_back(!inputs[k].defined() ? inputs[k]
                           : k == 0 && !extras  ? inputs[k].clone()
                                                : inputs[k].clone().set_requires_grad());
            const Tensor out =
                linear
                    ? ops::gat_linear_attention(g, in[0], in[1], in[2], in[3], 0.2, attn, value, in[4], in[5])
                    : ops::gat_projected_attention(g, ops::reshape(ops::matmul(in[0], in[1]), {N, H, F}),
                                                   in[2], in[3], 0.2, attn, value, in[4], in[5]);
            out.backward(go);
            std::vector<Tensor> results{out.detach()};
            for (const Tensor& t : in)
              if (t.defined() && t.requires_grad()) results.push_back(t.grad());
            return results;
          };
          const std::vector<Tensor> linear = run(true), projected = run(false);
          ASSERT_EQ(linear.size(), projected.size()) << tag;
          EXPECT_TRUE(bitwise_equal(linear[0], projected[0])) << tag << ": out";
          for (size_t k = 1; k < linear.size(); ++k)
            EXPECT_LE(rel_error(linear[k], projected[k]), 1e-13) << tag << ": gradient " << k;
        }
}

TEST_P(GatAttentionAggregateOnDevice, LinearGradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(41);
  for (const auto& [name, graph, H, F] : gradcheck_graphs(rng)) {
    const Graph g = graph.to(device());
    const int64_t N = g.num_nodes(), E = g.num_edges(), K = 3;
    auto f = [&](const std::vector<Tensor>& in) {
      return ops::gat_linear_attention(g, in[0], in[1], in[2], in[3], 0.2, kDrop, kValueDrop, in[4], in[5]);
    };
    expect_gradients_match(
        "gat_linear_attention " + name, f,
        {random_f64({N, K}, rng), random_f64({K, H * F}, rng), random_f64({H, F}, rng),
         random_f64({H, F}, rng), random_f64({E, H}, rng, -2, 2), random_f64({H, F}, rng)});
  }
  // Without d x, through the fused kernels on the device ({K, H, F} = {4, 2, 8}: the bits
  // between the forward and the backward).
  const Graph g = mixed_graph().with_self_loops().to(device());
  const int64_t N = g.num_nodes(), K = 4, H = 2, F = 8;
  const Tensor x = random_f64({N, K}, rng);
  auto f = [&](const std::vector<Tensor>& in) {
    return ops::gat_linear_attention(g, x, in[0], in[1], in[2], 0.2, kDrop, kValueDrop, in[3], in[4]);
  };
  expect_gradients_match("gat_linear_attention without d x", f,
                         {random_f64({K, H * F}, rng), random_f64({H, F}, rng), random_f64({H, F}, rng),
                          random_f64({g.num_edges(), H}, rng, -2, 2), random_f64({H, F}, rng)});
}

TEST(GatLinearAttention, RejectsMismatchedInputs) {
  std::mt19937_64 rng(42);
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes();
  const Tensor x = random_tensor({N, 4}, rng), w = random_tensor({4, 6}, rng), a = random_tensor({2, 3}, rng);
  expect_error(
      [&] {
        ops::gat_linear_attention(g, random_tensor({N + 1, 4}, rng), w, a, a, 0.2);
      },
      {"gat_linear_attention", "'x'", "a row per node"});
  expect_error(
      [&] {
        ops::gat_linear_attention(g, random_tensor({N, 4, 1}, rng), w, a, a, 0.2);
      },
      {"gat_linear_attention", "'x'"});
  expect_error(
      [&] {
        ops::gat_linear_attention(g, x, random_tensor({5, 6}, rng), a, a, 0.2);
      },
      {"gat_linear_attention", "'weight'", "(K, H F) = (4, 6)"});
  expect_error(
      [&] {
        ops::gat_linear_attention(g, x, random_tensor({4, 8}, rng), a, a, 0.2);
      },
      {"gat_linear_attention", "'weight'"});
  expect_error([&] { ops::gat_linear_attention(g, x, w.to(DType::f32), a, a, 0.2); },
               {"gat_linear_attention", "'weight'"});
  expect_error(
      [&] {
        ops::gat_linear_attention(g, x, w, a, random_tensor({3, 2}, rng), 0.2);
      },
      {"gat_linear_attention", "'att_dst'"});
  expect_error(
      [&] { ops::gat_linear_attention(g, x, w, a, a, 0.2, {}, {}, Tensor(), random_tensor({7}, rng)); },
      {"gat_linear_attention", "'bias'"});
  expect_error(
      [&] {
        ops::gat_linear_attention(g, x, w, a, a, 0.2, {}, DropoutKey{1.5f, 1, 1});
      },
      {"gat_linear_attention"});
}

TEST(GatAttentionAggregate, PositiveSumsGiveDerWithoutAnEdgePass) {
  // The identity CUDA's backward uses for d er (the header): (1 - slope) (G.pos_out - D pos_weight)
  // with D = G.out equals the CPU's sum of d scores * LeakyReLU' over the row's edges, with and
  // without dropout and edge term, on empty rows and long ones. A negative slope makes positive
  // scores of negative arguments: pos_out is over the arguments' signs. The positive sums leave
  // the forward's out and lse as they are.
  std::mt19937_64 rng(35);
  for (const auto& [name, g] : gat_graphs(300, rng))
    for (double slope : {0.2, -0.5})
      for (const DropoutKey& key : {DropoutKey{}, kDrop})
        for (bool with_term : {false, true}) {
          const int64_t N = g.num_nodes(), H = 3, F = 5;
          const Tensor el = random_tensor({N, H}, rng, -2, 2), er = random_tensor({N, H}, rng, -2, 2);
          const Tensor term = with_term ? random_tensor({g.num_edges(), H}, rng, -2, 2) : Tensor();
          const Tensor v = random_tensor({N, H, F}, rng), go = random_tensor({N, H, F}, rng);
          const std::string tag = name + " slope " + std::to_string(slope) + " p=" + std::to_string(key.p) +
                                  (with_term ? " edge term" : "");
          Tensor out = Tensor::empty({N, H, F}, DType::f64), lse = Tensor::empty({N, H}, DType::f64);
          Tensor pos_out = Tensor::empty({N, H, F}, DType::f64),
                 pos_weight = Tensor::empty({N, H}, DType::f64);
          const ops::GatAttentionInputs in = gat_kernel_inputs(g, el, er, term, v, slope, key);
          ops::GatAttentionForwardArgs forward{in};
          forward.out = &out;
          forward.lse = &lse;
          forward.pos_out = &pos_out;
          forward.pos_weight = &pos_weight;
          ops::kernels::gat_attention_aggregate_forward(forward);
          Tensor out_alone = Tensor::empty({N, H, F}, DType::f64),
                 lse_alone = Tensor::empty({N, H}, DType::f64);
          ops::GatAttentionForwardArgs alone{in};
          alone.out = &out_alone;
          alone.lse = &lse_alone;
          ops::kernels::gat_attention_aggregate_forward(alone);
          EXPECT_TRUE(bitwise_equal(out, out_alone)) << tag;
          EXPECT_TRUE(bitwise_equal(lse, lse_alone)) << tag;
          Tensor der = Tensor::empty({N, H}, DType::f64);
          ops::GatAttentionBackwardArgs backward{in};
          backward.out = out;
          backward.lse = lse;
          backward.grad_out = go;
          backward.grad_er = &der;
          ops::kernels::gat_attention_aggregate_backward(backward);
          const std::vector<double> G = go.to_vector<double>(), o = out.to_vector<double>(),
                                    po = pos_out.to_vector<double>(), pw = pos_weight.to_vector<double>();
          std::vector<double> identity(static_cast<size_t>(N * H));
          for (int64_t t = 0; t < N * H; ++t) {
            double D = 0, Gp = 0;
            for (int64_t f = 0; f < F; ++f)
              D += G[t * F + f] * o[t * F + f], Gp += G[t * F + f] * po[t * F + f];
            identity[t] = (1 - slope) * (Gp - D * pw[t]);
          }
          expect_close(der, Tensor::from_vector(identity, {N, H}), tag, 1e-12);
        }
}

TEST(GatAttentionAggregate, RejectsMismatchedInputs) {
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes();
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 3}),
                                     Tensor::zeros({N, 2, 4}), 0.2);
      },
      {"gat_attention_aggregate", "(8, 3)"});
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}),
                                     Tensor::zeros({N, 3, 4}), 0.2);
      },
      {"gat_attention_aggregate", "(8, 3, 4)", "Ns = 8"});
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}),
                                     Tensor::zeros({N, 2, 4}), 0.2, {}, Tensor::zeros({g.num_edges(), 3}));
      },
      {"gat_attention_aggregate", "edge_term", "(" + std::to_string(g.num_edges()) + ", 3)"});
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}),
                                     Tensor::zeros({N, 2, 4}), 0.2, {},
                                     Tensor::zeros({g.num_edges(), 2}, DType::f64));
      },
      {"gat_attention_aggregate", "edge_term"});
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}),
                                     Tensor::zeros({N, 2, 4}), NAN);
      },
      {"gat_attention_aggregate", "negative_slope"});
  // The kernels' positive sums: both or neither, of out's and lse's shapes.
  Tensor out = Tensor::empty({N, 2, 4}), lse = Tensor::empty({N, 2}), pos_out = Tensor::empty({N, 2, 4});
  Tensor short_weight = Tensor::empty({N - 1, 2});
  ops::GatAttentionForwardArgs forward{gat_kernel_inputs(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}),
                                                         Tensor(), Tensor::zeros({N, 2, 4}), 0.2)};
  forward.out = &out;
  forward.lse = &lse;
  forward.pos_out = &pos_out;
  expect_error([&] { ops::kernels::gat_attention_aggregate_forward(forward); },
               {"gat_attention_aggregate (positive sums)", "together"});
  forward.pos_weight = &short_weight;
  expect_error([&] { ops::kernels::gat_attention_aggregate_forward(forward); },
               {"gat_attention_aggregate (positive sums)", "'pos_weight'", "(7, 2)"});
}

// ---- gatv2_attention_aggregate -----------------------------------------------------------

namespace {

// GATv2's inputs: xl (Ns, H, F), xr (Nd, H, F), att (H, F) and, when edge_term is set, (E, H, F).
struct Gatv2Inputs {
  Tensor xl, xr, att, edge_term;
  std::vector<Tensor> list() const {
    return edge_term.defined() ? std::vector<Tensor>{xl, xr, att, edge_term}
                               : std::vector<Tensor>{xl, xr, att};
  }
};
Gatv2Inputs gatv2_inputs(const Graph& g, int64_t H, int64_t F, bool edge_term, std::mt19937_64& rng,
                         DType dtype = DType::f64, Device device = Device::cpu) {
  return {random_tensor({g.num_src_nodes(), H, F}, rng, -1, 1, dtype, device),
          random_tensor({g.num_dst_nodes(), H, F}, rng, -1, 1, dtype, device),
          random_tensor({H, F}, rng, -1, 1, dtype, device),
          edge_term ? random_tensor({g.num_edges(), H, F}, rng, -1, 1, dtype, device) : Tensor()};
}

// The GATv2 op of inputs listed as Gatv2Inputs::list() (xl, xr, att[, edge_term]).
Tensor gatv2(const Graph& g, const std::vector<Tensor>& in, const DropoutKey& key) {
  return ops::gatv2_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, in.size() > 3 ? in[3] : Tensor());
}

// The scores of the dense reference: s[e,h] = sum_f att[h,f] LeakyReLU(xl[j] + xr[i] + et[e]),
// with x[e,h,f] materialised as an explicit (E, H, F) array (fine in a test, what the op avoids).
std::vector<double> reference_gatv2_scores(const Graph& g, const Gatv2Inputs& in, double slope) {
  const int64_t E = g.num_edges(), H = in.xl.size(1), F = in.xl.size(2);
  const std::vector<int32_t> srcs = g.sources(), dsts = g.destinations();
  const std::vector<double> xl = in.xl.to_vector<double>(), xr = in.xr.to_vector<double>(),
                            att = in.att.to_vector<double>();
  const std::vector<double> et =
      in.edge_term.defined() ? in.edge_term.to_vector<double>() : std::vector<double>(E * H * F, 0.0);
  std::vector<double> x(static_cast<size_t>(E * H * F));  // (E, H, F)
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t f = 0; f < F; ++f)
        x[(e * H + h) * F + f] =
            xl[(srcs[e] * H + h) * F + f] + xr[(dsts[e] * H + h) * F + f] + et[(e * H + h) * F + f];
  std::vector<double> s(static_cast<size_t>(E * H), 0.0);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t f = 0; f < F; ++f) {
        const double v = x[(e * H + h) * F + f];
        s[e * H + h] += att[h * F + f] * (v > 0 ? v : slope * v);
      }
  return s;
}

}  // namespace

TEST(Gatv2AttentionAggregate, MatchesDenseReference) {
  // Every graph shape (empty rows, a hub, loops on all, some or no nodes), with and without the
  // edge term and dropout, F = 1 and 4, H = 1 and 3.
  std::mt19937_64 rng(41);
  for (const auto& [name, g] : gat_graphs(100, rng))
    for (const DropoutKey& key : {DropoutKey{}, kDrop})
      for (bool edge_term : {false, true})
        for (int64_t H : {1, 3})
          for (int64_t F : {1, 4}) {
            const Gatv2Inputs in = gatv2_inputs(g, H, F, edge_term, rng);
            const std::string tag = name + " H=" + std::to_string(H) + " F=" + std::to_string(F) +
                                    " edge_term=" + std::to_string(edge_term) + " p=" + std::to_string(key.p);
            const Tensor out =
                ops::gatv2_attention_aggregate(g, in.xl, in.xr, in.att, 0.2, key, in.edge_term);
            const std::vector<double> scores = reference_gatv2_scores(g, in, 0.2);
            EXPECT_LE(rel_error(out.to_vector<double>(),
                                reference_aggregate(g, scores, in.xl.to_vector<double>(), H, F, key)),
                      1e-13)
                << tag;
            EXPECT_LE(
                rel_error(
                    ops::gatv2_edge_scores(g, in.xl, in.xr, in.att, 0.2, in.edge_term).to_vector<double>(),
                    scores),
                1e-14)
                << tag << " scores";
          }
}

class Gatv2AttentionAggregateOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(Gatv2AttentionAggregateOnDevice);

TEST_P(Gatv2AttentionAggregateOnDevice, GradientsMatchFiniteDifferences) {
  // d xl (value and score paths), d xr, d att and d edge_term, on every graph shape, without
  // dropout and edge term, and with both; then with dropout, the edge term on and off, on the
  // mixed graph, the looped mixed graph and, on CUDA, a row of 1,200 edges and a source of 975
  // (chunks).
  std::mt19937_64 rng(42);
  for (const auto& [name, graph] : gat_graphs(16, rng))
    for (const auto& [key, edge_term] : {std::pair{DropoutKey{}, false}, std::pair{kDrop, true}}) {
      const Graph g = graph.to(device());
      auto f = [&, key = key](const std::vector<Tensor>& in) { return gatv2(g, in, key); };
      expect_gradients_match("gatv2_attention_aggregate " + name + " p=" + std::to_string(key.p) +
                                 " edge_term=" + std::to_string(edge_term),
                             f, gatv2_inputs(g, 2, 3, edge_term, rng, DType::f64, device()).list());
    }
  std::vector<std::pair<std::string, Graph>> graphs{{"mixed", mixed_graph()},
                                                    {"looped mixed", mixed_graph().with_self_loops()}};
  if (device() == Device::cuda) graphs.emplace_back("split hub", random_graph(1300, 0, 1200, rng));
  for (const auto& [name, graph] : graphs) {
    const Graph g = graph.to(device());
    const int64_t H = name == "split hub" ? 1 : 3, F = name == "split hub" ? 2 : 3;
    for (bool edge_term : {false, true})
      expect_gradients_match(
          "gatv2_attention_aggregate " + name + " p=" + std::to_string(kDrop.p) +
              " edge_term=" + std::to_string(edge_term),
          [&](const std::vector<Tensor>& x) { return gatv2(g, x, kDrop); },
          gatv2_inputs(g, H, F, edge_term, rng, DType::f64, device()).list());
  }
}

namespace {

// The GATv2 op's output, its scores (gatv2_edge_scores) and the gradients of every input for one
// upstream gradient, on the device of the inputs: {out, scores, d xl, d xr, d att[, d edge_term]}.
// `want` picks the inputs that require grad (the others' gradients stay undefined).
std::vector<Tensor> run_gatv2(const Graph& g, const Gatv2Inputs& given, const Tensor& grad_out,
                              const DropoutKey& key, std::vector<bool> want = {true, true, true, true}) {
  std::vector<Tensor> in = given.list();
  for (size_t k = 0; k < in.size(); ++k) {
    in[k] = in[k].detach();
    if (want[k]) in[k].set_requires_grad();
  }
  std::vector<Tensor> result{gatv2(g, in, key)};
  result[0].backward(grad_out);
  result.push_back(ops::gatv2_edge_scores(g, in[0], in[1], in[2], 0.2, in.size() > 3 ? in[3] : Tensor()));
  for (size_t k = 0; k < in.size(); ++k) result.push_back(want[k] ? in[k].grad() : Tensor());
  return result;
}

}  // namespace

TEST(Gatv2AttentionAggregate, BitwiseTheSameForAnyThreadCountAndEachGradientAlone) {
  // A graph of several hundred row tasks with a hub, f32, edge term and dropout on: the results of
  // 1, 2 and 5 threads and of repeated runs are the same bits, and so is a gradient asked for alone.
  const int saved_threads = omp_get_max_threads();
  std::mt19937_64 rng(43);
  const Graph g = random_graph(3000, 40000, 500, rng);
  const Gatv2Inputs in = gatv2_inputs(g, 2, 8, true, rng, DType::f32);
  const Tensor go = random_tensor({g.num_nodes(), 2, 8}, rng, -1, 1, DType::f32);
  omp_set_num_threads(1);
  const std::vector<Tensor> want = run_gatv2(g, in, go, kDrop);
  for (int threads : {2, 5, 5}) {
    omp_set_num_threads(threads);
    const std::vector<Tensor> got = run_gatv2(g, in, go, kDrop);
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_TRUE(bitwise_equal(got[k], want[k])) << threads << " threads, tensor " << k;
  }
  omp_set_num_threads(saved_threads);
  for (size_t k = 0; k < 4; ++k) {
    std::vector<bool> one(4, false);
    one[k] = true;
    EXPECT_TRUE(bitwise_equal(run_gatv2(g, in, go, kDrop, one)[k + 2], want[k + 2]))
        << "gradient " << k << " alone";
  }
}

TEST(Gatv2AttentionAggregate, EqualsCsrSoftmaxAggregateOfItsScores) {
  // The fused forward and csr_softmax_aggregate of gatv2_edge_scores compute the same scores in
  // the same order: the same bits, f32 and f64.
  std::mt19937_64 rng(44);
  for (const auto& [name, g] : gat_graphs(300, rng))
    for (DType dtype : {DType::f32, DType::f64}) {
      const Gatv2Inputs in = gatv2_inputs(g, 3, 5, true, rng, dtype);
      const Tensor scores = ops::gatv2_edge_scores(g, in.xl, in.xr, in.att, 0.2, in.edge_term);
      EXPECT_TRUE(
          bitwise_equal(ops::gatv2_attention_aggregate(g, in.xl, in.xr, in.att, 0.2, kDrop, in.edge_term),
                        ops::csr_softmax_aggregate(g, scores, in.xl, kDrop)))
          << name << " " << dtype_name(dtype);
    }
}

TEST(Gatv2AttentionAggregate, WithoutEdgesOrFeaturesEverythingIsZero) {
  std::mt19937_64 rng(45);
  const Graph none = Graph::from_edges(4, {}, {});
  const Gatv2Inputs in = gatv2_inputs(none, 2, 3, true, rng);
  const std::vector<Tensor> r = run_gatv2(none, in, Tensor::full({4, 2, 3}, 1.0, DType::f64), kDrop);
  for (const Tensor& t : r) {
    EXPECT_EQ(t.dtype(), DType::f64);
    for (double x : t.to_vector<double>()) EXPECT_EQ(x, 0.0);
  }
  // F = 0: uniform weights over nothing; the output and gradients are empty.
  const Graph g = mixed_graph();
  const Gatv2Inputs empty = gatv2_inputs(g, 2, 0, false, rng);
  const std::vector<Tensor> e =
      run_gatv2(g, empty, Tensor::zeros({8, 2, 0}, DType::f64), {}, {true, true, true});
  EXPECT_EQ(e[0].shape(), Shape({8, 2, 0}));
  EXPECT_EQ(e[4].shape(), Shape({2, 0}));
}

TEST_P(Gatv2AttentionAggregateOnDevice, GradientsMatchFiniteDifferencesOnAHubLongerThanAWarp) {
  // A row of 40 in-edges (longer than a warp's lanes and than the CUDA kernels' batches of 4
  // edges), sources of several out-edges, nodes without in-edges; one head and several; F = 5 (not
  // a multiple of the vector width), 8, and 40 (two words of signs per head); without dropout and
  // edge term, and with both. Then 10 heads of 6 on the mixed graph (on CUDA two blocks of heads
  // per row, whose groups write their own words of signs, 8 bits a head, 2 of them padding).
  std::mt19937_64 rng(46);
  const Graph g = hub_graph(40, 80, rng).to(device());
  for (const auto& [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {4, 8}, {1, 40}})
    for (const auto& [key, edge_term] : {std::pair{DropoutKey{}, false}, std::pair{kDrop, true}})
      expect_gradients_match(
          "gatv2_attention_aggregate hub of 40 H=" + std::to_string(H) + " F=" + std::to_string(F) +
              " p=" + std::to_string(key.p),
          [&, key = key](const std::vector<Tensor>& in) { return gatv2(g, in, key); },
          gatv2_inputs(g, H, F, edge_term, rng, DType::f64, device()).list());
  const Graph mixed = mixed_graph().to(device());
  expect_gradients_match(
      "gatv2_attention_aggregate mixed graph H=10 F=6",
      [&](const std::vector<Tensor>& in) { return gatv2(mixed, in, kDrop); },
      gatv2_inputs(mixed, 10, 6, true, rng, DType::f64, device()).list());
}

namespace {

// The signs of x = xl[j] + xr[i] (+ et[e]) that the forward saves, computed in T as the op does:
// bit q % 32 of word (e, q / 32) with q = h P + f, P the power of two covering F, the other bits
// zero.
template <class T>
std::vector<int32_t> reference_gatv2_signs(const Graph& g, const Gatv2Inputs& in) {
  const int64_t E = g.num_edges(), H = in.xl.size(1), F = in.xl.size(2);
  int64_t P = 1;
  while (P < F) P *= 2;
  const int64_t words_per_edge = (H * P + 31) / 32;
  const std::vector<int32_t> srcs = g.sources(), dsts = g.destinations();
  const std::vector<T> xl = in.xl.to_vector<T>(), xr = in.xr.to_vector<T>();
  const std::vector<T> et = in.edge_term.defined() ? in.edge_term.to_vector<T>() : std::vector<T>();
  std::vector<int32_t> words(static_cast<size_t>(E * words_per_edge), 0);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t f = 0; f < F; ++f) {
        T x = xl[(srcs[e] * H + h) * F + f] + xr[(dsts[e] * H + h) * F + f];
        if (!et.empty()) x = x + et[(e * H + h) * F + f];
        const int64_t q = h * P + f;
        if (x > T(0)) words[e * words_per_edge + q / 32] |= static_cast<int32_t>(1u << (q % 32));
      }
  return words;
}

// The forward kernel's outputs {out, lse, scores, signs} on the inputs' device, the last two
// written only when `save` (else as made: signs filled with -1, so a word left unwritten shows).
std::vector<Tensor> gatv2_forward_outputs(const Graph& g, const Gatv2Inputs& in, const DropoutKey& key,
                                          bool save) {
  const int64_t Nd = g.num_dst_nodes(), E = g.num_edges(), H = in.xl.size(1), F = in.xl.size(2);
  const DType dtype = in.xl.dtype();
  const Device device = in.xl.device();
  std::vector<Tensor> r{Tensor::empty({Nd, H, F}, dtype, device), Tensor::empty({Nd, H}, dtype, device),
                        Tensor::empty({E, H}, dtype, device),
                        Tensor::full({E, ops::gatv2_sign_words(H, F)}, -1.0, DType::i32, device)};
  ops::Gatv2AttentionForwardArgs args{{{&g, in.xl, in.xr, in.att, 0.2, in.edge_term}, key}};
  args.out = &r[0];
  args.lse = &r[1];
  args.scores = save ? &r[2] : nullptr;
  args.signs = save ? &r[3] : nullptr;
  ops::kernels::gatv2_attention_aggregate_forward(args);
  return r;
}

}  // namespace

TEST_P(Gatv2AttentionAggregateOnDevice, ForwardSavesTheScoresAndTheSignsOfX) {
  // The scores the forward saves are gatv2_edge_scores' bits, and its signs those of x in the
  // dtype's arithmetic, packed: 3 heads of F = 5 (8 bits each, in one word), 40 (64 bits each)
  // and 64; 20 heads of 8 and 10 of 3 (on CUDA two groups of lanes per row, each writing its
  // own words); f32 and f64, with and without the edge term; out and lse are the same bits as
  // without saving.
  std::mt19937_64 rng(47);
  const Graph host = hub_graph(40, 80, rng);
  const Graph g = host.to(device());
  for (DType dtype : {DType::f32, DType::f64})
    for (const auto& [H, F] :
         std::vector<std::pair<int64_t, int64_t>>{{3, 5}, {3, 40}, {3, 64}, {20, 8}, {10, 3}})
      for (bool edge_term : {false, true}) {
        const std::string tag = std::string(dtype_name(dtype)) + " H=" + std::to_string(H) +
                                " F=" + std::to_string(F) + " edge_term=" + std::to_string(edge_term);
        const Gatv2Inputs in = gatv2_inputs(g, H, F, edge_term, rng, dtype, device());
        const std::vector<Tensor> saved = gatv2_forward_outputs(g, in, kDrop, true),
                                  plain = gatv2_forward_outputs(g, in, kDrop, false);
        EXPECT_TRUE(bitwise_equal(saved[0], plain[0])) << tag << " out";
        EXPECT_TRUE(bitwise_equal(saved[1], plain[1])) << tag << " lse";
        EXPECT_TRUE(
            bitwise_equal(saved[2], ops::gatv2_edge_scores(g, in.xl, in.xr, in.att, 0.2, in.edge_term)))
            << tag << " scores";
        const Gatv2Inputs on_host{in.xl.to(Device::cpu), in.xr.to(Device::cpu), in.att.to(Device::cpu),
                                  edge_term ? in.edge_term.to(Device::cpu) : Tensor()};
        EXPECT_EQ(saved[3].to_vector<int32_t>(), dtype == DType::f32
                                                     ? reference_gatv2_signs<float>(host, on_host)
                                                     : reference_gatv2_signs<double>(host, on_host))
            << tag << " signs";
      }
}

TEST(Gatv2AttentionAggregate, KernelsTakeTheSavedScoresAndSignsTogether) {
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes(), E = g.num_edges();
  const Tensor x = Tensor::zeros({N, 2, 40});
  Tensor out = Tensor::empty({N, 2, 40}), lse = Tensor::empty({N, 2}), scores = Tensor::empty({E, 2});
  // 2 heads of F = 40 take 64 bits each: 4 words an edge.
  Tensor one_word = Tensor::empty({E, 1}, DType::i32), as_floats = Tensor::empty({E, 4});
  ops::Gatv2AttentionForwardArgs forward{{{&g, x, x, Tensor::zeros({2, 40}), 0.2, Tensor()}, {}}};
  forward.out = &out;
  forward.lse = &lse;
  forward.scores = &scores;
  expect_error([&] { ops::kernels::gatv2_attention_aggregate_forward(forward); },
               {"gatv2_attention_aggregate (saved scores)", "together"});
  forward.signs = &one_word;
  expect_error([&] { ops::kernels::gatv2_attention_aggregate_forward(forward); },
               {"gatv2_attention_aggregate (saved scores)", "'signs'", "(13, 1)"});
  forward.signs = &as_floats;
  expect_error([&] { ops::kernels::gatv2_attention_aggregate_forward(forward); },
               {"gatv2_attention_aggregate (saved scores)", "'signs'", "i32"});
  ops::Gatv2AttentionBackwardArgs backward{{{&g, x, x, Tensor::zeros({2, 40}), 0.2, Tensor()}, {}}};
  backward.out = out;
  backward.lse = lse;
  backward.scores = scores;
  backward.grad_out = x;
  expect_error([&] { ops::kernels::gatv2_attention_aggregate_backward(backward); },
               {"gatv2_attention_aggregate backward", "together"});
}

// ---- bipartite graphs: source-side tensors (Ns rows), destination-side ones (Nd rows) ------

// Fewer sources than destinations and more, each plain and with self loops (i, i) for
// i < min(Ns, Nd); destinations without in-edges, sources without out-edges, a long row each way.
std::vector<std::pair<std::string, Graph>> bipartite_graphs(std::mt19937_64& rng) {
  std::vector<std::pair<std::string, Graph>> graphs;
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{6, 13}, {13, 6}}) {
    const Graph g = random_bipartite_graph(ns, nd, 2 * (ns + nd), 10, rng);
    const std::string name = std::to_string(ns) + " -> " + std::to_string(nd);
    graphs.emplace_back(name, g);
    graphs.emplace_back(name + " looped", g.with_self_loops());
  }
  return graphs;
}

TEST(BipartiteGraphOps, MatchDenseReferences) {
  std::mt19937_64 rng(41);
  for (const auto& [name, g] : bipartite_graphs(rng)) {
    const int64_t Ns = g.num_src_nodes(), Nd = g.num_dst_nodes(), H = 2, F = 3;
    const auto srcs = g.sources(), dsts = g.destinations();
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
      Tensor s = random_tensor({g.num_edges(), H}, rng, -3, 3), v = random_tensor({Ns, H, F}, rng);
      Tensor out = ops::csr_softmax_aggregate(g, s, v, key);
      ASSERT_EQ(out.shape(), (Shape{Nd, H, F})) << name;
      EXPECT_LE(rel_error(out.to_vector<double>(),
                          reference_aggregate(g, s.to_vector<double>(), v.to_vector<double>(), H, F, key)),
                1e-14)
          << name << " p=" << key.p;
    }
    Tensor el = random_tensor({Ns, H}, rng), er = random_tensor({Nd, H}, rng);
    const auto sc = ops::gat_edge_scores(g, el, er, 0.2).to_vector<double>();
    const auto l = el.to_vector<double>(), r = er.to_vector<double>();
    for (int64_t e = 0; e < g.num_edges(); ++e)
      for (int64_t h = 0; h < H; ++h) {
        const double x = l[srcs[e] * H + h] + r[dsts[e] * H + h];
        EXPECT_EQ(sc[e * H + h], x > 0 ? x : 0.2 * x) << name;
      }
    for (bool edge_term : {false, true}) {  // GATv2: xl (Ns, H, F), xr (Nd, H, F)
      const Gatv2Inputs in = gatv2_inputs(g, H, F, edge_term, rng);
      const std::vector<double> scores = reference_gatv2_scores(g, in, 0.2);
      const Tensor out = ops::gatv2_attention_aggregate(g, in.xl, in.xr, in.att, 0.2, kDrop, in.edge_term);
      ASSERT_EQ(out.shape(), (Shape{Nd, H, F})) << name;
      EXPECT_LE(rel_error(out.to_vector<double>(),
                          reference_aggregate(g, scores, in.xl.to_vector<double>(), H, F, kDrop)),
                1e-13)
          << name << " gatv2 edge_term=" << edge_term;
      EXPECT_LE(
          rel_error(ops::gatv2_edge_scores(g, in.xl, in.xr, in.att, 0.2, in.edge_term).to_vector<double>(),
                    scores),
          1e-14)
          << name << " gatv2 scores edge_term=" << edge_term;
    }
    const Tensor a = ops::csr_softmax(g, ops::gat_edge_scores(g, el, er, 0.2));
    std::vector<double> row_sum(static_cast<size_t>(Nd * H), 0.0);
    const auto av = a.to_vector<double>();
    for (int64_t e = 0; e < g.num_edges(); ++e)
      for (int64_t h = 0; h < H; ++h) row_sum[dsts[e] * H + h] += av[e * H + h];
    const auto degree = g.in_degrees();
    for (int64_t i = 0; i < Nd; ++i)
      for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(row_sum[i * H + h], degree[i] ? 1.0 : 0.0, 1e-14) << name;
  }
}

TEST(BipartiteGraphOps, DestinationsWithoutInEdgesGiveZerosAndNoGradient) {
  std::mt19937_64 rng(42);
  for (const auto& [name, g] : bipartite_graphs(rng)) {
    const int64_t Ns = g.num_src_nodes(), Nd = g.num_dst_nodes(), H = 2, F = 3;
    Tensor el = random_tensor({Ns, H}, rng).set_requires_grad(),
           er = random_tensor({Nd, H}, rng).set_requires_grad();
    Tensor v = random_tensor({Ns, H, F}, rng).set_requires_grad();
    Tensor out = ops::gat_attention_aggregate(g, el, er, v, 0.2);
    const auto o = out.to_vector<double>();
    const auto degree = g.in_degrees();
    std::vector<double> grad(o.size(), 0.0);  // upstream gradient on the empty rows only
    int64_t empty_rows = 0;
    for (int64_t i = 0; i < Nd; ++i) {
      if (degree[i]) continue;
      ++empty_rows;
      for (int64_t k = 0; k < H * F; ++k) {
        EXPECT_EQ(o[i * H * F + k], 0.0) << name << " row " << i;
        grad[i * H * F + k] = 1.0 + static_cast<double>(i * H * F + k);  // a value of its own each
      }
    }
    if (!g.one_self_loop_per_node() || Nd > Ns) {  // else every destination has its loop
      EXPECT_GT(empty_rows, 0) << name;
    }
    out.backward(Tensor::from_vector(grad, out.shape()));
    for (const Tensor* t : {&el, &er, &v})
      for (double x : t->grad().to_vector<double>()) EXPECT_EQ(x, 0.0) << name;
  }
}

class BipartiteGraphOpsOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(BipartiteGraphOpsOnDevice);

TEST_P(BipartiteGraphOpsOnDevice, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(43);
  for (const auto& [name, graph] : bipartite_graphs(rng))
    for (auto [H, F] :
         std::vector<std::pair<int64_t, int64_t>>{{2, 3}, {3, 4}}) {  // F = 4: the device's vectors
      const Graph g = graph.to(device());
      const int64_t Ns = g.num_src_nodes(), Nd = g.num_dst_nodes();
      const std::string shape = " H=" + std::to_string(H) + " F=" + std::to_string(F);
      for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
        const std::string tag = name + shape + " p=" + std::to_string(key.p);
        expect_gradients_match(
            "csr_softmax_aggregate " + tag,
            [&](const std::vector<Tensor>& in) { return ops::csr_softmax_aggregate(g, in[0], in[1], key); },
            {random_f64({g.num_edges(), H}, rng, -2, 2), random_f64({Ns, H, F}, rng, -2, 2)});
        expect_gradients_match("gat_attention_aggregate " + tag,
                               [&](const std::vector<Tensor>& in) {
                                 return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key);
                               },
                               {random_f64({Ns, H}, rng, -2, 2), random_f64({Nd, H}, rng, -2, 2),
                                random_f64({Ns, H, F}, rng, -2, 2)});
      }
      expect_gradients_match(
          "gat_edge_scores " + name + shape,
          [&](const std::vector<Tensor>& in) { return ops::gat_edge_scores(g, in[0], in[1], 0.2); },
          {random_f64({Ns, H}, rng), random_f64({Nd, H}, rng)});
      // xl (Ns, H, F), xr (Nd, H, F), att and the edge term, with dropout.
      expect_gradients_match(
          "gatv2_attention_aggregate " + name + shape,
          [&](const std::vector<Tensor>& in) { return gatv2(g, in, kDrop); },
          gatv2_inputs(g, H, F, true, rng, DType::f64, device()).list());
    }
}

TEST(BipartiteGraphOps, FusedEqualsTheUnfusedOpsBitForBit) {
  std::mt19937_64 rng(44);
  for (const auto& [name, g] : bipartite_graphs(rng))
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
      const int64_t Ns = g.num_src_nodes(), Nd = g.num_dst_nodes(), H = 3, F = 4;
      const Tensor el = random_tensor({Ns, H}, rng, -2, 2, DType::f32),
                   er = random_tensor({Nd, H}, rng, -2, 2, DType::f32);
      const Tensor v = random_tensor({Ns, H, F}, rng, -1, 1, DType::f32),
                   go = random_tensor({Nd, H, F}, rng, -1, 1, DType::f32);
      const GatRun want = run_gat(g, el, er, Tensor(), v, go, false, key),
                   got = run_gat(g, el, er, Tensor(), v, go, true, key);
      EXPECT_TRUE(bitwise_equal(got.out, want.out)) << name;
      EXPECT_TRUE(bitwise_equal(got.d_el, want.d_el)) << name;
      EXPECT_TRUE(bitwise_equal(got.d_er, want.d_er)) << name;
      EXPECT_TRUE(bitwise_equal(got.d_value, want.d_value)) << name;
    }
}

TEST(BipartiteGraphOps, RejectTensorsOfTheWrongSide) {
  // 3 sources, 5 destinations: el and node values have 3 rows, er 5.
  const Graph g = Graph::from_edges(3, 5, {0, 1, 2}, {4, 4, 0});
  const Tensor s = Tensor::zeros({3, 2}), el = Tensor::zeros({3, 2}), er = Tensor::zeros({5, 2});
  const Tensor v = Tensor::zeros({3, 2, 4});
  expect_error(
      [&] {
        ops::csr_softmax_aggregate(g, s, Tensor::zeros({5, 2, 4}));
      },
      {"csr_softmax_aggregate", "(5, 2, 4)", "Ns = 3"});
  expect_error(
      [&] {
        ops::gat_attention_aggregate(g, er, er, Tensor::zeros({5, 2, 4}), 0.2);
      },
      {"gat_attention_aggregate", "(5, 2)", "Ns = 3"});
  expect_error([&] { ops::gat_attention_aggregate(g, el, el, v, 0.2); },
               {"gat_attention_aggregate", "'er'", "(3, 2)"});
  expect_error([&] { ops::gat_edge_scores(g, er, er, 0.2); }, {"gat_edge_scores", "(5, 2)", "3 sources"});
  expect_error([&] { ops::gat_edge_scores(g, el, el, 0.2); }, {"gat_edge_scores", "'er'", "(3, 2)"});
  EXPECT_EQ(ops::gat_attention_aggregate(g, el, er, v, 0.2).shape(), (Shape{5, 2, 4}));
  EXPECT_EQ(ops::gat_edge_scores(g, el, er, 0.2).shape(), (Shape{3, 2}));
  // GATv2: xl (Ns, H, F) = (3, 2, 4), xr (Nd, H, F) = (5, 2, 4).
  const Tensor xl = Tensor::zeros({3, 2, 4}), xr = Tensor::zeros({5, 2, 4}), att = Tensor::zeros({2, 4});
  for (const char* op : {"gatv2_attention_aggregate", "gatv2_edge_scores"}) {
    auto run = [&](const Tensor& l, const Tensor& r) {
      return std::string(op) == "gatv2_edge_scores" ? ops::gatv2_edge_scores(g, l, r, att, 0.2)
                                                    : ops::gatv2_attention_aggregate(g, l, r, att, 0.2);
    };
    expect_error([&] { run(xr, xr); }, {op, "'xl'", "(5, 2, 4)", "Ns = 3 source nodes"});
    expect_error([&] { run(xl, xl); }, {op, "'xr'", "(3, 2, 4)", "Nd = 5 destination nodes"});
    expect_error([&] { run(xr, xl); }, {op, "'xl'", "(5, 2, 4)", "Ns = 3"});
  }
  EXPECT_EQ(ops::gatv2_attention_aggregate(g, xl, xr, att, 0.2).shape(), (Shape{5, 2, 4}));
  EXPECT_EQ(ops::gatv2_edge_scores(g, xl, xr, att, 0.2).shape(), (Shape{3, 2}));
}

// ---- head_dot ----------------------------------------------------------------------------

TEST(HeadDot, MatchesTheReference) {
  std::mt19937_64 rng(10);
  for (int64_t H : {1, 3})
    for (int64_t F : {1, 5}) {
      Tensor x = random_tensor({7, H, F}, rng), a = random_tensor({H, F}, rng);
      const auto o = ops::head_dot(x, a).to_vector<double>();
      const auto xv = x.to_vector<double>(), av = a.to_vector<double>();
      for (int64_t n = 0; n < 7; ++n)
        for (int64_t h = 0; h < H; ++h) {
          double want = 0;
          for (int64_t f = 0; f < F; ++f) want += xv[(n * H + h) * F + f] * av[h * F + f];
          EXPECT_NEAR(o[n * H + h], want, 1e-15);
        }
    }
}

// Heads of 8 features take the CPU kernels' vector paths (8 heads' dots at once, a head's 8
// features in one vector): each result has the bits of the scalar sum in feature order (and d a
// of its blocks of rows_per_block rows, summed in block order), for 8, 9 (a group and one head
// alone) and 16 heads, f32 and f64, with and without the value dropout of head_dot_pair_grad_x.
template <class T>
void expect_eight_feature_heads_exact(std::mt19937_64& rng) {
  const DType dt = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  const int64_t N = 70, F = 8;
  for (int64_t H : {8, 9, 16}) {
    const Tensor x = random_tensor({N, H, F}, rng, -1, 1, dt), a1 = random_tensor({H, F}, rng, -1, 1, dt),
                 a2 = random_tensor({H, F}, rng, -1, 1, dt), g1 = random_tensor({N, H}, rng, -1, 1, dt),
                 g2 = random_tensor({N, H}, rng, -1, 1, dt);
    const auto xv = x.to_vector<T>(), a1v = a1.to_vector<T>(), a2v = a2.to_vector<T>(),
               g1v = g1.to_vector<T>(), g2v = g2.to_vector<T>();
    auto dot = [&](const std::vector<T>& a, int64_t n, int64_t h) {
      T acc = 0;
      for (int64_t f = 0; f < F; ++f) acc += xv[(n * H + h) * F + f] * a[h * F + f];
      return acc;
    };
    Tensor el = Tensor::empty({N, H}, dt), er = Tensor::empty({N, H}, dt), one = Tensor::empty({N, H}, dt);
    KeepMask none;
    ops::kernels::head_dot_pair_dropout_forward(x, a1, a2, DropoutKey{}, 1.0, none, el, er, nullptr, nullptr);
    ops::kernels::head_dot_forward(x, a1, one);
    Tensor dx = Tensor::empty(x.shape(), dt), da = Tensor::empty({H, F}, dt);
    ops::kernels::head_dot_backward(x, a1, g1, &dx, &da);
    const int64_t rows = ops::head_dot_detail::rows_per_block(N);
    std::vector<T> want_da(static_cast<size_t>(H * F), T(0));
    for (int64_t b = 0; b * rows < N; ++b) {
      std::vector<T> partial(static_cast<size_t>(H * F), T(0));
      for (int64_t n = b * rows; n < std::min(N, (b + 1) * rows); ++n)
        for (int64_t c = 0; c < H * F; ++c) partial[c] += g1v[n * H + c / F] * xv[n * H * F + c];
      for (int64_t c = 0; c < H * F; ++c) want_da[c] += partial[c];
    }
    EXPECT_EQ(da.to_vector<T>(), want_da) << "d a, H=" << H;
    const auto elv = el.to_vector<T>(), erv = er.to_vector<T>(), onev = one.to_vector<T>(),
               dxv = dx.to_vector<T>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h) {
        ASSERT_EQ(elv[n * H + h], dot(a1v, n, h)) << "H=" << H << " n=" << n << " h=" << h;
        ASSERT_EQ(erv[n * H + h], dot(a2v, n, h)) << "H=" << H << " n=" << n << " h=" << h;
        ASSERT_EQ(onev[n * H + h], dot(a1v, n, h)) << "H=" << H << " n=" << n << " h=" << h;
        for (int64_t f = 0; f < F; ++f)
          ASSERT_EQ(dxv[(n * H + h) * F + f], g1v[n * H + h] * a1v[h * F + f]) << "H=" << H;
      }
    for (const DropoutKey& key : {DropoutKey{}, kValueDrop}) {
      const double scale = key.active() ? ops::dropout_keep_scale(key) : 1.0;
      const KeepMask kept = key.active() ? KeepMask(key, N * H * F) : KeepMask();
      Tensor gx = Tensor::empty(x.shape(), dt);
      ops::kernels::head_dot_pair_grad_x(x, key, scale, kept, a1, g1, a2, g2, gx);
      const auto gxv = gx.to_vector<T>();
      for (int64_t i = 0; i < N * H * F; ++i) {
        const int64_t r = i / F, h = r % H, f = i % F;
        const T base = key.active() ? DropoutKey::apply_kept(xv[i], kept[i], static_cast<T>(scale)) : xv[i];
        ASSERT_EQ(gxv[i], base + g1v[r] * a1v[h * F + f] + g2v[r] * a2v[h * F + f])
            << "H=" << H << " i=" << i;
      }
    }
  }
}

TEST(HeadDot, EightFeatureHeadsGiveTheBitsOfTheFeatureLoop) {
  std::mt19937_64 rng(11);
  expect_eight_feature_heads_exact<float>(rng);
  expect_eight_feature_heads_exact<double>(rng);
}

class HeadDotOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(HeadDotOnDevice);

TEST_P(HeadDotOnDevice, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(10);
  auto f = [](const std::vector<Tensor>& in) { return ops::head_dot(in[0], in[1]); };
  for (int64_t H : {1, 3})
    for (int64_t F : {1, 5})
      expect_gradients_match("head_dot H=" + std::to_string(H) + " F=" + std::to_string(F), f,
                             {random_f64({7, H, F}, rng), random_f64({H, F}, rng)});
  // Several row blocks in the reduction of d a. The op is linear in each input, so a large step
  // is exact and keeps the rounding of the 1200-term loss out of the slope.
  expect_gradients_match("head_dot N=600", f, {random_f64({600, 2, 3}, rng), random_f64({2, 3}, rng)}, 1e-6,
                         1e-2);
}

TEST(HeadDot, RunsAreBitwiseIdentical) {
  std::mt19937_64 rng(11);
  Tensor x = random_tensor({5000, 4, 16}, rng, -1, 1, DType::f32);
  Tensor a = random_tensor({4, 16}, rng, -1, 1, DType::f32);
  Tensor g = random_tensor({5000, 4}, rng, -1, 1, DType::f32);
  auto run = [&] {
    Tensor xr = x.detach().set_requires_grad(), ar = a.detach().set_requires_grad();
    ops::head_dot(xr, ar).backward(g);
    return std::vector<Tensor>{xr.grad(), ar.grad()};
  };
  auto r1 = run(), r2 = run();
  for (size_t k = 0; k < r1.size(); ++k) EXPECT_TRUE(bitwise_equal(r1[k], r2[k])) << "tensor " << k;
}

// ---- CUDA against the CPU ----------------------------------------------------------------

using CudaBipartiteGraphOps = CudaVsCpuTest;
using CudaCsrSoftmax = CudaVsCpuTest;
using CudaCsrSoftmaxAggregate = CudaVsCpuTest;
using CudaGatAttentionAggregate = CudaVsCpuTest;
using CudaGatEdgeScores = CudaVsCpuTest;
using CudaGatLinearAttention = CudaVsCpuTest;
using CudaGatOutputActivation = CudaVsCpuTest;
using CudaGatProjectedAttention = CudaVsCpuTest;
using CudaGatv2AttentionAggregate = CudaVsCpuTest;
using CudaHeadDot = CudaVsCpuTest;

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
    const AggregateResult ref = dtype == DType::f32 ? run_aggregate(g, s_.to(Device::cpu).to(DType::f64),
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

const std::vector<std::pair<int64_t, int64_t>> kHeadsFeatures = {{1, 1}, {8, 8}, {1, 64}, {4, 64}, {1, 256}};

}  // namespace

TEST_F(CudaCsrSoftmaxAggregate, MatchesCpuOnRandomGraphs) {
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

TEST_F(CudaCsrSoftmaxAggregate, MatchesCpuWithAHubOf100000Edges) {
  std::mt19937_64 rng(2);
  const Graph g = random_graph(120000, 200000, 100000, rng);
  ASSERT_EQ(g.max_in_degree(), 100000);
  ASSERT_GE(g.max_out_degree(), 90000);
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 8}, {1, 64}})
    for (const DropoutKey& key : {DropoutKey{}, kDrop})
      expect_aggregate_matches_cpu("hub graph", g, H, F, key, rng);
}

TEST_F(CudaCsrSoftmaxAggregate, DegenerateGraphs) {
  std::mt19937_64 rng(3);
  expect_aggregate_matches_cpu("one node", Graph::from_edges(1, {0}, {0}), 2, 4, DropoutKey{}, rng);
  expect_aggregate_matches_cpu("one node, no edge", Graph::from_edges(1, {}, {}), 2, 4, DropoutKey{}, rng);
  expect_aggregate_matches_cpu("no edges", Graph::from_edges(50, {}, {}), 1, 64, kDrop, rng);
  expect_aggregate_matches_cpu("mixed", mixed_graph(), 3, 5, kDrop, rng);
}

TEST_F(CudaCsrSoftmaxAggregate, DropoutMasksMatchCpu) {
  // One self loop per node and values of one: out[i,h] = keep(i*H + h) / (1 - p) exactly.
  const int32_t N = 10000;
  std::vector<int32_t> nodes(N);
  for (int32_t i = 0; i < N; ++i) nodes[i] = i;
  const Graph g = Graph::from_edges(N, nodes, nodes);
  const Tensor s = Tensor::zeros({N, 4}), v = Tensor::full({N, 4, 1}, 1.0);
  const Tensor cpu = ops::csr_softmax_aggregate(g, s, v, kDrop);
  const Tensor dev =
      ops::csr_softmax_aggregate(g.to(Device::cuda), s.to(Device::cuda), v.to(Device::cuda), kDrop);
  EXPECT_TRUE(bitwise_equal(dev, cpu));
}

TEST_F(CudaCsrSoftmaxAggregate, ExtremeScoresStayFinite) {
  std::mt19937_64 rng(5);
  const Graph g = random_graph(2000, 20000, 1000, rng);
  std::vector<float> sv(static_cast<size_t>(g.num_edges() * 2));
  for (size_t k = 0; k < sv.size(); ++k) sv[k] = (k % 3 == 0 ? -1e4f : 1e4f) + 0.25f * (k % 5);
  const Tensor s = Tensor::from_vector(sv, {g.num_edges(), 2});
  const Tensor v = random_tensor({g.num_nodes(), 2, 8}, rng, -1, 1, DType::f32);
  const Tensor go = random_tensor({g.num_nodes(), 2, 8}, rng, -1, 1, DType::f32);
  const AggregateResult got =
      run_aggregate(g.to(Device::cuda), s.to(Device::cuda), v.to(Device::cuda), go.to(Device::cuda), kDrop);
  const AggregateResult want = run_aggregate(g, s.to(DType::f64), v.to(DType::f64), go.to(DType::f64), kDrop);
  for (const Tensor* t : {&got.out, &got.grad_scores, &got.grad_value})
    for (float x : t->to_vector<float>()) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LE(rel_error(got.out, want.out), 1e-5);
  // The backward pass recomputes weights from lse, which f32 holds to ulp(1e4) ~ 1e-3.
  EXPECT_LE(rel_error(got.grad_value, want.grad_value), 2e-3);
  EXPECT_LE(rel_error(got.grad_scores, want.grad_scores), 5e-3);
}

TEST_F(CudaCsrSoftmaxAggregate, RunsAreBitwiseIdentical) {
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

TEST_F(CudaCsrSoftmaxAggregate, EachGradientAloneEqualsTheOneComputedWithTheOther) {
  // The transposed pass gathers G once for both gradients: asking for either alone must give
  // the same bits as asking for both, on the chunked sources of a hub too, and with the heads of
  // 256 features that take two tiles.
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
    const GatRun want =
        run_gat(g, rounded(el), rounded(er), rounded(term), rounded(v), rounded(go), true, key);
    auto dev = [&](const Tensor& t) { return t.defined() ? t.to(dtype).to(Device::cuda) : t; };
    const GatRun got = run_gat(gd, dev(el), dev(er), dev(term), dev(v), dev(go), true, key);
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

TEST_F(CudaGatAttentionAggregate, MatchesCpu) {
  std::mt19937_64 rng(21);
  const Graph g = random_graph(3000, 30000, 0, rng);
  // {1, 256} and {2, 33}: heads wider than one group of lanes (the unfused backward); {3, 5}: the
  // scalar path.
  for (auto [H, F] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 8}, {4, 64}, {1, 256}, {3, 5}, {2, 33}})
    for (const DropoutKey& key : {DropoutKey{}, kDrop})
      expect_gat_matches_cpu("random graph", g, H, F, key, rng);
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
    for (const DropoutKey& key : {DropoutKey{}, kDrop})
      expect_gat_matches_cpu("hub graph", hub, H, F, key, rng);
  expect_gat_matches_cpu("hub graph", hub, 8, 8, kDrop, rng, true);
  // Many rows cut into chunks, each way (Cora's shape: chunks of 8 edges, rows of many lengths).
  const Graph hubs = hubs_graph(2000, 8000, 5, 70, rng);
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {8, 8}})
    expect_gat_matches_cpu("hubs graph", hubs, H, F, kDrop, rng);
}

// The fused bias (GATConv's concatenated heads): out plus bias and every gradient, the bias's
// included, against the CPU in f64, through the fused backward ({8, 8} and, on 300,000 nodes,
// several rows a thread: d bias summed in head_rows_dot's pass; {3, 5}: summed after it) and the
// unfused one ({1, 256}). d node_value takes the positive sums' storage: no block of its own at
// the backward's peak, where one appears when er needs no gradient (no positive sums kept).
TEST_F(CudaGatAttentionAggregate, BiasMatchesCpuAndDValuesReuseThePositiveSums) {
  std::mt19937_64 rng(44);
  const Graph g = random_graph(3000, 30000, 0, rng), large = random_graph(300000, 600000, 0, rng);
  const Graph gd = g.to(Device::cuda);
  const int64_t N = g.num_nodes();
  for (auto [graph, H, F] : std::vector<std::tuple<const Graph*, int64_t, int64_t>>{
           {&g, 8, 8}, {&g, 3, 5}, {&g, 1, 256}, {&large, 8, 8}}) {
    const Graph& cpu_graph = *graph;
    const Graph cuda_graph = cpu_graph.to(Device::cuda);
    const int64_t rows = cpu_graph.num_nodes();
    const std::vector<Tensor> inputs =  // el, er, values, bias
        random_f32({{{rows, H}, 3}, {{rows, H}, 3}, {{rows, H, F}, 1}, {{H, F}, 1}}, rng);
    const Tensor go = random_tensor({rows, H, F}, rng, -1, 1, DType::f32);
    auto run = [&](const Graph& graph, DType dtype, Device device) {
      std::vector<Tensor> in;
      for (const Tensor& t : inputs) in.push_back(t.to(dtype).to(device).set_requires_grad());
      const Tensor out =
          ops::gat_attention_aggregate(graph, in[0], in[1], in[2], 0.2, kDrop, Tensor(), in[3]);
      out.backward(go.to(dtype).to(device));
      std::vector<Tensor> results{out.detach()};
      for (const Tensor& t : in) results.push_back(t.grad());
      return results;
    };
    const std::vector<Tensor> want = run(cpu_graph, DType::f64, Device::cpu),
                              got = run(cuda_graph, DType::f32, Device::cuda);
    const char* names[] = {"out", "d el", "d er", "d value", "d bias"};
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_LE(rel_error(got[k], want[k]), 1e-5)
          << "N=" << rows << " H=" << H << " F=" << F << ": " << names[k];
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
// hub's chunks, and without value dropout, where the rows hold wh itself); and runs bitwise
// identical. Its f64 gradients on the device: GatAttentionAggregateOnDevice.
TEST_F(CudaGatProjectedAttention, MatchesCpu) {
  std::mt19937_64 rng(45);
  const DropoutKey value_drop{0.4f, 43, 7}, no_drop{};
  // The hub graph has rows enough for 8 heads of 8 features to take lanes of 8 (with_gather_vec),
  // whose epilogue draws two blocks of output dropout decisions a lane.
  const int64_t hub_rows = std::max<int64_t>(20000, cuda::resident_threads() / 8 + 1);
  const Graph random = random_graph(3000, 30000, 0, rng),
              hub = random_graph(hub_rows, 2 * hub_rows, 5000, rng);
  for (const auto& [name, g, H, F, value_key] :
       std::vector<std::tuple<std::string, Graph, int64_t, int64_t, DropoutKey>>{
           {"random", random, 8, 8, value_drop},
           {"random", random, 3, 5, value_drop},
           {"random", random, 1, 256, value_drop},
           {"hub", hub, 8, 8, value_drop},
           {"random", random, 1, 8, value_drop},
           {"random", random, 2, 5, value_drop},
           {"hub", hub, 1, 7, value_drop},
           {"hub", hub, 1, 8, no_drop}}) {
    const int64_t N = g.num_nodes();
    const std::vector<Tensor> inputs =  // wh, att_src, att_dst, edge term, bias
        random_f32({{{N, H, F}, 1}, {{H, F}, 1}, {{H, F}, 1}, {{g.num_edges(), H}, 2}, {{H, F}, 1}}, rng);
    const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32);
    const Graph gd = g.to(Device::cuda);
    auto run = [&, key = value_key](const Graph& graph, DType dtype, Device device) {
      std::vector<Tensor> in;
      for (const Tensor& t : inputs) in.push_back(t.to(dtype).to(device).set_requires_grad());
      const Tensor out =
          ops::gat_projected_attention(graph, in[0], in[1], in[2], 0.2, kDrop, key, in[3], in[4]);
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
// identical. Its f64 gradients on the device (through both fused kernels: {4, 2, 8}):
// GatAttentionAggregateOnDevice.
TEST_F(CudaGatLinearAttention, MatchesCpu) {
  std::mt19937_64 rng(46);
  const DropoutKey value_drop{0.4f, 43, 7}, no_drop{};
  // The hub graph has rows enough for 8 heads of 8 features to take lanes of 8 (with_gather_vec),
  // whose epilogue draws two blocks of output dropout decisions a lane.
  const int64_t hub_rows = std::max<int64_t>(20000, cuda::resident_threads() / 8 + 1);
  const Graph random = random_graph(3000, 30000, 0, rng),
              hub = random_graph(hub_rows, 2 * hub_rows, 5000, rng);
  for (const auto& [name, g, K, H, F, value_key] :
       std::vector<std::tuple<std::string, Graph, int64_t, int64_t, int64_t, DropoutKey>>{
           {"random", random, 32, 8, 8, value_drop},
           {"hub", hub, 32, 8, 8, value_drop},
           {"random", random, 4, 1, 8, value_drop},
           {"random", random, 8, 16, 1, no_drop},
           {"random", random, 8, 32, 8, value_drop},
           {"random", random, 12, 2, 4, value_drop},
           {"random", random, 8, 3, 4, value_drop},
           {"random", random, 6, 8, 8, value_drop},
           {"random", random, 8, 3, 5, value_drop}})
    for (bool x_grad : {false, true}) {
      const int64_t N = g.num_nodes();
      const std::vector<Tensor> inputs = random_f32(  // x, weight, att_src, att_dst, edge term, bias
          {{{N, K}, 1}, {{K, H * F}, 1}, {{H, F}, 1}, {{H, F}, 1}, {{g.num_edges(), H}, 2}, {{H, F}, 1}},
          rng);
      const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32);
      const Graph gd = g.to(Device::cuda);
      auto run = [&, key = value_key, x_grad = x_grad](const Graph& graph, DType dtype, Device device) {
        std::vector<Tensor> in;
        for (size_t k = 0; k < inputs.size(); ++k) {
          in.push_back(inputs[k].to(dtype).to(device));
          if (k > 0 || x_grad) in.back().set_requires_grad();
        }
        const Tensor out =
            ops::gat_linear_attention(graph, in[0], in[1], in[2], in[3], 0.2, kDrop, key, in[4], in[5]);
        out.backward(go.to(dtype).to(device));
        std::vector<Tensor> results{out.detach()};
        for (const Tensor& t : in)
          if (t.requires_grad()) results.push_back(t.grad());
        return results;
      };
      const std::vector<Tensor> want = run(g, DType::f64, Device::cpu),
                                got = run(gd, DType::f32, Device::cuda),
                                again = run(gd, DType::f32, Device::cuda);
      ASSERT_EQ(want.size(), got.size());
      const std::vector<std::string> names =
          x_grad ? std::vector<std::string>{"out",       "d x",         "d weight", "d att_src",
                                            "d att_dst", "d edge term", "d bias"}
                 : std::vector<std::string>{"out",       "d weight",    "d att_src",
                                            "d att_dst", "d edge term", "d bias"};
      for (size_t k = 0; k < want.size(); ++k) {
        const std::string tag = name + " K=" + std::to_string(K) + " H=" + std::to_string(H) +
                                " F=" + std::to_string(F) +
                                (value_key.active() ? "" : " without value dropout") +
                                (x_grad ? " with d x" : "") + ": " + names[k];
        EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << tag;
        EXPECT_TRUE(bitwise_equal(got[k], again[k])) << tag;
      }
    }
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
// bitwise identical. The f64 gradients on the device: GatAttentionAggregateOnDevice.
TEST_F(CudaGatOutputActivation, MatchesCpu) {
  std::mt19937_64 rng(47);
  // The hub graph has rows enough for 8 heads of 8 features to take lanes of 8 (with_gather_vec),
  // whose epilogue draws two blocks of output dropout decisions a lane.
  const int64_t hub_rows = std::max<int64_t>(20000, cuda::resident_threads() / 8 + 1);
  const Graph random = random_graph(3000, 30000, 0, rng),
              hub = random_graph(hub_rows, 2 * hub_rows, 5000, rng);
  const DropoutKey out_drop{0.5f, 44, 7};
  for (const auto& [name, g, K, H, F] :
       std::vector<std::tuple<std::string, Graph, int64_t, int64_t, int64_t>>{{"random", random, 0, 8, 8},
                                                                              {"random", random, 0, 3, 5},
                                                                              {"random", random, 0, 1, 8},
                                                                              {"hub", hub, 0, 8, 8},
                                                                              {"random", random, 0, 1, 256},
                                                                              {"random", random, 32, 8, 8},
                                                                              {"hub", hub, 32, 8, 8}})
    for (const auto& [alpha, key] :
         std::vector<std::pair<double, DropoutKey>>{{1.0, out_drop}, {1.0, DropoutKey{}}, {0.7, out_drop}}) {
      const int64_t N = g.num_nodes();
      const bool linear = K > 0;  // gat_linear_attention of x (N, K) and weight (K, H F); else el, er, values
      std::vector<Tensor> inputs;
      if (linear)
        inputs = {random_tensor({N, K}, rng, -1, 1, DType::f32),
                  random_tensor({K, H * F}, rng, -0.5, 0.5, DType::f32),
                  random_tensor({H, F}, rng, -1, 1, DType::f32),
                  random_tensor({H, F}, rng, -1, 1, DType::f32)};
      else
        inputs = {random_tensor({N, H}, rng, -3, 3, DType::f32),
                  random_tensor({N, H}, rng, -3, 3, DType::f32),
                  random_tensor({N, H, F}, rng, -3, 3, DType::f32)};
      const Tensor term = random_tensor({g.num_edges(), H}, rng, -2, 2, DType::f32);
      if (linear) {  // el and er of gat_linear_attention: head_dot of x W (N, H, F) with att_src, att_dst
        const Tensor projected =
            ops::matmul(inputs[0].to(DType::f64), inputs[1].to(DType::f64)).view({N, H, F});
        inputs.push_back(term_off_the_kink(g, ops::head_dot(projected, inputs[2].to(DType::f64)),
                                           ops::head_dot(projected, inputs[3].to(DType::f64)), term));
      } else {
        inputs.push_back(term_off_the_kink(g, inputs[0], inputs[1], term));
      }
      inputs.push_back(random_tensor({H, F}, rng, -1, 1, DType::f32));
      const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32);
      const Graph gd = g.to(Device::cuda);
      auto op = [&, linear = linear](const Graph& graph, const std::vector<Tensor>& in,
                                     const ops::OutputActivation& act) {
        const Tensor& term = in[in.size() - 2];
        const Tensor& bias = in.back();
        return linear ? ops::gat_linear_attention(graph, in[0], in[1], in[2], in[3], 0.2, kDrop,
                                                  DropoutKey{0.4f, 43, 7}, term, bias, act)
                      : ops::gat_attention_aggregate(graph, in[0], in[1], in[2], 0.2, kDrop, term, bias, act);
      };
      const ops::OutputActivation activation{true, alpha, key};
      auto run = [&, alpha = alpha, key = key](const Graph& graph, DType dtype, Device device,
                                               bool composed) {
        std::vector<Tensor> in;
        for (const Tensor& t : inputs) in.push_back(t.to(dtype).to(device).set_requires_grad());
        const Tensor out =
            composed ? ops::elu_dropout(op(graph, in, {}), alpha, key) : op(graph, in, activation);
        out.backward(go.to(dtype).to(device));
        std::vector<Tensor> results{out.detach()};
        for (const Tensor& t : in) results.push_back(t.grad());
        return results;
      };
      const std::vector<Tensor> got = run(gd, DType::f32, Device::cuda, false),
                                again = run(gd, DType::f32, Device::cuda, false);
      const std::vector<Tensor> want =
          alpha == 1.0 ? run(g, DType::f64, Device::cpu, false) : run(gd, DType::f32, Device::cuda, true);
      const std::string tag = name + " K=" + std::to_string(K) + " H=" + std::to_string(H) +
                              " F=" + std::to_string(F) + " alpha " + std::to_string(alpha) +
                              " p=" + std::to_string(key.p);
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << tag << ": result " << k;
        EXPECT_TRUE(bitwise_equal(got[k], again[k])) << tag << ": result " << k;
      }
      std::vector<Tensor> in;
      for (const Tensor& t : inputs) in.push_back(t.to(Device::cuda));
      EXPECT_TRUE(bitwise_equal(got[0], ops::elu_dropout(op(gd, in, {}), alpha, key)))
          << tag << ": the epilogue";
    }
}

TEST_F(CudaGatAttentionAggregate, RunsAreBitwiseIdentical) {
  std::mt19937_64 rng(23);
  const Graph g = random_graph(20000, 200000, 5000, rng).to(Device::cuda);
  const int64_t N = g.num_nodes(), H = 8, F = 8;
  const Tensor el = random_tensor({N, H}, rng, -3, 3, DType::f32, Device::cuda);
  const Tensor er = random_tensor({N, H}, rng, -3, 3, DType::f32, Device::cuda);
  const Tensor v = random_tensor({N, H, F}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor go = random_tensor({N, H, F}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor term = random_tensor({g.num_edges(), H}, rng, -3, 3, DType::f32, Device::cuda);
  for (const Tensor& t : {term, Tensor()}) {
    const GatRun a = run_gat(g, el, er, t, v, go, true, kDrop), b = run_gat(g, el, er, t, v, go, true, kDrop);
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
  const ops::GatAttentionInputs in = gat_kernel_inputs(g, el, er, term, v, slope, key);
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

TEST_F(CudaGatAttentionAggregate, PositiveSumsAndDerMatchCpu) {
  // pos_out and pos_weight (chunk partials merged on the hub's row) and the d er that the backward
  // forms from them, against the CPU's definitions and its d er summed over the edges: f32 against
  // the CPU in f64 on the same values, f64 against f64; with and without dropout and edge term; a
  // negative slope, whose positive scores come from negative arguments. The training forward
  // (with the sums) gives the evaluation forward's out and lse bit for bit.
  std::mt19937_64 rng(24);
  const std::vector<std::pair<std::string, Graph>> graphs = {{"random", random_graph(3000, 30000, 0, rng)},
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
              const GatKernelsResult got =
                  run_gat_kernels(gd, dev(el), dev(er), dev(term), dev(v), dev(go), slope, key);
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
              // Without the positive sums.
              ops::GatAttentionForwardArgs forward{
                  gat_kernel_inputs(gd, dev(el), dev(er), dev(term), dev(v), slope, key)};
              forward.out = &out;
              forward.lse = &lse;
              ops::kernels::gat_attention_aggregate_forward(forward);
              EXPECT_TRUE(bitwise_equal(out, got.out)) << tag;
              EXPECT_TRUE(bitwise_equal(lse, got.lse)) << tag;
            }
          }
  }
}

TEST_F(CudaGatAttentionAggregate, DerWithoutThePositiveSumsIsAnError) {
  const Graph g = mixed_graph().to(Device::cuda);
  const int64_t N = g.num_nodes(), H = 2, F = 4;
  const Tensor el = Tensor::zeros({N, H}).to(Device::cuda), v = Tensor::zeros({N, H, F}).to(Device::cuda);
  Tensor out = Tensor::empty({N, H, F}, DType::f32, Device::cuda),
         lse = Tensor::empty({N, H}, DType::f32, Device::cuda);
  const ops::GatAttentionInputs in = gat_kernel_inputs(g, el, el, Tensor(), v, 0.2);
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
  expect_error([&] { ops::kernels::gat_attention_aggregate_backward(backward); },
               {"gat_attention_aggregate backward (d er on CUDA)", "'pos_out' is an undefined tensor"});
}

// ---- gatv2_attention_aggregate -----------------------------------------------------------

namespace {

// CUDA f32 against the CPU in f64 on the same (f32-rounded) values, and CUDA f64 against CPU f64.
void expect_gatv2_matches_cpu(const std::string& what, const Graph& g, int64_t H, int64_t F, bool edge_term,
                              const DropoutKey& key, std::mt19937_64& rng,
                              const std::vector<DType>& dtypes = {DType::f32, DType::f64}) {
  const Graph gd = g.to(Device::cuda);
  const Gatv2Inputs in = gatv2_inputs(g, H, F, edge_term, rng);
  const Tensor go = random_tensor({g.num_dst_nodes(), H, F}, rng);
  const char* names[] = {"out", "scores", "d xl", "d xr", "d att", "d edge_term"};
  for (DType dtype : dtypes) {
    auto on = [&](const Tensor& t, Device d) {
      return t.defined() ? t.to(dtype).to(d).to(d == Device::cpu ? DType::f64 : dtype) : t;
    };
    const Gatv2Inputs in_cpu{on(in.xl, Device::cpu), on(in.xr, Device::cpu), on(in.att, Device::cpu),
                             on(in.edge_term, Device::cpu)};
    const Gatv2Inputs in_cuda{on(in.xl, Device::cuda), on(in.xr, Device::cuda), on(in.att, Device::cuda),
                              on(in.edge_term, Device::cuda)};
    const std::vector<Tensor> want = run_gatv2(g, in_cpu, on(go, Device::cpu), key);
    const std::vector<Tensor> got = run_gatv2(gd, in_cuda, on(go, Device::cuda), key);
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-10;
    const std::string tag = what + " H=" + std::to_string(H) + " F=" + std::to_string(F) +
                            " edge_term=" + std::to_string(edge_term) + " p=" + std::to_string(key.p) + " " +
                            dtype_name(dtype);
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_LE(rel_error(got[k], want[k]), tol) << tag << ": " << names[k];
  }
}

}  // namespace

TEST_F(CudaGatv2AttentionAggregate, MatchesCpu) {
  std::mt19937_64 rng(51);
  const Graph g = random_graph(3000, 30000, 0, rng);
  // Heads of 1 to 8, F = 1, 3, 8, 64 (16 lanes of 4 floats; a whole warp of 2 doubles), 60 (15 of
  // 16 lanes of 4 floats, 30 of 32 lanes of 2 doubles: the others join the sums), 5 and 6 (scalars
  // in f32; 3 of 4 lanes of 2 doubles in f64); the edge term on and off. F = 128 in f32: a whole
  // warp of 4 floats per head (in f64 it is refused, below).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {3, 3},  {8, 8}, {1, 64}, {3, 64},
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

TEST_F(CudaGatv2AttentionAggregate, MatchesCpuWithAHubOf100000Edges) {
  // A row of 100,000 edges and long sources: rows and transposed rows cut into chunks. At 8 heads
  // of 8 f32 features its 120,000 nodes take GAT's lane of a whole head (more (node, head) lanes
  // than the device keeps resident), with and without the edge term.
  std::mt19937_64 rng(52);
  const Graph hub = random_graph(120000, 200000, 100000, rng);
  expect_gatv2_matches_cpu("hub graph", hub, 1, 4, true, kDrop, rng);
  expect_gatv2_matches_cpu("hub graph", hub, 8, 8, false, kDrop, rng);
  expect_gatv2_matches_cpu("hub graph", hub, 8, 8, true, DropoutKey{}, rng, {DType::f32});
}

TEST_F(CudaGatv2AttentionAggregate, RunsAndSingleGradientsAreBitwiseIdentical) {
  // 8 heads of 8 on 60,000 nodes: 480,000 (node, head) lanes, more than an H100 or H200 keeps
  // resident, so the kernels take GAT's lane of a whole head (with_gather_vec); a hub of 5,000
  // edges each way (chunks).
  std::mt19937_64 rng(54);
  const Graph g = random_graph(60000, 600000, 5000, rng).to(Device::cuda);
  const Gatv2Inputs in = gatv2_inputs(g, 8, 8, true, rng, DType::f32, Device::cuda);
  const Tensor go = random_tensor({g.num_nodes(), 8, 8}, rng, -1, 1, DType::f32, Device::cuda);
  const std::vector<Tensor> a = run_gatv2(g, in, go, kDrop), b = run_gatv2(g, in, go, kDrop);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(bitwise_equal(a[k], b[k])) << "tensor " << k;
  for (size_t k = 0; k < 4; ++k) {
    std::vector<bool> one(4, false);
    one[k] = true;
    EXPECT_TRUE(bitwise_equal(run_gatv2(g, in, go, kDrop, one)[k + 2], a[k + 2]))
        << "gradient " << k << " alone";
  }
}

TEST_F(CudaGatv2AttentionAggregate, BackwardWithoutTheSavedScoresGivesTheSameBits) {
  // Given no saved scores and signs, the CUDA backward computes them itself (the PyTorch operators'
  // path): every gradient is the same bits as with the forward's (a copy of the scores: the
  // backward spends them). Rows and sources cut into chunks, dropout and edge term on; heads of
  // 8 x 8 and 3 x 40 (two words of signs a head).
  std::mt19937_64 rng(55);
  const Graph g = hubs_graph(2000, 8000, 5, 70, rng).to(Device::cuda);
  const int64_t Nd = g.num_dst_nodes();
  for (const auto& [H, F] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {3, 40}}) {
    const Gatv2Inputs in = gatv2_inputs(g, H, F, true, rng, DType::f32, Device::cuda);
    const std::vector<Tensor> forward = gatv2_forward_outputs(g, in, kDrop, true);  // out, lse, scores, signs
    const Tensor go = random_tensor({Nd, H, F}, rng, -1, 1, DType::f32, Device::cuda);
    auto backward = [&](bool saved) {
      std::vector<Tensor> d{Tensor::empty(in.xl.shape(), DType::f32, Device::cuda),
                            Tensor::empty(in.xr.shape(), DType::f32, Device::cuda),
                            Tensor::empty(in.att.shape(), DType::f32, Device::cuda),
                            Tensor::empty(in.edge_term.shape(), DType::f32, Device::cuda)};
      ops::Gatv2AttentionBackwardArgs args{{{&g, in.xl, in.xr, in.att, 0.2, in.edge_term}, kDrop}};
      args.out = forward[0];
      args.lse = forward[1];
      args.scores = saved ? forward[2].clone() : Tensor();
      args.signs = saved ? forward[3] : Tensor();
      args.grad_out = go;
      args.grad_xl = &d[0];
      args.grad_xr = &d[1];
      args.grad_att = &d[2];
      args.grad_edge_term = &d[3];
      ops::kernels::gatv2_attention_aggregate_backward(args);
      return d;
    };
    const std::vector<Tensor> want = backward(true), got = backward(false);
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_TRUE(bitwise_equal(got[k], want[k])) << "H=" << H << " F=" << F << " gradient " << k;
  }
}

TEST_F(CudaGatv2AttentionAggregate, HeadsWiderThanAWarpAreRefused) {
  const Graph g = mixed_graph().to(Device::cuda);
  const int64_t N = g.num_nodes();
  // 33 vectors of 4 floats, 33 scalars, 33 vectors of 2 doubles.
  for (auto [F, dtype] :
       std::vector<std::pair<int64_t, DType>>{{132, DType::f32}, {33, DType::f32}, {66, DType::f64}}) {
    const Tensor x = Tensor::zeros({N, 1, F}, dtype, Device::cuda);
    expect_error(
        [&] {
          ops::gatv2_attention_aggregate(g, x, x, Tensor::zeros({1, F}, dtype, Device::cuda), 0.2);
        },
        {"gatv2_attention_aggregate (CUDA)", "F = " + std::to_string(F), "at most 32"});
  }
}

// Bipartite graphs, fewer sources than destinations and more, plain and with self loops for
// i < min(Ns, Nd): a destination row of 2,000 edges and a source of 2,000 out-edges (chunks on
// the device), destinations without in-edges, sources without out-edges.
TEST_F(CudaBipartiteGraphOps, MatchCpu) {
  std::mt19937_64 rng(24);
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{3000, 9000}, {9000, 3000}}) {
    const Graph plain = random_bipartite_graph(ns, nd, 30000, 2000, rng);
    ASSERT_GT(plain.max_in_degree(), plain.chunk_edges());
    ASSERT_GT(plain.max_out_degree(), plain.chunk_edges());
    for (const Graph& g : {plain, plain.with_self_loops()}) {
      const std::string name =
          std::to_string(ns) + " -> " + std::to_string(nd) + (g.count_self_loops() ? " looped" : "");
      for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 8}, {1, 64}, {2, 33}, {3, 5}}) {
        expect_aggregate_matches_cpu(name, g, H, F, kDrop, rng);
        expect_gat_matches_cpu(name, g, H, F, kDrop, rng);
        if (F <= 32 || F % 2 == 0)  // GATv2's heads fit a warp (F = 33 in f32 does not)
          expect_gatv2_matches_cpu(name, g, H, F, H != 8, kDrop, rng);
      }
      const Tensor s = random_tensor({g.num_edges(), 3}, rng, -4, 4, DType::f32);
      EXPECT_LE(rel_error(ops::csr_softmax(g.to(Device::cuda), s.to(Device::cuda)), ops::csr_softmax(g, s)),
                1e-5)
          << name;
      for (int64_t H :
           {3, 8}) {  // d el and d er of gat_edge_scores, a warp per node per head (3) or for all (8)
        const Tensor el = random_tensor({ns, H}, rng, -1, 1, DType::f32),
                     er = random_tensor({nd, H}, rng, -1, 1, DType::f32);
        const Tensor gs = random_tensor({g.num_edges(), H}, rng, -1, 1, DType::f32);
        auto run = [&](const Graph& graph, Device d) {
          Tensor l = el.to(d).detach().set_requires_grad(), r = er.to(d).detach().set_requires_grad();
          Tensor scores = ops::gat_edge_scores(graph, l, r, 0.2);
          scores.backward(gs.to(d));
          return std::vector<Tensor>{scores, l.grad(), r.grad()};
        };
        const auto want = run(g, Device::cpu), got = run(g.to(Device::cuda), Device::cuda);
        for (size_t k = 0; k < want.size(); ++k)
          EXPECT_LE(rel_error(got[k], want[k]), 1e-5) << name << " tensor " << k;
      }
    }
  }
}

TEST_F(CudaCsrSoftmax, MatchesCpu) {
  std::mt19937_64 rng(7);
  const Graph g = random_graph(3000, 30000, 2000, rng);
  const Tensor s = random_tensor({g.num_edges(), 3}, rng, -4, 4, DType::f32);
  EXPECT_LE(rel_error(ops::csr_softmax(g.to(Device::cuda), s.to(Device::cuda)), ops::csr_softmax(g, s)),
            1e-5);
}

TEST_F(CudaGatEdgeScores, MatchesCpuAndGradients) {
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
}

TEST_F(CudaHeadDot, MatchesCpuAndGradients) {
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
}
