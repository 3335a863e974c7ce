// GATConv with edge features (edge_dim, edge_attr, fill_value): forward and attention weights
// against PyG's recipe written out with loops over an edge list (the E x H*F projection, as PyG
// computes it), gradient checks with respect to x, edge_attr and every parameter for each
// fill_value, with and without self loops, and on a bipartite graph, and the errors; the GAT model
// and its training with edge features.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gat/datasets/generator.h"
#include "gat/framework/autograd.h"
#include "gat/framework/io.h"
#include "gat/layers/gat_conv.h"
#include "gat/models/gat.h"
#include "gat/train/trainer.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;
using Fill = ops::SelfLoopFill;

namespace {

GATConvOptions edge_options(int64_t edge_dim, const Fill& fill, bool concat = true, bool loops = true) {
  GATConvOptions o = conv_options(4, 3, 2, concat, false, 0.0);
  o.edge_dim = edge_dim;
  o.fill_value = fill;
  o.add_self_loops = loops;
  return o;
}

// A node's loop attribute from its in-edges' rows `in` (PyG's scatter by destination).
double fill_of(const Fill& fill, const std::vector<double>& in) {
  double v = fill.kind == Fill::Kind::mul ? 1.0 : 0.0;
  for (size_t k = 0; k < in.size(); ++k) {
    switch (fill.kind) {
      case Fill::Kind::mean:
      case Fill::Kind::add:
        v += in[k];
        break;
      case Fill::Kind::min:
        v = k == 0 ? in[k] : std::min(v, in[k]);
        break;
      case Fill::Kind::max:
        v = k == 0 ? in[k] : std::max(v, in[k]);
        break;
      case Fill::Kind::mul:
        v *= in[k];
        break;
      case Fill::Kind::constant:
        break;
    }
  }
  if (fill.kind == Fill::Kind::mean && !in.empty()) v /= static_cast<double>(in.size());
  return fill.kind == Fill::Kind::constant ? fill.value : v;
}

struct Reference {
  std::vector<double> out;        // (N, out_features)
  std::vector<int32_t> src, dst;  // the edges attended over
  std::vector<double> attention;  // (edges, H)
};

// PyG's GATConv.forward with edge_attr: remove_self_loops, add_self_loops(fill_value), then
// alpha = LeakyReLU(alpha_src[j] + alpha_dst[i] + (lin_edge(edge_attr) * att_edge).sum(-1)).
Reference reference(const GATConv& conv, const std::vector<double>& x, int64_t N, const Graph& graph,
                    const std::vector<double>& attr) {
  const GATConvOptions& o = conv.options();
  const int64_t in = o.in_channels, H = o.heads, F = o.out_channels, HF = H * F, D = o.edge_dim;
  const std::vector<double> W = host_f64(conv.lin->weight), We = host_f64(conv.lin_edge->weight);
  const std::vector<double> as = host_f64(conv.att_src), ad = host_f64(conv.att_dst),
                            ae = host_f64(conv.att_edge);
  std::vector<double> wh(static_cast<size_t>(N * HF), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < HF; ++c)
      for (int64_t k = 0; k < in; ++k) wh[n * HF + c] += x[n * in + k] * W[k * HF + c];
  Reference r;
  std::vector<double> a;  // (edges, D)
  const std::vector<int32_t> gs = graph.sources(), gd = graph.destinations();
  for (size_t e = 0; e < gs.size(); ++e) {
    if (o.add_self_loops && gs[e] == gd[e]) continue;
    r.src.push_back(gs[e]), r.dst.push_back(gd[e]);
    a.insert(a.end(), attr.begin() + static_cast<int64_t>(e) * D,
             attr.begin() + static_cast<int64_t>(e + 1) * D);
  }
  if (o.add_self_loops) {
    const size_t kept = r.src.size();
    for (int32_t n = 0; n < N; ++n) {
      r.src.push_back(n), r.dst.push_back(n);
      for (int64_t d = 0; d < D; ++d) {
        std::vector<double> into;
        for (size_t e = 0; e < kept; ++e)
          if (r.dst[e] == n) into.push_back(a[e * D + d]);
        a.push_back(fill_of(o.fill_value, into));
      }
    }
  }
  const size_t E = r.src.size();
  std::vector<double> agg(static_cast<size_t>(N * HF), 0.0);
  r.attention.assign(E * H, 0.0);
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> score(E), mx(static_cast<size_t>(N), -INFINITY), z(static_cast<size_t>(N), 0.0);
    for (size_t e = 0; e < E; ++e) {
      double v = 0;
      for (int64_t f = 0; f < F; ++f) {
        double projected = 0;  // lin_edge(edge_attr)[e, h, f]
        for (int64_t d = 0; d < D; ++d) projected += a[e * D + d] * We[d * HF + h * F + f];
        v += wh[r.src[e] * HF + h * F + f] * as[h * F + f] + wh[r.dst[e] * HF + h * F + f] * ad[h * F + f] +
             projected * ae[h * F + f];
      }
      score[e] = v > 0 ? v : o.negative_slope * v;
      mx[r.dst[e]] = std::max(mx[r.dst[e]], score[e]);
    }
    for (size_t e = 0; e < E; ++e) z[r.dst[e]] += std::exp(score[e] - mx[r.dst[e]]);
    for (size_t e = 0; e < E; ++e) {
      const double w = std::exp(score[e] - mx[r.dst[e]]) / z[r.dst[e]];
      r.attention[e * H + h] = w;
      for (int64_t f = 0; f < F; ++f) agg[r.dst[e] * HF + h * F + f] += w * wh[r.src[e] * HF + h * F + f];
    }
  }
  const int64_t C = conv.out_features();
  const std::vector<double> b = host_f64(conv.bias);
  r.out.assign(static_cast<size_t>(N * C), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t f = 0; f < F; ++f)
        r.out[n * C + (o.concat ? h * F + f : f)] +=
            agg[n * HF + h * F + f] / (o.concat ? 1.0 : static_cast<double>(H));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) r.out[n * C + c] += b[c];
  return r;
}

