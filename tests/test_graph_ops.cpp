// CPU tests of the graph ops: csr_softmax_aggregate, gat_attention_aggregate, csr_softmax,
// gat_edge_scores, gatv2_attention_aggregate, gatv2_edge_scores, head_dot.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/csr_softmax_aggregate.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/gat_edge_scores.h"
#include "gat/framework/ops/gatv2_attention_aggregate.h"
#include "gat/framework/ops/head_dot.h"
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

}  // namespace

// ---- csr_softmax_aggregate ---------------------------------------------------------------

TEST(CsrSoftmaxAggregate, MatchesDenseReference) {
  std::mt19937_64 rng(1);
  const Graph g = mixed_graph();
  for (int64_t H : {1, 3})
    for (int64_t F : {1, 5})
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
  // A gradient only on the empty rows reaches nothing.
  std::vector<double> grad(o.size(), 0.0);
  for (int64_t i : {0, 6, 7})
    for (int64_t k = 0; k < 6; ++k) grad[i * 6 + k] = 1.0;
  out.backward(Tensor::from_vector(grad, out.shape()));
  for (double x : s.grad().to_vector<double>()) EXPECT_EQ(x, 0.0);
  for (double x : v.grad().to_vector<double>()) EXPECT_EQ(x, 0.0);
}

TEST(CsrSoftmaxAggregate, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(3);
  const Graph g = mixed_graph();
  for (int64_t H : {1, 3})
    for (int64_t F : {1, 5})
      for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
        auto f = [&](const std::vector<Tensor>& in) {
          return ops::csr_softmax_aggregate(g, in[0], in[1], key);
        };
        expect_gradients_match("csr_softmax_aggregate H=" + std::to_string(H) + " F=" +
                                   std::to_string(F) + " p=" + std::to_string(key.p),
                               f,
                               {random_tensor({g.num_edges(), H}, rng, -2, 2),
                                random_tensor({g.num_nodes(), H, F}, rng)});
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

TEST(CsrSoftmaxAggregate, GradientsOfALongRow) {
  std::mt19937_64 rng(4);
  const Graph g = hub_graph(1000, 0, rng);
  ASSERT_EQ(g.in_degrees()[0], 1000);
  for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
    auto f = [&](const std::vector<Tensor>& in) {
      return ops::csr_softmax_aggregate(g, in[0], in[1], key);
    };
    expect_gradients_match("csr_softmax_aggregate, a row of 1000 edges", f,
                           {random_tensor({g.num_edges(), 1}, rng, -2, 2),
                            random_tensor({g.num_nodes(), 1, 1}, rng)});
  }
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
    out.backward(Tensor::full(out.shape(), 1.0, dtype));
    EXPECT_TRUE(all_finite(s.grad())) << dtype_name(dtype);
    EXPECT_TRUE(all_finite(v.grad())) << dtype_name(dtype);
    const auto want = reference_aggregate(g, s.to(DType::f64).to_vector<double>(),
                                          v.to(DType::f64).to_vector<double>(), H, 4, kDrop);
    EXPECT_LE(rel_error(out.to(DType::f64).to_vector<double>(), want),
              dtype == DType::f32 ? 1e-6 : 1e-13);
  }
  // Central differences with eps = 1e-4: at |s| = 1e4 a step of 1e-6 is only 1e-10 relative.
  auto f = [&](const std::vector<Tensor>& in) { return ops::csr_softmax_aggregate(g, in[0], in[1]); };
  expect_gradients_match("csr_softmax_aggregate, scores of +-1e4", f,
                         {Tensor::from_vector(sv, {g.num_edges(), H}),
                          random_tensor({g.num_nodes(), H, 2}, rng)},
                         1e-6, 1e-4);
}

