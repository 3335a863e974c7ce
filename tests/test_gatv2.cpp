// GATv2Conv and the GAT model with GATv2Conv layers: forward against a naive reference (PyG's
// GATv2Conv written out with loops), each option's effect, gradient checks with respect to the
// input and every parameter over option sets, attention weights, errors, parameter names and
// initialisation as PyG's, edge features (gradients through edge_attr and lin_edge, their
// errors), bipartite input (x_src, x_dst: the reference, gradients with edge features, errors),
// and the model's layer kind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/init.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/layers/gatv2_conv.h"
#include "gat/models/gat.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

namespace {

GATv2ConvOptions v2_options(int64_t in, int64_t out, int64_t heads, bool concat, bool share_weights,
                            bool residual, double dropout = 0.0) {
  GATv2ConvOptions o =
      attention_options<GATv2ConvOptions>(in, out, heads, concat, residual, dropout, DType::f64);
  o.share_weights = share_weights;
  return o;
}

// x W + b of a Linear, in double.
std::vector<double> affine(const std::vector<double>& x, int64_t N, const Linear& lin) {
  return reference_affine(x, N, lin.weight.to_vector<double>(), lin.out_features(),
                          lin.bias.defined() ? lin.bias.to_vector<double>() : std::vector<double>{});
}

// PyG's GATv2Conv with plain loops over an edge list (no dropout), in double, for sources x_src
// (Ns, in) and destinations x_dst (Nd, dst in): with add_self_loops the edges without self loops,
// then (i, i) for i < min(Ns, Nd): out (Nd, C).
std::vector<double> reference_gatv2_conv(const GATv2Conv& conv, const std::vector<double>& x_src, int64_t Ns,
                                         const std::vector<double>& x_dst, int64_t Nd,
                                         const std::vector<int32_t>& src, const std::vector<int32_t>& dst) {
  const GATv2ConvOptions& o = conv.options();
  const int64_t H = o.heads, F = o.out_channels, HF = H * F;
  const std::vector<double> xl = affine(x_src, Ns, *conv.lin_l), xr = affine(x_dst, Nd, *conv.lin_r);
  const std::vector<double> att = conv.att.to_vector<double>();
  auto score = [&](int32_t j, int32_t i, int64_t h) {  // att . LeakyReLU(xl_j + xr_i)
    double v = 0;
    for (int64_t f = 0; f < F; ++f) {
      const double t = xl[j * HF + h * F + f] + xr[i * HF + h * F + f];
      v += att[h * F + f] * (t > 0 ? t : o.negative_slope * t);
    }
    return v;
  };
  return reference_attention_layer(
      src, dst, Nd, o.add_self_loops, H, F, score, xl, o.concat,
      conv.res ? affine(x_dst, Nd, *conv.res) : std::vector<double>{},
      conv.bias.defined() ? conv.bias.to_vector<double>() : std::vector<double>{}, Ns);
}

// The parameter slots of a GATv2Conv (lin_r's only when it is its own), for gradient checks.
std::vector<Tensor*> v2_slots(GATv2Conv& conv) {
  std::vector<Tensor*> slots{&conv.lin_l->weight, &conv.att};
  if (conv.lin_l->bias.defined()) slots.push_back(&conv.lin_l->bias);
  if (conv.lin_r != conv.lin_l) {
    slots.push_back(&conv.lin_r->weight);
    if (conv.lin_r->bias.defined()) slots.push_back(&conv.lin_r->bias);
  }
  if (conv.bias.defined()) slots.push_back(&conv.bias);
  if (conv.res) slots.push_back(&conv.res->weight);
  return slots;
}

void check_v2_gradients(const std::string& what, const GATv2ConvOptions& options) {
  std::mt19937_64 rng(11);
  const int64_t N = 7;
  const Graph graph = small_graph(N, rng);
  Generator init(5);
  GATv2Conv conv(options, init);
  if (conv.bias.defined()) conv.bias = random_tensor(conv.bias.shape(), rng);
  const std::vector<Tensor*> slots = v2_slots(conv);
  ASSERT_EQ(slots.size(), conv.named_parameters().size()) << what;
  expect_gradients_match(what,
                         with_slots(slots,
                                    [&](const Tensor& x) {
                                      Generator gen(99);  // the same dropout mask in every evaluation
                                      return conv.forward(x, graph, gen);
                                    }),
                         gradcheck_inputs(random_tensor({N, options.in_channels}, rng), slots));
}

GATv2ConvOptions v2_edge_options(int64_t edge_dim, const ops::SelfLoopFill& fill, bool loops) {
  GATv2ConvOptions o = v2_options(4, 3, 2, true, false, true);
  o.edge_dim = edge_dim;
  o.fill_value = fill;
  o.add_self_loops = loops;
  return o;
}

// The GAT model of GATv2Conv layers the model tests build: 5 inputs, 3 classes, 2 heads of 3.
GATConfig v2_model_config() {
  GATConfig config = small_config(5, 3, DType::f64);
  config.value_dropout = 0.0;
  config.layer = AttentionLayer::gatv2;
  return config;
}

}  // namespace