std::vector<Fill> every_fill() {
  return {Fill::parse("mean"), Fill::parse("add"), Fill::parse("min"),
          Fill::parse("max"),  Fill::parse("mul"), Fill::constant_value(-0.75)};
}

// mixed_graph: an existing loop, nodes without in-edges, a row of six edges.
const int64_t kNodes = 8;

}  // namespace

TEST(GATConvEdge, MatchesPygsRecipeForEveryFillWithAndWithoutLoops) {
  std::mt19937_64 rng(21);
  const Graph graph = mixed_graph();
  for (bool loops : {true, false}) {
    for (bool concat : {true, false}) {
      for (const Fill& fill : loops ? every_fill() : std::vector<Fill>{Fill()}) {
        Generator init(2);
        GATConv conv(edge_options(3, fill, concat, loops), init);
        conv.bias = random_tensor(conv.bias.shape(), rng);
        const Tensor x = random_tensor({kNodes, 4}, rng);
        const Tensor attr = random_tensor({graph.num_edges(), 3}, rng);
        Generator gen(0);
        GATConv::Attention att;
        const Tensor out = conv.forward(x, graph, attr, gen, &att);
        const Reference want = reference(conv, host_f64(x), kNodes, graph, host_f64(attr));
        const std::string what =
            "fill " + fill.name() + (loops ? "" : " no loops") + (concat ? " concat" : " mean");
        expect_close(out, Tensor::from_vector(want.out, out.shape()), what, 1e-12);
        // The attention weights, edge by edge (the reference lists edges in another order).
        ASSERT_EQ(att.graph.num_edges(), static_cast<int64_t>(want.src.size())) << what;
        const std::vector<int32_t> s = att.graph.sources(), d = att.graph.destinations();
        const std::vector<double> w = host_f64(att.weights);
        for (size_t e = 0; e < want.src.size(); ++e) {
          size_t at = 0;
          while (s[at] != want.src[e] || d[at] != want.dst[e]) ++at;
          for (int64_t h = 0; h < 2; ++h)
            EXPECT_NEAR(w[at * 2 + h], want.attention[e * 2 + h], 1e-12) << what;
        }
      }
    }
  }
}