TEST(CsrSoftmaxAggregate, RunsAreBitwiseIdentical) {
  std::mt19937_64 rng(6);
  const Graph g = random_graph(3000, 40000, 0, rng);
  auto run = [&] {
    Tensor s = random_tensor({g.num_edges(), 2}, rng, -2, 2, DType::f32).set_requires_grad();
    Tensor v = random_tensor({g.num_nodes(), 2, 8}, rng, -1, 1, DType::f32).set_requires_grad();
    Tensor out = ops::csr_softmax_aggregate(g, s, v, kDrop);
    out.backward(Tensor::full(out.shape(), 0.5, DType::f32));
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
      if (x == 0.0f) ++dropped;
      else EXPECT_FLOAT_EQ(x, 1.0f / (1.0f - p));
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
  expect_error([&] {
    ops::csr_softmax_aggregate(g, Tensor::zeros({E, 2}), Tensor::zeros({8, 2, 3}),
                               DropoutKey{0.5f, 0, 0, &device_base});
  }, {"recorded for a CUDA graph"});
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

TEST(GatEdgeScores, MatchesReferenceAndGradients) {
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
    auto f = [&](const std::vector<Tensor>& in) { return ops::gat_edge_scores(g, in[0], in[1], 0.2); };
    expect_gradients_match("gat_edge_scores H=" + std::to_string(H), f, {el, er});
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
  expect_error([&] { ops::gat_edge_scores(g, Tensor::zeros({8, 2}), Tensor::zeros({8, 2}), 0.2, Tensor::zeros({g.num_edges() + 1, 2})); },
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
        for (int64_t H : {1, 3})
          for (bool with_term : {false, true}) {
            const int64_t N = g.num_nodes(), F = 5;
            const Tensor el = random_tensor({N, H}, rng, -2, 2, dtype), er = random_tensor({N, H}, rng, -2, 2, dtype);
            const Tensor term = with_term ? random_tensor({g.num_edges(), H}, rng, -2, 2, dtype) : Tensor();
            const Tensor v = random_tensor({N, H, F}, rng, -1, 1, dtype), go = random_tensor({N, H, F}, rng, -1, 1, dtype);
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

TEST(GatAttentionAggregate, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(32);
  for (const auto& [name, g] : gat_graphs(24, rng))
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
      const int64_t N = g.num_nodes(), E = g.num_edges(), H = 2, F = 3;
      auto f = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key);
      };
      expect_gradients_match("gat_attention_aggregate " + name + " p=" + std::to_string(key.p), f,
                             {random_tensor({N, H}, rng, -2, 2), random_tensor({N, H}, rng, -2, 2),
                              random_tensor({N, H, F}, rng)});
      auto with_term = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, in[3]);
      };
      expect_gradients_match("gat_attention_aggregate with edge term " + name + " p=" + std::to_string(key.p),
                             with_term,
                             {random_tensor({N, H}, rng, -2, 2), random_tensor({N, H}, rng, -2, 2),
                              random_tensor({N, H, F}, rng), random_tensor({E, H}, rng, -2, 2)});
      auto with_bias = [&](const std::vector<Tensor>& in) {
        return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, Tensor(), in[3]);
      };
      expect_gradients_match("gat_attention_aggregate with bias " + name + " p=" + std::to_string(key.p),
                             with_bias,
                             {random_tensor({N, H}, rng, -2, 2), random_tensor({N, H}, rng, -2, 2),
                              random_tensor({N, H, F}, rng), random_tensor({H, F}, rng)});
    }
}

// The fused bias, (H, F) or flat (H F) as GATConv's own, is add_bias over the heads viewed (N, H*F):
// the same values bit for bit, and the same gradients (the CPU backward never reads out); a bias
// of another size is refused.
TEST(GatAttentionAggregate, BiasIsAddBiasOverTheConcatenatedHeads) {
  std::mt19937_64 rng(36);
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes(), H = 2, F = 3;
  const Tensor el0 = random_tensor({N, H}, rng, -2, 2, DType::f32), er0 = random_tensor({N, H}, rng, -2, 2, DType::f32);
  const Tensor v0 = random_tensor({N, H, F}, rng, -1, 1, DType::f32), b0 = random_tensor({H, F}, rng, -1, 1, DType::f32);
  const Tensor go = random_tensor({N, H * F}, rng, -1, 1, DType::f32);
  enum Bias { fused, fused_flat, separate };
  auto run = [&](Bias how) {
    std::vector<Tensor> in{el0.clone().set_requires_grad(), er0.clone().set_requires_grad(),
                           v0.clone().set_requires_grad(),
                           (how == fused_flat ? b0.view({H * F}) : b0).clone().set_requires_grad()};
    const Tensor out =
        how != separate
            ? ops::reshape(ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop, Tensor(), in[3]), {N, H * F})
            : ops::add_bias(ops::reshape(ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop), {N, H * F}),
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
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(bitwise_equal(got[k], reference[k])) << how << " result " << k;
  }
  expect_error([&] { ops::gat_attention_aggregate(g, el0, er0, v0, 0.2, {}, Tensor(), b0.view({F, H})); },
               {"gat_attention_aggregate", "'bias'"});
}