TEST(GATv2Conv, MatchesANaiveReferenceOverOptions) {
  std::mt19937_64 rng(3);
  const int64_t N = 9;
  const Graph graph = small_graph(N, rng);
  const Tensor x = random_tensor({N, 5}, rng);
  for (bool concat : {true, false})
    for (bool share : {false, true})
      for (bool residual : {false, true})
        for (bool loops : {true, false}) {
          GATv2ConvOptions o = v2_options(5, 4, 3, concat, share, residual);
          o.add_self_loops = loops;
          o.negative_slope = loops ? 0.2 : 0.05;
          Generator init(1);
          GATv2Conv conv(o, init);
          conv.bias = random_tensor(conv.bias.shape(), rng);
          Generator gen(0);
          const std::vector<double> got = conv.forward(x, graph, gen).to_vector<double>();
          const std::vector<double> xv = x.to_vector<double>();
          const std::vector<double> want =
              reference_gatv2_conv(conv, xv, N, xv, N, graph.sources(), graph.destinations());
          ASSERT_EQ(got.size(), static_cast<size_t>(N * (concat ? 12 : 4)));
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 1e-12) << "concat " << concat << " share " << share << " residual "
                                                << residual << " loops " << loops << " i " << i;
        }
}

// The score depends on the destination's own projection (what GATv2 adds to GAT): changing lin_r
// changes the output, and with share_weights lin_r is lin_l itself.
TEST(GATv2Conv, DestinationProjectionEntersTheScoresAndShareWeightsUsesOneProjection) {
  std::mt19937_64 rng(5);
  const int64_t N = 8;
  const Graph graph = small_graph(N, rng);
  const Tensor x = random_tensor({N, 4}, rng);
  Generator init(2);
  GATv2Conv conv(v2_options(4, 3, 2, true, false, false), init);
  ASSERT_NE(conv.lin_r, conv.lin_l);
  Generator gen(0);
  const std::vector<double> before = conv.forward(x, graph, gen).to_vector<double>();
  conv.lin_r->weight = random_tensor(conv.lin_r->weight.shape(), rng);
  EXPECT_NE(conv.forward(x, graph, gen).to_vector<double>(), before);

  Generator init_shared(2);
  GATv2Conv shared(v2_options(4, 3, 2, true, true, false), init_shared);
  EXPECT_EQ(shared.lin_r, shared.lin_l);
  // The same as a layer of two projections that happen to be equal.
  Generator init_two(2);
  GATv2Conv two(v2_options(4, 3, 2, true, false, false), init_two);
  two.lin_l->weight = shared.lin_l->weight;
  two.lin_l->bias = shared.lin_l->bias;
  two.lin_r->weight = shared.lin_l->weight;
  two.lin_r->bias = shared.lin_l->bias;
  two.att = shared.att;
  EXPECT_EQ(shared.forward(x, graph, gen).to_vector<double>(),
            two.forward(x, graph, gen).to_vector<double>());
}

TEST(GATv2Conv, ParametersNamedAndInitialisedAsPyG) {
  Generator init(2);
  GATv2ConvOptions o = v2_options(300, 50, 4, true, false, true);
  GATv2Conv conv(o, init);
  std::vector<std::string> names;
  for (const auto& [name, p] : conv.named_parameters()) names.push_back(name + " " + shape_str(p.shape()));
  EXPECT_EQ(names, (std::vector<std::string>{"att (4, 50)", "bias (200,)", "lin_l.weight (300, 200)",
                                             "lin_l.bias (200,)", "lin_r.weight (300, 200)",
                                             "lin_r.bias (200,)", "res.weight (300, 200)"}));
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
    return m;
  };
  const double lin_bound = std::sqrt(6.0 / (300 + 200)), bias_bound = 1.0 / std::sqrt(300.0),
               att_bound = std::sqrt(6.0 / (4 + 50));
  for (const Tensor* w : {&conv.lin_l->weight, &conv.lin_r->weight, &conv.res->weight}) {
    EXPECT_LE(max_abs(*w), lin_bound);
    EXPECT_GT(max_abs(*w), 0.95 * lin_bound);
  }
  for (const Tensor* b : {&conv.lin_l->bias, &conv.lin_r->bias}) {  // PyG's Linear: U(+-1/sqrt(in))
    EXPECT_LE(max_abs(*b), bias_bound);
    EXPECT_GT(max_abs(*b), 0.8 * bias_bound);
  }
  EXPECT_NE(conv.lin_l->weight.to_vector<double>(), conv.lin_r->weight.to_vector<double>());
  EXPECT_LE(max_abs(conv.att), att_bound);
  EXPECT_GT(max_abs(conv.att), 0.8 * att_bound);
  EXPECT_EQ(max_abs(conv.bias), 0.0);

  o.share_weights = true;
  o.concat = false;
  o.residual = false;
  o.bias = false;
  Generator init_shared(2);
  GATv2Conv shared(o, init_shared);
  names.clear();
  for (const auto& [name, p] : shared.named_parameters()) names.push_back(name + " " + shape_str(p.shape()));
  EXPECT_EQ(names, (std::vector<std::string>{"att (4, 50)", "lin_l.weight (300, 200)"}));
}