TEST(GATConvEdge, GradientsOfXEdgeAttrAndEveryParameter) {
  std::mt19937_64 rng(22);
  const Graph graph = mixed_graph();
  for (bool loops : {true, false}) {
    for (const Fill& fill : loops ? every_fill() : std::vector<Fill>{Fill()}) {
      Generator init(3);
      GATConv conv(edge_options(2, fill, true, loops), init);
      conv.bias = random_tensor(conv.bias.shape(), rng);
      std::vector<Tensor*> slots{&conv.lin->weight, &conv.lin_edge->weight, &conv.att_src,
                                 &conv.att_dst,     &conv.att_edge,         &conv.bias};
      const Tensor x = random_tensor({kNodes, 4}, rng);
      const Tensor edge_attr = random_tensor({graph.num_edges(), 2}, rng, 0.5, 1.5);
      expect_edge_attr_gradients("GATConv edge_attr, fill " + fill.name() + (loops ? "" : ", no loops"), conv,
                                 slots, graph, x, edge_attr);
    }
  }
}

// Bipartite input with edge features (lin_src, lin_dst): gradients of x_src, x_dst, edge_attr and
// every parameter, the loops' features by 'mean' and by a number, fewer sources than destinations
// and more (loops for i < min(Ns, Nd) only).
TEST(GATConvEdge, BipartiteGradientsOfBothSidesEdgeAttrAndEveryParameter) {
  std::mt19937_64 rng(23);
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{5, 9}, {9, 5}}) {
    const Graph graph = random_bipartite_graph(ns, nd, 2 * (ns + nd), 4, rng);
    for (const Fill& fill : {Fill::parse("mean"), Fill::constant_value(0.5)}) {
      GATConvOptions o = edge_options(2, fill);
      o.dst_in_channels = 3;
      o.residual = true;
      Generator init(3);
      GATConv conv(o, init);
      conv.bias = random_tensor(conv.bias.shape(), rng);
      std::vector<Tensor*> slots = slots_of(conv);
      slots.insert(slots.end(), {&conv.lin_edge->weight, &conv.att_edge});
      ASSERT_EQ(slots.size(), conv.named_parameters().size());
      const Tensor x_src = random_tensor({ns, 4}, rng), x_dst = random_tensor({nd, 3}, rng);
      const Tensor edge_attr = random_tensor({graph.num_edges(), 2}, rng);
      expect_gradients_match("GATConv bipartite " + std::to_string(ns) + " -> " + std::to_string(nd) +
                                 " edge_attr, fill " + fill.name(),
                             with_slots(slots, 3,
                                        [&](const std::vector<Tensor>& in) {
                                          Generator gen(0);
                                          return conv.forward(in[0], in[1], graph, in[2], gen);
                                        }),
                             gradcheck_inputs({x_src, x_dst, edge_attr}, slots));
    }
  }
}

TEST(GATConvEdge, AGraphWithItsLoopsGetsTheLoopsFromTheFill) {
  // The looped graph passed in (as gat_train does): the loops' own rows are replaced by the fill,
  // so the result equals the loop-free graph's with its attributes.
  std::mt19937_64 rng(23);
  const Graph graph = mixed_graph().with_self_loops(),
              loop_free =
                  Graph::from_edges(kNodes, mixed_graph().sources(), mixed_graph().destinations(), [] {
                    GraphBuildOptions o;
                    o.remove_self_loops = true;
                    return o;
                  }());
  Generator init(4);
  GATConv conv(edge_options(3, Fill::parse("max")), init);
  const Tensor x = random_tensor({kNodes, 4}, rng);
  const Tensor attr = random_tensor({loop_free.num_edges(), 3}, rng);
  const Tensor looped_attr = ops::self_loop_attr(loop_free, graph, attr, Fill::constant_value(123.0));
  Generator gen(0);
  expect_close(conv.forward(x, graph, looped_attr, gen), conv.forward(x, loop_free, attr, gen),
               "looped input", 1e-13);
}