// The output activation (OutputActivation) of each GAT op is elu_dropout of the op's output
// without it: the same values and gradients bit for bit (the CPU backward takes elu_dropout's
// backward first, then the op's with its result), f32 and f64, with and without the output dropout, alpha 1 and
// 0.5, on every graph (rows without edges: ELU of the bias); alpha < 0 or a bad p is refused.
TEST(GatOutputActivation, IsEluDropoutOfTheOutput) {
  std::mt19937_64 rng(47);
  const DropoutKey out_drop{0.5f, 44, 7};
  for (const auto& [name, g] : gat_graphs(40, rng))
    for (DType dtype : {DType::f32, DType::f64})
      for (const auto& [alpha, key] : std::vector<std::pair<double, DropoutKey>>{{1.0, out_drop}, {0.5, DropoutKey{}}})
        for (int op = 0; op < 3; ++op) {  // gat_attention_aggregate, gat_projected_attention, gat_linear_attention
          const int64_t N = g.num_nodes(), K = 4, H = 2, F = 3;
          const std::string tag = name + " " + dtype_name(dtype) + " alpha " + std::to_string(alpha) + " p=" +
                                  std::to_string(key.p) + " op " + std::to_string(op);
          // el, er, values for op 0; wh, att_src, att_dst for op 1; x, weight, att_src, att_dst for op 2;
          // then the edge term and the bias.
          std::vector<Tensor> inputs;
          if (op == 0) inputs = {random_tensor({N, H}, rng, -2, 2, dtype), random_tensor({N, H}, rng, -2, 2, dtype),
                                 random_tensor({N, H, F}, rng, -2, 2, dtype)};
          if (op == 1) inputs = {random_tensor({N, H, F}, rng, -2, 2, dtype), random_tensor({H, F}, rng, -1, 1, dtype),
                                 random_tensor({H, F}, rng, -1, 1, dtype)};
          if (op == 2) inputs = {random_tensor({N, K}, rng, -2, 2, dtype), random_tensor({K, H * F}, rng, -1, 1, dtype),
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
            Tensor out = op == 0   ? ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop, term, bias, none)
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
  const Tensor el = random_tensor({N, H}, rng), er = random_tensor({N, H}, rng), v = random_tensor({N, H, F}, rng);
  expect_error([&] { ops::gat_attention_aggregate(g, el, er, v, 0.2, {}, Tensor(), Tensor(), {true, -1.0, {}}); },
               {"gat_attention_aggregate", "alpha -1", "negative"});
  expect_error([&] { ops::gat_attention_aggregate(g, el, er, v, 0.2, {}, Tensor(), Tensor(), {true, 1.0, {1.5f, 1, 1}}); },
               {"gat_attention_aggregate", "1.5"});
}

// f64 gradients of the three GAT ops through the output activation (with its dropout, bias and
// edge term) against central differences.
TEST(GatOutputActivation, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(48);
  const ops::OutputActivation activation{true, 1.0, DropoutKey{0.5f, 44, 7}};
  for (const auto& [name, g] : gat_graphs(24, rng)) {
    const int64_t N = g.num_nodes(), E = g.num_edges(), K = 3, H = 2, F = 3;
    auto aggregate = [&](const std::vector<Tensor>& in) {
      return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop, in[3], in[4], activation);
    };
    expect_gradients_match("gat_attention_aggregate with activation " + name, aggregate,
                           {random_tensor({N, H}, rng, -2, 2), random_tensor({N, H}, rng, -2, 2),
                            random_tensor({N, H, F}, rng, -2, 2), random_tensor({E, H}, rng, -2, 2),
                            random_tensor({H, F}, rng)});
    auto projected = [&](const std::vector<Tensor>& in) {
      return ops::gat_projected_attention(g, in[0], in[1], in[2], 0.2, kDrop, kValueDrop, in[3], in[4], activation);
    };
    expect_gradients_match("gat_projected_attention with activation " + name, projected,
                           {random_tensor({N, H, F}, rng, -2, 2), random_tensor({H, F}, rng), random_tensor({H, F}, rng),
                            random_tensor({E, H}, rng, -2, 2), random_tensor({H, F}, rng)});
    auto linear = [&](const std::vector<Tensor>& in) {
      return ops::gat_linear_attention(g, in[0], in[1], in[2], in[3], 0.2, kDrop, kValueDrop, in[4], in[5], activation);
    };
    expect_gradients_match("gat_linear_attention with activation " + name, linear,
                           {random_tensor({N, K}, rng, -2, 2), random_tensor({K, H * F}, rng), random_tensor({H, F}, rng),
                            random_tensor({H, F}, rng), random_tensor({E, H}, rng, -2, 2), random_tensor({H, F}, rng)});
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
          const std::string tag = name + " attention p=" + std::to_string(attn.p) + " value p=" +
                                  std::to_string(value.p) + (extras ? " edge term, bias" : "");
          const std::vector<Tensor> inputs{random_tensor({N, H, F}, rng), random_tensor({H, F}, rng),
                                           random_tensor({H, F}, rng),
                                           extras ? random_tensor({g.num_edges(), H}, rng, -2, 2) : Tensor(),
                                           extras ? random_tensor({H, F}, rng) : Tensor()};
          const Tensor go = random_tensor({N, H, F}, rng);
          auto run = [&](bool fused) {
            std::vector<Tensor> in;  // without the extras att_dst needs no gradient (d att_src alone)
            for (size_t k = 0; k < inputs.size(); ++k)
              in.push_back(!inputs[k].defined()       ? inputs[k]
                           : k == 2 && !extras ? inputs[k].clone()
                                               : inputs[k].clone().set_requires_grad());
            const Tensor out =
                fused ? ops::gat_projected_attention(g, in[0], in[1], in[2], 0.2, attn, value, in[3], in[4])
                      : ops::gat_attention_aggregate(g, ops::head_dot(in[0], in[1]), ops::head_dot(in[0], in[2]),
                                                     ops::dropout(in[0], value), 0.2, attn, in[3], in[4]);
            out.backward(go);
            std::vector<Tensor> results{out.detach()};
            for (const Tensor& t : in)
              if (t.defined() && t.requires_grad()) results.push_back(t.grad());
            return results;
          };
          const std::vector<Tensor> fused = run(true), composed = run(false);
          EXPECT_TRUE(bitwise_equal(fused[0], composed[0])) << tag << ": out";
          for (size_t k = 1; k < fused.size(); ++k) EXPECT_LE(rel_error(fused[k], composed[k]), 1e-14) << tag << ": gradient " << k;
        }
}