// A GATv2Conv of 4 inputs to 2 concatenated heads of 3 with attention dropout 0.5, a random
// 8-node graph and an input x [8, 4].
class GATv2ConvWithAttentionDropout : public ::testing::Test {
 protected:
  std::mt19937_64 rng{6};
  const int64_t N = 8;
  const Graph graph = small_graph(N, rng);
  Generator init{1};
  GATv2Conv conv{v2_options(4, 3, 2, true, false, false, 0.5), init};
  const Tensor x = random_tensor({N, 4}, rng);
};

TEST_F(GATv2ConvWithAttentionDropout, AttentionWeightsAreTheSoftmaxOfTheReferenceScores) {
  Generator gen(0);
  GATv2Conv::Attention att;
  const Tensor out = conv.forward(x, graph, gen, &att);
  EXPECT_TRUE(out.requires_grad());
  EXPECT_FALSE(att.weights.requires_grad());
  EXPECT_EQ(att.graph.count_self_loops(), N);
  ASSERT_EQ(att.weights.shape(), (Shape{att.graph.num_edges(), 2}));
  // Without dropout, out = sum_e a[e] xl[src(e)]: the weights reproduce the eval-mode output.
  conv.eval();
  const std::vector<double> eval_out = conv.forward(x, graph, gen).to_vector<double>();
  const std::vector<double> xl = affine(x.to_vector<double>(), N, *conv.lin_l);
  const std::vector<double> w = att.weights.to_vector<double>();
  const std::vector<int32_t> src = att.graph.sources(), dst = att.graph.destinations();
  std::vector<double> rebuilt(eval_out.size(), 0.0);
  for (size_t e = 0; e < src.size(); ++e)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t f = 0; f < 3; ++f)
        rebuilt[dst[e] * 6 + h * 3 + f] += w[e * 2 + h] * xl[src[e] * 6 + h * 3 + f];
  const std::vector<double> b = conv.bias.to_vector<double>();
  for (size_t i = 0; i < rebuilt.size(); ++i) EXPECT_NEAR(rebuilt[i] + b[i % 6], eval_out[i], 1e-12) << i;
}

TEST_F(GATv2ConvWithAttentionDropout, AttentionDropoutOnlyInTrainingMode) {
  Generator gen_a(0), gen_b(0), gen_c(1);
  const std::vector<double> a = conv.forward(x, graph, gen_a).to_vector<double>();
  EXPECT_EQ(gen_a.next_stream(), 1u);
  EXPECT_EQ(conv.forward(x, graph, gen_b).to_vector<double>(), a);
  EXPECT_NE(conv.forward(x, graph, gen_c).to_vector<double>(), a);
  conv.eval();
  Generator gen_d(0);
  EXPECT_NE(conv.forward(x, graph, gen_d).to_vector<double>(), a);
  EXPECT_EQ(gen_d.next_stream(), 0u);
}

TEST(GATv2Conv, AGraphWithOneLoopPerNodeIsUsedAsItIs) {
  std::mt19937_64 rng(9);
  const int64_t N = 6;
  const Graph raw = Graph::from_edges(N, {0, 1, 2, 3, 4, 5, 1}, {1, 2, 3, 4, 5, 0, 1});
  const Graph looped = raw.with_self_loops();
  Generator init(1);
  GATv2Conv conv(v2_options(3, 2, 2, true, false, false), init);
  const Tensor x = random_tensor({N, 3}, rng);
  Generator gen(0);
  GATv2Conv::Attention from_raw, from_looped;
  EXPECT_EQ(conv.forward(x, raw, gen, &from_raw).to_vector<double>(),
            conv.forward(x, looped, gen, &from_looped).to_vector<double>());
  EXPECT_EQ(from_raw.graph.num_edges(), 6 + N);
  EXPECT_TRUE(from_looped.graph.edge_src().same(looped.edge_src()));  // no copy
}