TEST(GATConvEdge, ParametersAreNamedAsPygsAndDrawnAfterTheirLayers) {
  Generator a(7), b(7);
  GATConv with(edge_options(5, Fill()), a), without(conv_options(4, 3, 2, true, false, 0.0), b);
  std::vector<std::string> names;
  for (const auto& [name, p] : with.named_parameters()) names.push_back(name + " " + p.describe());
  EXPECT_EQ(with.lin_edge->weight.shape(), (Shape{5, 6}));
  EXPECT_EQ(with.att_edge.shape(), (Shape{2, 3}));
  EXPECT_TRUE(std::find_if(names.begin(), names.end(), [](const std::string& n) {
                return n.rfind("lin_edge.weight", 0) == 0;
              }) != names.end());
  EXPECT_TRUE(bitwise_equal(with.lin->weight, without.lin->weight));  // lin is drawn first either way
  // glorot bounds: lin_edge over (5, 6), att_edge over fan_in H = 2, fan_out F = 3.
  for (double v : host_f64(with.lin_edge->weight)) EXPECT_LE(std::abs(v), std::sqrt(6.0 / 11.0));
  for (double v : host_f64(with.att_edge)) EXPECT_LE(std::abs(v), std::sqrt(6.0 / 5.0));
}

TEST(GATConvEdge, RejectsMissingOrMismatchedEdgeAttr) {
  std::mt19937_64 rng(24);
  const Graph graph = mixed_graph();
  const Tensor x = random_tensor({kNodes, 4}, rng);
  Generator init(5), gen(0);
  GATConv conv(edge_options(3, Fill()), init), plain(conv_options(4, 3, 2, true, false, 0.0), init);
  const int64_t E = graph.num_edges();
  expect_error([&] { conv.forward(x, graph, gen); }, {"GATConv: edge_dim is 3 but no 'edge_attr' was given"});
  expect_error(
      [&] {
        plain.forward(x, graph, random_tensor({E, 3}, rng), gen);
      },
      {"GATConv: 'edge_attr'", "given but the layer has no edge features (edge_dim 0)"});
  expect_error(
      [&] {
        conv.forward(x, graph, random_tensor({E + 1, 3}, rng), gen);
      },
      {"must be (13, 3) for a graph of 13 edges and edge_dim 3"});
  expect_error([&] { conv.forward(x, graph, random_tensor({E, 2}, rng), gen); }, {"must be (13, 3)"});
  expect_error([&] { conv.forward(x, graph, random_tensor({E}, rng), gen); }, {"GATConv", "edge_attr"});
  expect_error(
      [&] {
        conv.forward(x, graph, random_tensor({E, 3}, rng, -1, 1, DType::f32), gen);
      },
      {"must have the parameters' dtype and device"});
  GATConvOptions negative = edge_options(-1, Fill());
  expect_error([&] { GATConv bad(negative, init); }, {"GATConv: edge_dim -1 is negative"});
}

TEST(GATEdge, ConfigKeepsEdgeDimAndOlderCheckpointsHaveNone) {
  GATConfig c;
  c.in_features = 3;
  c.num_classes = 2;
  c.edge_dim = 5;
  io::Metadata meta = c.to_metadata();
  EXPECT_EQ(GATConfig::from_metadata(meta, "m"), c);
  meta.erase("edge_dim");
  EXPECT_EQ(GATConfig::from_metadata(meta, "m").edge_dim, 0);
  c.edge_dim = -1;
  expect_error([&] { c.validate(); }, {"edge_dim"});
}