TEST(GatProjectedAttention, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(38);
  for (const auto& [name, g] : gat_graphs(24, rng)) {
    const int64_t N = g.num_nodes(), E = g.num_edges(), H = 2, F = 3;
    auto f = [&](const std::vector<Tensor>& in) {
      return ops::gat_projected_attention(g, in[0], in[1], in[2], 0.2, kDrop,
                                          kValueDrop, in[3], in[4]);
    };
    expect_gradients_match("gat_projected_attention " + name, f,
                           {random_tensor({N, H, F}, rng), random_tensor({H, F}, rng), random_tensor({H, F}, rng),
                            random_tensor({E, H}, rng, -2, 2), random_tensor({H, F}, rng)});
  }
}

TEST(GatProjectedAttention, RejectsMismatchedInputs) {
  std::mt19937_64 rng(39);
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes();
  const Tensor wh = random_tensor({N, 2, 3}, rng), a = random_tensor({2, 3}, rng);
  expect_error([&] { ops::gat_projected_attention(g, random_tensor({N + 1, 2, 3}, rng), a, a, 0.2); },
               {"gat_projected_attention", "'wh'", "a row per node"});
  expect_error([&] { ops::gat_projected_attention(g, wh, random_tensor({3, 2}, rng), a, 0.2); },
               {"gat_projected_attention", "'att_src'"});
  expect_error([&] { ops::gat_projected_attention(g, wh, a, a.to(DType::f32), 0.2); },
               {"gat_projected_attention", "'att_dst'"});
  expect_error([&] { ops::gat_projected_attention(g, random_tensor({N, 6}, rng), a, a, 0.2); },
               {"gat_projected_attention", "'wh'"});
  expect_error([&] { ops::gat_projected_attention(g, wh, a, a, 0.2, {}, {}, Tensor(), random_tensor({7}, rng)); },
               {"gat_projected_attention", "'bias'"});
  expect_error([&] { ops::gat_projected_attention(g, wh, a, a, 0.2, {}, {}, random_tensor({g.num_edges() + 1, 2}, rng)); },
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
          const std::string tag = name + " attention p=" + std::to_string(attn.p) + " value p=" +
                                  std::to_string(value.p) + (extras ? " edge term, bias, d x" : "");
          const std::vector<Tensor> inputs{random_tensor({N, K}, rng), random_tensor({K, H * F}, rng),
                                           random_tensor({H, F}, rng), random_tensor({H, F}, rng),
                                           extras ? random_tensor({g.num_edges(), H}, rng, -2, 2) : Tensor(),
                                           extras ? random_tensor({H, F}, rng) : Tensor()};
          const Tensor go = random_tensor({N, H, F}, rng);
          auto run = [&](bool linear) {
            std::vector<Tensor> in;  // x needs a gradient with the extras only
            for (size_t k = 0; k < inputs.size(); ++k)
              in.push_back(!inputs[k].defined()     ? inputs[k]
                           : k == 0 && !extras ? inputs[k].clone()
                                               : inputs[k].clone().set_requires_grad());
            const Tensor out =
                linear ? ops::gat_linear_attention(g, in[0], in[1], in[2], in[3], 0.2, attn, value, in[4], in[5])
                       : ops::gat_projected_attention(g, ops::reshape(ops::matmul(in[0], in[1]), {N, H, F}), in[2],
                                                      in[3], 0.2, attn, value, in[4], in[5]);
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

TEST(GatLinearAttention, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(41);
  for (const auto& [name, g] : gat_graphs(24, rng)) {
    const int64_t N = g.num_nodes(), E = g.num_edges(), K = 3, H = 2, F = 3;
    auto f = [&](const std::vector<Tensor>& in) {
      return ops::gat_linear_attention(g, in[0], in[1], in[2], in[3], 0.2, kDrop, kValueDrop, in[4], in[5]);
    };
    expect_gradients_match("gat_linear_attention " + name, f,
                           {random_tensor({N, K}, rng), random_tensor({K, H * F}, rng), random_tensor({H, F}, rng),
                            random_tensor({H, F}, rng), random_tensor({E, H}, rng, -2, 2), random_tensor({H, F}, rng)});
  }
}

TEST(GatLinearAttention, RejectsMismatchedInputs) {
  std::mt19937_64 rng(42);
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes();
  const Tensor x = random_tensor({N, 4}, rng), w = random_tensor({4, 6}, rng), a = random_tensor({2, 3}, rng);
  expect_error([&] { ops::gat_linear_attention(g, random_tensor({N + 1, 4}, rng), w, a, a, 0.2); },
               {"gat_linear_attention", "'x'", "a row per node"});
  expect_error([&] { ops::gat_linear_attention(g, random_tensor({N, 4, 1}, rng), w, a, a, 0.2); },
               {"gat_linear_attention", "'x'"});
  expect_error([&] { ops::gat_linear_attention(g, x, random_tensor({5, 6}, rng), a, a, 0.2); },
               {"gat_linear_attention", "'weight'", "(K, H F) = (4, 6)"});
  expect_error([&] { ops::gat_linear_attention(g, x, random_tensor({4, 8}, rng), a, a, 0.2); },
               {"gat_linear_attention", "'weight'"});
  expect_error([&] { ops::gat_linear_attention(g, x, w.to(DType::f32), a, a, 0.2); },
               {"gat_linear_attention", "'weight'"});
  expect_error([&] { ops::gat_linear_attention(g, x, w, a, random_tensor({3, 2}, rng), 0.2); },
               {"gat_linear_attention", "'att_dst'"});
  expect_error([&] { ops::gat_linear_attention(g, x, w, a, a, 0.2, {}, {}, Tensor(), random_tensor({7}, rng)); },
               {"gat_linear_attention", "'bias'"});
  expect_error([&] { ops::gat_linear_attention(g, x, w, a, a, 0.2, {}, DropoutKey{1.5f, 1, 1}); },
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
          const std::string tag = name + " slope " + std::to_string(slope) + " p=" +
                                  std::to_string(key.p) + (with_term ? " edge term" : "");
          Tensor out = Tensor::empty({N, H, F}, DType::f64), lse = Tensor::empty({N, H}, DType::f64);
          Tensor pos_out = Tensor::empty({N, H, F}, DType::f64), pos_weight = Tensor::empty({N, H}, DType::f64);
          ops::GatAttentionInputs in;
          in.graph = &g;
          in.el = el;
          in.er = er;
          in.edge_term = term;
          in.node_value = v;
          in.negative_slope = slope;
          in.attn_dropout = key;
          ops::GatAttentionForwardArgs forward{in};
          forward.out = &out;
          forward.lse = &lse;
          forward.pos_out = &pos_out;
          forward.pos_weight = &pos_weight;
          ops::kernels::gat_attention_aggregate_forward(forward);
          Tensor out_alone = Tensor::empty({N, H, F}, DType::f64), lse_alone = Tensor::empty({N, H}, DType::f64);
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
            for (int64_t f = 0; f < F; ++f) D += G[t * F + f] * o[t * F + f], Gp += G[t * F + f] * po[t * F + f];
            identity[t] = (1 - slope) * (Gp - D * pw[t]);
          }
          expect_close(der, Tensor::from_vector(identity, {N, H}), tag, 1e-12);
        }
}

TEST(GatAttentionAggregate, RejectsMismatchedInputs) {
  const Graph g = mixed_graph();
  const int64_t N = g.num_nodes();
  expect_error([&] { ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 3}), Tensor::zeros({N, 2, 4}), 0.2); },
               {"gat_attention_aggregate", "(8, 3)"});
  expect_error([&] { ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}), Tensor::zeros({N, 3, 4}), 0.2); },
               {"gat_attention_aggregate", "(8, 3, 4)", "Ns = 8"});
  expect_error([&] { ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}), Tensor::zeros({N, 2, 4}), 0.2, {}, Tensor::zeros({g.num_edges(), 3})); },
               {"gat_attention_aggregate", "edge_term", "(" + std::to_string(g.num_edges()) + ", 3)"});
  expect_error([&] { ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}), Tensor::zeros({N, 2, 4}), 0.2, {}, Tensor::zeros({g.num_edges(), 2}, DType::f64)); },
               {"gat_attention_aggregate", "edge_term"});
  expect_error([&] { ops::gat_attention_aggregate(g, Tensor::zeros({N, 2}), Tensor::zeros({N, 2}), Tensor::zeros({N, 2, 4}), NAN); },
               {"gat_attention_aggregate", "negative_slope"});
  // The kernels' positive sums: both or neither, of out's and lse's shapes.
  Tensor out = Tensor::empty({N, 2, 4}), lse = Tensor::empty({N, 2}), pos_out = Tensor::empty({N, 2, 4});
  Tensor short_weight = Tensor::empty({N - 1, 2});
  ops::GatAttentionForwardArgs forward;
  forward.graph = &g;
  forward.el = Tensor::zeros({N, 2});
  forward.er = Tensor::zeros({N, 2});
  forward.node_value = Tensor::zeros({N, 2, 4});
  forward.negative_slope = 0.2;
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
    return edge_term.defined() ? std::vector<Tensor>{xl, xr, att, edge_term} : std::vector<Tensor>{xl, xr, att};
  }
};
Gatv2Inputs gatv2_inputs(const Graph& g, int64_t H, int64_t F, bool edge_term, std::mt19937_64& rng,
                         DType dtype = DType::f64) {
  return {random_tensor({g.num_src_nodes(), H, F}, rng, -1, 1, dtype),
          random_tensor({g.num_dst_nodes(), H, F}, rng, -1, 1, dtype),
          random_tensor({H, F}, rng, -1, 1, dtype),
          edge_term ? random_tensor({g.num_edges(), H, F}, rng, -1, 1, dtype) : Tensor()};
}