TEST(GATv2Conv, RejectsBadOptionsAndInputsNamingThem) {
  std::mt19937_64 rng(7);
  const Graph graph = small_graph(5, rng);
  Generator init(1), gen(0);
  GATv2Conv conv(v2_options(4, 3, 2, true, false, false), init);
  expect_error(
      [&] {
        conv.forward(random_tensor({5, 6}, rng), graph, gen);
      },
      {"GATv2Conv: 'x' f64 cpu (5, 6) must be (5, 4)"});
  expect_error([&] { conv.forward(random_tensor({4, 4}, rng), graph, gen); }, {"GATv2Conv: 'x'", "5 nodes"});
  EXPECT_THROW(conv.forward(random_tensor({5, 4}, rng, -1, 1, DType::f32), graph, gen), Error);
  expect_error([&] { GATv2Conv(v2_options(4, 3, 0, true, false, false), init); },
               {"GATv2Conv: in_channels 4, out_channels 3 and heads 0 must be positive"});
  expect_error([&] { GATv2Conv(v2_options(4, 3, 2, true, false, false, 1.0), init); },
               {"GATv2Conv: attention dropout 1 is outside [0, 0.999]"});
  expect_error([&] { GATv2Conv(v2_options(4, int64_t{1} << 62, 8, true, false, false), init); },
               {"GATv2Conv: heads x out_channels"});
}

TEST(GATv2Conv, GradientsConcatSeparateWeightsResidual) {
  check_v2_gradients("GATv2Conv concat lin_l/lin_r residual", v2_options(5, 4, 3, true, false, true));
}

TEST(GATv2Conv, GradientsMeanSharedWeightsResidual) {
  check_v2_gradients("GATv2Conv mean shared residual", v2_options(5, 4, 3, false, true, true));
}

TEST(GATv2Conv, GradientsConcatSharedWeightsNoResidual) {
  check_v2_gradients("GATv2Conv concat shared", v2_options(5, 4, 2, true, true, false));
}

TEST(GATv2Conv, GradientsMeanSeparateWeightsWithAttentionDropout) {
  check_v2_gradients("GATv2Conv mean dropout", v2_options(5, 4, 3, false, false, false, 0.5));
}

TEST(GATv2Conv, GradientsWithoutSelfLoopsOrBias) {
  GATv2ConvOptions o = v2_options(5, 4, 2, true, false, true);
  o.add_self_loops = false;  // node 0 has no incoming edge: a zero row, no NaN
  o.bias = false;
  o.negative_slope = 0.05;
  check_v2_gradients("GATv2Conv no loops no bias", o);
}

// mixed_graph: an existing loop (dropped and refilled with add_self_loops), nodes without
// in-edges (their loops' fill from nothing), a row of six edges.
TEST(GATv2ConvEdge, GradientsOfXEdgeAttrAndEveryParameter) {
  std::mt19937_64 rng(31);
  const Graph graph = mixed_graph();
  const int64_t N = graph.num_nodes();
  const std::vector<std::pair<bool, ops::SelfLoopFill>> cases{
      {true, ops::SelfLoopFill::parse("mean")}, {true, ops::SelfLoopFill::parse("max")}, {false, {}}};
  for (const auto& [loops, fill] : cases) {
    Generator init(3);
    GATv2Conv conv(v2_edge_options(2, fill, loops), init);
    conv.bias = random_tensor(conv.bias.shape(), rng);
    std::vector<Tensor*> slots = v2_slots(conv);
    slots.push_back(&conv.lin_edge->weight);
    ASSERT_EQ(slots.size(), conv.named_parameters().size());
    const Tensor x = random_tensor({N, 4}, rng);
    const Tensor edge_attr = random_tensor({graph.num_edges(), 2}, rng, 0.5, 1.5);  // away from ties, for max
    expect_edge_attr_gradients("GATv2Conv edge_attr, fill " + fill.name() + (loops ? "" : ", no loops"), conv,
                               slots, graph, x, edge_attr);
  }
}