// The loops' fill reaches both layers of either kind, is kept in the metadata (the mean when an
// older checkpoint has no key) and changes what the network computes.
TEST(GATEdge, ConfigKeepsTheFillValueAndBothLayersUseIt) {
  GATConfig c;
  c.in_features = 3;
  c.num_classes = 2;
  c.edge_dim = 2;
  c.fill_value = ops::SelfLoopFill::constant_value(0.1);
  io::Metadata meta = c.to_metadata();
  EXPECT_EQ(meta.at("fill_value"), "0.1");
  EXPECT_EQ(GATConfig::from_metadata(meta, "m"), c);
  meta.at("fill_value") = "max";
  EXPECT_EQ(GATConfig::from_metadata(meta, "m").fill_value, ops::SelfLoopFill::parse("max"));
  meta.at("fill_value") = "median";
  expect_error(
      [&] { GATConfig::from_metadata(meta, "m"); },
      {"m: metadata 'fill_value' = 'median' is not mean, add, sum, min, max, mul or a finite number"});
  meta.erase("fill_value");
  EXPECT_EQ(GATConfig::from_metadata(meta, "m").fill_value, ops::SelfLoopFill{});

  const Graph graph = Graph::from_edges(4, {0, 1, 2, 3, 1}, {1, 2, 3, 0, 3}).with_self_loops();
  std::mt19937_64 rng(3);
  const Tensor x = random_tensor({4, 3}, rng, -1, 1, DType::f32),
               edge_attr = random_tensor({graph.num_edges(), 2}, rng, -1, 1, DType::f32);
  for (const AttentionLayer layer : {AttentionLayer::gat, AttentionLayer::gatv2}) {
    c.layer = layer;
    c.value_dropout = layer == AttentionLayer::gat ? 0.6 : 0.0;
    Tensor out[2];
    for (int k = 0; k < 2; ++k) {
      c.fill_value = k == 0 ? ops::SelfLoopFill{} : ops::SelfLoopFill::parse("max");
      Generator init(1), gen(2);
      GAT model(c, init);
      model.eval();
      if (layer == AttentionLayer::gat) {
        EXPECT_EQ(model.conv1->options().fill_value, c.fill_value);
        EXPECT_EQ(model.conv2->options().fill_value, c.fill_value);
      } else {
        EXPECT_EQ(model.v2_conv1->options().fill_value, c.fill_value);
        EXPECT_EQ(model.v2_conv2->options().fill_value, c.fill_value);
      }
      out[k] = model.forward(Features(x), graph, gen, edge_attr);
    }
    EXPECT_FALSE(bitwise_equal(out[0], out[1])) << attention_layer_name(layer);
  }
}

// The whole path gat_train takes: generated edge features, with_self_loops(Dataset) (the loops'
// rows as placeholders), a GAT with edge_dim trained on it; the same run twice gives the same bits.
TEST(GATEdge, TrainsOnAGeneratedGraphWithEdgeFeatures) {
  GeneratorOptions go;
  go.num_nodes = 300;
  go.avg_degree = 6;
  go.num_classes = 3;
  go.num_features = 8;
  go.num_edge_features = 4;
  go.train_per_class = 20;
  go.val_size = 80;
  go.test_size = 150;
  go.seed = 5;
  const Dataset data = with_self_loops(generate_sbm(go));
  ASSERT_EQ(data.edge_attr.shape(), (Shape{data.graph.num_edges(), 4}));
  GATConfig config;
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.edge_dim = data.num_edge_features();
  TrainOptions options;
  options.max_epochs = 40;
  double accuracy[2];
  Tensor weights[2];
  for (int run = 0; run < 2; ++run) {
    Generator gen(7);
    GAT model(config, gen);
    auto forward = [&](const Features& x, const Graph& g, Generator& gn) {
      return model.forward(x, g, gn, data.edge_attr);
    };
    accuracy[run] = train_node_classifier(model, forward, data, options, gen).test_acc;
    weights[run] = model.conv1->lin_edge->weight.clone();
  }
  EXPECT_GT(accuracy[0], 0.6);
  EXPECT_EQ(accuracy[0], accuracy[1]);
  EXPECT_TRUE(bitwise_equal(weights[0], weights[1]));
}