// The scores of the dense reference: s[e,h] = sum_f att[h,f] LeakyReLU(xl[j] + xr[i] + et[e]),
// with x[e,h,f] materialised as an explicit (E, H, F) array (fine in a test, what the op avoids).
std::vector<double> reference_gatv2_scores(const Graph& g, const Gatv2Inputs& in, double slope) {
  const int64_t E = g.num_edges(), H = in.xl.size(1), F = in.xl.size(2);
  const std::vector<int32_t> srcs = g.sources(), dsts = g.destinations();
  const std::vector<double> xl = in.xl.to_vector<double>(), xr = in.xr.to_vector<double>(),
                            att = in.att.to_vector<double>();
  const std::vector<double> et = in.edge_term.defined() ? in.edge_term.to_vector<double>()
                                                        : std::vector<double>(E * H * F, 0.0);
  std::vector<double> x(static_cast<size_t>(E * H * F));  // (E, H, F)
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t f = 0; f < F; ++f)
        x[(e * H + h) * F + f] = xl[(srcs[e] * H + h) * F + f] + xr[(dsts[e] * H + h) * F + f] +
                                 et[(e * H + h) * F + f];
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
            const Tensor out = ops::gatv2_attention_aggregate(g, in.xl, in.xr, in.att, 0.2, key, in.edge_term);
            const std::vector<double> scores = reference_gatv2_scores(g, in, 0.2);
            EXPECT_LE(rel_error(out.to_vector<double>(),
                                reference_aggregate(g, scores, in.xl.to_vector<double>(), H, F, key)),
                      1e-13) << tag;
            EXPECT_LE(rel_error(ops::gatv2_edge_scores(g, in.xl, in.xr, in.att, 0.2, in.edge_term).to_vector<double>(),
                                scores),
                      1e-14) << tag << " scores";
          }
}