// The edge term enters the scores and the attention weights; lin_edge is drawn after lin_r and
// before res and att (PyG's reset_parameters order) and named as PyG's.
TEST(GATv2ConvEdge, EdgeAttrChangesScoresAndLinEdgeIsDrawnAfterLinR) {
  std::mt19937_64 rng(32);
  const Graph graph = mixed_graph();
  const int64_t N = graph.num_nodes();
  Generator init_a(4), init_b(4);
  GATv2Conv with(v2_edge_options(3, ops::SelfLoopFill::parse("mean"), true), init_a);
  GATv2Conv without(v2_edge_options(0, ops::SelfLoopFill(), true), init_b);
  std::vector<std::string> names;
  for (const auto& [name, p] : with.named_parameters()) names.push_back(name + " " + shape_str(p.shape()));
  EXPECT_EQ(names, (std::vector<std::string>{"att (2, 3)", "bias (6,)", "lin_l.weight (4, 6)",
                                             "lin_l.bias (6,)", "lin_r.weight (4, 6)", "lin_r.bias (6,)",
                                             "lin_edge.weight (3, 6)", "res.weight (4, 6)"}));
  EXPECT_TRUE(bitwise_equal(with.lin_r->weight, without.lin_r->weight));
  EXPECT_FALSE(bitwise_equal(with.res->weight, without.res->weight));  // drawn after lin_edge
  for (double v : host_f64(with.lin_edge->weight)) EXPECT_LE(std::abs(v), std::sqrt(6.0 / 9.0));

  const Tensor x = random_tensor({N, 4}, rng), attr = random_tensor({graph.num_edges(), 3}, rng);
  Generator gen(0);
  GATv2Conv::Attention a, b;
  const std::vector<double> out_a = with.forward(x, graph, attr, gen, &a).to_vector<double>();
  const std::vector<double> out_b = with.forward(x, graph, ops::mul(attr, 2.0), gen, &b).to_vector<double>();
  EXPECT_NE(out_a, out_b);
  EXPECT_NE(a.weights.to_vector<double>(), b.weights.to_vector<double>());
  // A zero lin_edge is the layer without edge features.
  with.lin_edge->weight = init::zeros(with.lin_edge->weight.shape(), DType::f64);
  without.lin_l = with.lin_l, without.lin_r = with.lin_r, without.res = with.res, without.att = with.att;
  GATv2Conv::Attention c, d;
  expect_close(with.forward(x, graph, attr, gen, &c), without.forward(x, graph, gen, &d), "zero lin_edge",
               1e-14);
  expect_close(c.weights, d.weights, "zero lin_edge attention", 1e-14);
}

TEST(GATv2ConvEdge, RejectsMissingOrMismatchedEdgeAttr) {
  std::mt19937_64 rng(33);
  const Graph graph = mixed_graph();
  const int64_t N = graph.num_nodes(), E = graph.num_edges();
  const Tensor x = random_tensor({N, 4}, rng);
  Generator init(5), gen(0);
  GATv2Conv conv(v2_edge_options(3, ops::SelfLoopFill(), true), init);
  GATv2Conv plain(v2_edge_options(0, ops::SelfLoopFill(), true), init);
  expect_error([&] { conv.forward(x, graph, gen); },
               {"GATv2Conv: edge_dim is 3 but no 'edge_attr' was given"});
  expect_error(
      [&] {
        plain.forward(x, graph, random_tensor({E, 3}, rng), gen);
      },
      {"GATv2Conv: 'edge_attr'", "given but the layer has no edge features (edge_dim 0)"});
  expect_error(
      [&] {
        conv.forward(x, graph, random_tensor({E + 1, 3}, rng), gen);
      },
      {"GATv2Conv: 'edge_attr'", "must be (13, 3) for a graph of 13 edges and edge_dim 3"});
  expect_error(
      [&] {
        conv.forward(x, graph, random_tensor({E, 2}, rng), gen);
      },
      {"GATv2Conv", "must be (13, 3)"});
  expect_error([&] { conv.forward(x, graph, random_tensor({E}, rng), gen); }, {"GATv2Conv", "edge_attr"});
  expect_error(
      [&] {
        conv.forward(x, graph, random_tensor({E, 3}, rng, -1, 1, DType::f32), gen);
      },
      {"GATv2Conv: 'edge_attr'", "must have the parameters' dtype and device"});
  expect_error([&] { GATv2Conv bad(v2_edge_options(-1, ops::SelfLoopFill(), true), init); },
               {"GATv2Conv: edge_dim -1 is negative"});
}

// ---- bipartite input (PyG's in_channels pair) ---------------------------------------------

// lin_l projects x_src and lin_r x_dst (of its own width), the residual is x_dst's, the output
// has a row per destination, and with add_self_loops only i < min(Ns, Nd) get a loop.
TEST(GATv2ConvBipartite, MatchesANaiveReference) {
  std::mt19937_64 rng(41);
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{6, 13}, {13, 6}}) {
    const Graph graph = random_bipartite_graph(ns, nd, 2 * (ns + nd), 4, rng);
    for (bool concat : {true, false})
      for (bool residual : {false, true})
        for (bool loops : {true, false}) {
          GATv2ConvOptions o = v2_options(5, 4, 3, concat, false, residual);
          o.dst_in_channels = 2;
          o.add_self_loops = loops;
          Generator init(1);
          GATv2Conv conv(o, init);
          conv.bias = random_tensor(conv.bias.shape(), rng);
          const Tensor x_src = random_tensor({ns, 5}, rng), x_dst = random_tensor({nd, 2}, rng);
          Generator gen(0);
          GATv2Conv::Attention attention;
          const Tensor out = conv.forward(x_src, x_dst, graph, gen, &attention);
          const std::string what = std::to_string(ns) + " -> " + std::to_string(nd) + " concat " +
                                   std::to_string(concat) + " residual " + std::to_string(residual) +
                                   " loops " + std::to_string(loops);
          ASSERT_EQ(out.shape(), (Shape{nd, concat ? 12 : 4})) << what;
          const std::vector<double> want = reference_gatv2_conv(conv, host_f64(x_src), ns, host_f64(x_dst),
                                                                nd, graph.sources(), graph.destinations());
          expect_close(out, Tensor::from_vector(want, out.shape()), what, 1e-12);
          EXPECT_EQ(attention.graph.count_self_loops(), loops ? std::min(ns, nd) : graph.count_self_loops())
              << what;
        }
  }
}

// A layer of one width takes a pair too (lin_l on x_src, lin_r on x_dst), and share_weights on a
// pair of one width projects both sides with lin_l (PyG: lin_r is lin_l).
TEST(GATv2ConvBipartite, OneWidthTakesAPairAndShareWeightsProjectsBothSidesWithLinL) {
  std::mt19937_64 rng(42);
  const Graph graph = random_bipartite_graph(6, 9, 20, 3, rng);
  const Tensor x_src = random_tensor({6, 4}, rng), x_dst = random_tensor({9, 4}, rng);
  for (bool share : {false, true})
    for (int64_t dst_in : {0, 4}) {
      GATv2ConvOptions o = v2_options(4, 3, 2, true, share, true);
      o.dst_in_channels = dst_in;
      Generator init(3);
      GATv2Conv conv(o, init);
      conv.bias = random_tensor(conv.bias.shape(), rng);
      EXPECT_EQ(conv.lin_r == conv.lin_l, share);
      Generator gen(0);
      const std::vector<double> want = reference_gatv2_conv(conv, host_f64(x_src), 6, host_f64(x_dst), 9,
                                                            graph.sources(), graph.destinations());
      expect_close(conv.forward(x_src, x_dst, graph, gen), Tensor::from_vector(want, {9, 6}),
                   "share " + std::to_string(share) + " dst_in " + std::to_string(dst_in), 1e-12);
    }
}

TEST(GATv2ConvBipartite, ParametersOfAPairAreNamedAndDrawnAsPyG) {
  GATv2ConvOptions o = v2_options(4, 3, 2, true, false, true);
  Generator init_one(2), init_pair(2);
  GATv2Conv one(o, init_one);
  o.dst_in_channels = 5;
  GATv2Conv pair(o, init_pair);
  std::vector<std::string> names;
  for (const auto& [name, p] : pair.named_parameters()) names.push_back(name + " " + shape_str(p.shape()));
  EXPECT_EQ(names,
            (std::vector<std::string>{"att (2, 3)", "bias (6,)", "lin_l.weight (4, 6)", "lin_l.bias (6,)",
                                      "lin_r.weight (5, 6)", "lin_r.bias (6,)", "res.weight (5, 6)"}));
  EXPECT_TRUE(bitwise_equal(pair.lin_l->weight, one.lin_l->weight));  // lin_l is drawn first either way
  EXPECT_TRUE(bitwise_equal(pair.lin_l->bias, one.lin_l->bias));
}