TEST(Gatv2AttentionAggregate, GradientsMatchFiniteDifferences) {
  // d xl (value and score paths), d xr, d att and d edge_term, on every graph shape, without
  // dropout and edge term, and with both.
  std::mt19937_64 rng(42);
  for (const auto& [name, g] : gat_graphs(16, rng))
    for (const auto& [key, edge_term] : {std::pair{DropoutKey{}, false}, std::pair{kDrop, true}}) {
        auto f = [&](const std::vector<Tensor>& in) {
          return ops::gatv2_attention_aggregate(g, in[0], in[1], in[2], 0.2, key,
                                                in.size() > 3 ? in[3] : Tensor());
        };
        expect_gradients_match("gatv2_attention_aggregate " + name + " p=" + std::to_string(key.p) +
                                   " edge_term=" + std::to_string(edge_term),
                               f, gatv2_inputs(g, 2, 3, edge_term, rng).list());
    }
}

namespace {

// Output and every gradient of the GATv2 op for one upstream gradient; `want` picks the inputs
// that require grad (the others' gradients stay undefined).
std::vector<Tensor> run_gatv2(const Graph& g, const Gatv2Inputs& given, const Tensor& grad_out,
                              const DropoutKey& key, std::vector<bool> want = {true, true, true, true}) {
  std::vector<Tensor> in = given.list();
  for (size_t k = 0; k < in.size(); ++k) {
    in[k] = in[k].detach();
    if (want[k]) in[k].set_requires_grad();
  }
  std::vector<Tensor> result{ops::gatv2_attention_aggregate(g, in[0], in[1], in[2], 0.2, key,
                                                            in.size() > 3 ? in[3] : Tensor())};
  result[0].backward(grad_out);
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
    EXPECT_TRUE(bitwise_equal(run_gatv2(g, in, go, kDrop, one)[k + 1], want[k + 1])) << "gradient " << k << " alone";
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
      EXPECT_TRUE(bitwise_equal(ops::gatv2_attention_aggregate(g, in.xl, in.xr, in.att, 0.2, kDrop, in.edge_term),
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
  const std::vector<Tensor> e = run_gatv2(g, empty, Tensor::zeros({8, 2, 0}, DType::f64), {}, {true, true, true});
  EXPECT_EQ(e[0].shape(), Shape({8, 2, 0}));
  EXPECT_EQ(e[3].shape(), Shape({2, 0}));
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
      EXPECT_LE(rel_error(out.to_vector<double>(), reference_aggregate(g, scores, in.xl.to_vector<double>(), H, F, kDrop)),
                1e-13)
          << name << " gatv2 edge_term=" << edge_term;
      EXPECT_LE(rel_error(ops::gatv2_edge_scores(g, in.xl, in.xr, in.att, 0.2, in.edge_term).to_vector<double>(), scores),
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
    Tensor el = random_tensor({Ns, H}, rng).set_requires_grad(), er = random_tensor({Nd, H}, rng).set_requires_grad();
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
        grad[i * H * F + k] = 1.0;
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

TEST(BipartiteGraphOps, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(43);
  for (const auto& [name, g] : bipartite_graphs(rng)) {
    const int64_t Ns = g.num_src_nodes(), Nd = g.num_dst_nodes(), H = 2, F = 3;
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
      const std::string tag = name + " p=" + std::to_string(key.p);
      expect_gradients_match("csr_softmax_aggregate " + tag,
                             [&](const std::vector<Tensor>& in) { return ops::csr_softmax_aggregate(g, in[0], in[1], key); },
                             {random_tensor({g.num_edges(), H}, rng, -2, 2), random_tensor({Ns, H, F}, rng)});
      expect_gradients_match("gat_attention_aggregate " + tag,
                             [&](const std::vector<Tensor>& in) {
                               return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key);
                             },
                             {random_tensor({Ns, H}, rng, -2, 2), random_tensor({Nd, H}, rng, -2, 2),
                              random_tensor({Ns, H, F}, rng)});
    }
    expect_gradients_match("gat_edge_scores " + name,
                           [&](const std::vector<Tensor>& in) { return ops::gat_edge_scores(g, in[0], in[1], 0.2); },
                           {random_tensor({Ns, H}, rng), random_tensor({Nd, H}, rng)});
    // xl (Ns, H, F), xr (Nd, H, F), att and the edge term, with dropout.
    expect_gradients_match("gatv2_attention_aggregate " + name,
                           [&](const std::vector<Tensor>& in) {
                             return ops::gatv2_attention_aggregate(g, in[0], in[1], in[2], 0.2, kDrop, in[3]);
                           },
                           gatv2_inputs(g, H, F, true, rng).list());
  }
}

TEST(BipartiteGraphOps, FusedEqualsTheUnfusedOpsBitForBit) {
  std::mt19937_64 rng(44);
  for (const auto& [name, g] : bipartite_graphs(rng))
    for (const DropoutKey& key : {DropoutKey{}, kDrop}) {
      const int64_t Ns = g.num_src_nodes(), Nd = g.num_dst_nodes(), H = 3, F = 4;
      const Tensor el = random_tensor({Ns, H}, rng, -2, 2, DType::f32), er = random_tensor({Nd, H}, rng, -2, 2, DType::f32);
      const Tensor v = random_tensor({Ns, H, F}, rng, -1, 1, DType::f32), go = random_tensor({Nd, H, F}, rng, -1, 1, DType::f32);
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
  expect_error([&] { ops::csr_softmax_aggregate(g, s, Tensor::zeros({5, 2, 4})); },
               {"csr_softmax_aggregate", "(5, 2, 4)", "Ns = 3"});
  expect_error([&] { ops::gat_attention_aggregate(g, er, er, Tensor::zeros({5, 2, 4}), 0.2); },
               {"gat_attention_aggregate", "(5, 2)", "Ns = 3"});
  expect_error([&] { ops::gat_attention_aggregate(g, el, el, v, 0.2); }, {"gat_attention_aggregate", "'er'", "(3, 2)"});
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

TEST(HeadDot, MatchesReferenceAndGradients) {
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
      auto f = [](const std::vector<Tensor>& in) { return ops::head_dot(in[0], in[1]); };
      expect_gradients_match("head_dot H=" + std::to_string(H) + " F=" + std::to_string(F), f, {x, a});
    }
  // Several row blocks in the reduction of d a. The op is linear in each input, so a large step
  // is exact and keeps the rounding of the 1200-term loss out of the slope.
  auto f = [](const std::vector<Tensor>& in) { return ops::head_dot(in[0], in[1]); };
  expect_gradients_match("head_dot N=600", f, {random_tensor({600, 2, 3}, rng), random_tensor({2, 3}, rng)},
                         1e-6, 1e-2);
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