TEST(GATv2ConvBipartite, RejectsInputsOfTheWrongSideOrWidth) {
  std::mt19937_64 rng(43);
  const Graph graph = random_bipartite_graph(6, 9, 20, 3, rng);
  GATv2ConvOptions o = v2_options(4, 3, 2, true, false, true);
  o.dst_in_channels = 5;
  Generator init(1), gen(0);
  GATv2Conv conv(o, init);
  const Tensor x_src = random_tensor({6, 4}, rng), x_dst = random_tensor({9, 5}, rng);
  EXPECT_EQ(conv.forward(x_src, x_dst, graph, gen).shape(), (Shape{9, 6}));
  expect_error([&] { conv.forward(x_src, graph, gen); },
               {"GATv2Conv", "one 'x'", "bipartite", "6 sources", "9 destinations"});
  expect_error(
      [&] {
        conv.forward(random_tensor({9, 4}, rng), x_dst, graph, gen);
      },
      {"GATv2Conv: 'x_src'", "(9, 4) must be (6, 4)", "6 sources"});
  expect_error(
      [&] {
        conv.forward(x_src, random_tensor({6, 5}, rng), graph, gen);
      },
      {"GATv2Conv: 'x_dst'", "(6, 5) must be (9, 5)", "9 destinations"});
  expect_error(
      [&] {
        conv.forward(random_tensor({6, 5}, rng), x_dst, graph, gen);
      },
      {"GATv2Conv: 'x_src'", "(6, 5) must be (6, 4)", "4 input channels"});
  expect_error(
      [&] {
        conv.forward(x_src, random_tensor({9, 4}, rng), graph, gen);
      },
      {"GATv2Conv: 'x_dst'", "(9, 4) must be (9, 5)", "5 input channels"});
  expect_error(
      [&] {
        conv.forward(x_src, x_dst, graph, random_tensor({graph.num_edges(), 2}, rng), gen);
      },
      {"GATv2Conv: 'edge_attr'", "given but the layer has no edge features"});
  // One x on a graph of one node set is both sides: it must have both widths.
  const Graph square = small_graph(9, rng);
  expect_error([&] { conv.forward(x_dst, square, gen); }, {"GATv2Conv: 'x'", "(9, 5) must be (9, 4)"});
  expect_error(
      [&] {
        conv.forward(random_tensor({9, 4}, rng), square, gen);
      },
      {"GATv2Conv: 'x'", "(9, 4) must be (9, 5)"});
  o.share_weights = true;
  expect_error([&] { GATv2Conv bad(o, init); },
               {"GATv2Conv: share_weights", "in_channels 4 and dst_in_channels 5 differ"});
  o.dst_in_channels = -1;
  expect_error([&] { GATv2Conv bad(o, init); }, {"GATv2Conv: dst_in_channels -1"});
}

// Gradients of x_src, x_dst, edge_attr and every parameter, with fewer sources than destinations
// and more: the loops' features by 'mean', by a number (with share_weights on a pair of one width),
// and no loops with attention dropout.
TEST(GATv2ConvBipartite, GradientsOfBothSidesEdgeAttrAndEveryParameter) {
  std::mt19937_64 rng(44);
  struct Setup {
    bool loops;
    ops::SelfLoopFill fill;
    double dropout;
    bool share;
  };
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{5, 9}, {9, 5}}) {
    const Graph graph = random_bipartite_graph(ns, nd, 2 * (ns + nd), 4, rng);
    for (const Setup& setup : {Setup{true, ops::SelfLoopFill::parse("mean"), 0.0, false},
                               Setup{true, ops::SelfLoopFill::constant_value(0.5), 0.0, true},
                               Setup{false, ops::SelfLoopFill(), 0.4, false}}) {
      GATv2ConvOptions o = v2_edge_options(2, setup.fill, setup.loops);  // in 4, F 3, H 2, concat, residual
      o.dst_in_channels = setup.share ? 4 : 3;
      o.share_weights = setup.share;
      o.dropout = setup.dropout;
      Generator init(3);
      GATv2Conv conv(o, init);
      conv.bias = random_tensor(conv.bias.shape(), rng);
      std::vector<Tensor*> slots = v2_slots(conv);
      slots.push_back(&conv.lin_edge->weight);
      ASSERT_EQ(slots.size(), conv.named_parameters().size());
      const Tensor x_src = random_tensor({ns, 4}, rng), x_dst = random_tensor({nd, o.dst_in_channels}, rng);
      const Tensor edge_attr = random_tensor({graph.num_edges(), 2}, rng);
      expect_gradients_match("GATv2Conv bipartite " + std::to_string(ns) + " -> " + std::to_string(nd) +
                                 " fill " + setup.fill.name() + (setup.loops ? "" : " no loops") +
                                 (setup.share ? " shared" : ""),
                             with_slots(slots, 3,
                                        [&](const std::vector<Tensor>& in) {
                                          Generator gen(0);  // the same dropout mask in every evaluation
                                          return conv.forward(in[0], in[1], graph, in[2], gen);
                                        }),
                             gradcheck_inputs({x_src, x_dst, edge_attr}, slots));
    }
  }
}

TEST(GATv2Model, BuildsGATv2LayersWithTheSameRecipeAndChecksGradients) {
  std::mt19937_64 rng(21);
  const int64_t N = 7;
  const Graph graph = small_graph(N, rng);
  GATConfig config = v2_model_config();
  Generator init(8);
  GAT model(config, init);
  ASSERT_FALSE(model.conv1);
  ASSERT_TRUE(model.v2_conv1 && model.v2_conv2);
  EXPECT_TRUE(model.v2_conv1->options().concat);
  EXPECT_FALSE(model.v2_conv2->options().concat);
  EXPECT_EQ(model.v2_conv2->options().heads, 2);
  EXPECT_EQ(model.v2_conv1->options().dropout, 0.4);
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.att", "conv1.bias", "conv1.lin_l.weight",
                                             "conv1.lin_l.bias", "conv1.lin_r.weight", "conv1.lin_r.bias",
                                             "conv2.att", "conv2.bias", "conv2.lin_l.weight",
                                             "conv2.lin_l.bias", "conv2.lin_r.weight", "conv2.lin_r.bias"}));
  model.v2_conv1->bias = random_tensor(model.v2_conv1->bias.shape(), rng);
  model.v2_conv2->bias = random_tensor(model.v2_conv2->bias.shape(), rng);
  std::vector<Tensor*> slots = v2_slots(*model.v2_conv1);
  for (Tensor* s : v2_slots(*model.v2_conv2)) slots.push_back(s);
  expect_gradients_match("GATv2 model, training mode",
                         with_slots(slots,
                                    [&](const Tensor& x) {
                                      Generator gen(77);
                                      return model.forward(x, graph, gen);
                                    }),
                         gradcheck_inputs(random_tensor({N, 5}, rng), slots), 1e-6, 1e-5);

  config.value_dropout = 0.6;  // GATConv's recipe value: not for GATv2Conv
  expect_error([&] { GAT bad(config, init); }, {"GAT: value_dropout 0.6 with layer gatv2"});
}

TEST(GATv2Model, PassesEdgeAttrToBothLayers) {
  std::mt19937_64 rng(34);
  const Graph graph = mixed_graph();
  const int64_t N = graph.num_nodes();
  GATConfig config = v2_model_config();
  config.edge_dim = 3;
  Generator init(9);
  GAT model(config, init);
  ASSERT_TRUE(model.v2_conv1->lin_edge && model.v2_conv2->lin_edge);
  EXPECT_EQ(model.v2_conv2->lin_edge->weight.shape(), (Shape{3, 6}));
  model.eval();
  const Tensor x = random_tensor({N, 5}, rng), attr = random_tensor({graph.num_edges(), 3}, rng);
  Generator gen(0);
  const std::vector<double> out = model.forward(x, graph, gen, attr).to_vector<double>();
  EXPECT_NE(model.forward(x, graph, gen, ops::mul(attr, 2.0)).to_vector<double>(), out);
  expect_error([&] { model.forward(x, graph, gen); },
               {"GATv2Conv: edge_dim is 3 but no 'edge_attr' was given"});
}

// A layer that ran on one graph and is then given another of as many nodes (neither with one self
// loop per node, so the layer keeps a looped copy) attends over the new graph's edges, as a fresh
// layer does: the copy kept for the first graph is not used for the second. GATConv and
// GATv2Conv share the cache (SelfLoopedGraph).
template <class Layer, class Options>
void expect_a_new_graph_replaces_the_looped_copy(const Options& options) {
  std::mt19937_64 rng(9);
  const Graph first = mixed_graph();  // 8 nodes, one self loop (4 -> 4)
  const Graph second = Graph::from_edges(8, {0, 1, 2, 3, 4, 5, 6, 7}, {7, 0, 1, 2, 3, 4, 5, 6});
  const Tensor x = random_tensor({8, options.in_channels}, rng);
  Generator init_a(3), init_b(3), gen(0);
  Layer used(options, init_a), fresh(options, init_b);
  used.eval();
  fresh.eval();
  const std::vector<double> on_first = used.forward(x, first, gen).template to_vector<double>();
  const std::vector<double> want = fresh.forward(x, second, gen).template to_vector<double>();
  ASSERT_NE(on_first, want) << "the two graphs give the same output: the test would show nothing";
  EXPECT_EQ(used.forward(x, second, gen).template to_vector<double>(), want);
  EXPECT_EQ(used.forward(x, first, gen).template to_vector<double>(), on_first);
}

TEST(GraphAttentionLayers, ANewGraphReplacesTheLoopedCopyOfTheLastOne) {
  expect_a_new_graph_replaces_the_looped_copy<GATv2Conv>(v2_options(4, 3, 2, true, false, false));
  GATConvOptions o;
  o.in_channels = 4;
  o.out_channels = 3;
  o.heads = 2;
  o.dtype = DType::f64;
  expect_a_new_graph_replaces_the_looped_copy<GATConv>(o);
}
