// Batches of disjoint graphs (framework/graph_batch.h): the union's ids, edges and rows worked
// by hand, the round trip through unbatch, a GATConv layer over a batch giving each graph's own
// output (no message crosses two graphs), the pooling ops reading the batch vector, and the
// errors.
#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

#include "gat/framework/graph_batch.h"
#include "gat/framework/ops/global_pool.h"
#include "gat/layers/gat_conv.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

std::vector<std::pair<int32_t, int32_t>> edge_pairs(const Graph& g) {  // (src, dst) in edge order
  const std::vector<int32_t> s = g.sources(), d = g.destinations();
  std::vector<std::pair<int32_t, int32_t>> out;
  for (size_t e = 0; e < s.size(); ++e) out.emplace_back(s[e], d[e]);
  return out;
}

// Graph a: 3 nodes, edges 0->1, 2->1, 1->2, 0->0; graph b: 2 nodes, edges 1->0, 0->1.
// x (N, 2), y (N, 3) of 0 and 1, edge_attr (E, 1) whose value names the edge (10 src + dst + 100
// for b), so that a row that moved with the wrong edge shows.
GraphData graph_a() {
  GraphData g;
  g.graph = Graph::from_edges(3, {0, 2, 1, 0}, {1, 1, 2, 0});
  g.x = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  g.y = f64({1, 0, 0, 0, 1, 0, 1, 1, 1}, {3, 3});
  std::vector<double> attr;
  for (const auto& [s, d] : edge_pairs(g.graph)) attr.push_back(10 * s + d);
  g.edge_attr = f64(attr, {static_cast<int64_t>(attr.size()), 1});
  return g;
}
GraphData graph_b() {
  GraphData g;
  g.graph = Graph::from_edges(2, {1, 0}, {0, 1});
  g.x = f64({7, 8, 9, 10}, {2, 2});
  g.y = f64({0, 0, 1, 1, 0, 0}, {2, 3});
  std::vector<double> attr;
  for (const auto& [s, d] : edge_pairs(g.graph)) attr.push_back(100 + 10 * s + d);
  g.edge_attr = f64(attr, {static_cast<int64_t>(attr.size()), 1});
  return g;
}

}  // namespace

TEST(GraphBatch, OffsetsTheIdsAndKeepsEveryGraphsEdgeOrder) {
  const GraphData a = graph_a(), b = graph_b();
  const GraphBatch batch = batch_graphs({a, b, a});
  EXPECT_EQ(batch.num_graphs(), 3);
  EXPECT_EQ(batch.node_ptr, (std::vector<int64_t>{0, 3, 5, 8}));
  EXPECT_EQ(batch.edge_ptr, (std::vector<int64_t>{0, 4, 6, 10}));
  EXPECT_EQ(batch.batch.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2, 2}));
  // Each graph's edges, in its own order, with its first node added.
  std::vector<std::pair<int32_t, int32_t>> want;
  for (const auto& [g, first] : {std::pair{&a, 0}, {&b, 3}, {&a, 5}})
    for (const auto& [s, d] : edge_pairs(g->graph)) want.emplace_back(s + first, d + first);
  EXPECT_EQ(edge_pairs(batch.data.graph), want);
  EXPECT_EQ(batch.data.graph.num_nodes(), 8);
  // Rows concatenated; the edge features still name their edges.
  EXPECT_EQ(host_f64(batch.data.x), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(batch.data.y.shape(), (Shape{8, 3}));
  const std::vector<double> attr = host_f64(batch.data.edge_attr);
  for (size_t e = 0; e < want.size(); ++e) {
    const bool in_b = e >= 4 && e < 6;
    const int32_t first = e < 4 ? 0 : (in_b ? 3 : 5);
    EXPECT_EQ(attr[e], (in_b ? 100 : 0) + 10 * (want[e].first - first) + (want[e].second - first)) << e;
  }
}

// Members of i64 offsets give the batch of i32 ones (whose edges fit 32 bits, as every batch's).
TEST(GraphBatch, MembersWithWideOffsetsGiveTheSameBatch) {
  const GraphData a = graph_a(), b = graph_b();
  GraphData wide_a = a, wide_b = b;
  wide_a.graph = with_wide_offsets(a.graph);
  wide_b.graph = with_wide_offsets(b.graph);
  ASSERT_EQ(wide_a.graph.offset_dtype(), DType::i64);
  const GraphBatch narrow = batch_graphs({a, b, a}), wide = batch_graphs({wide_a, wide_b, wide_a});
  EXPECT_EQ(graph_difference(wide.data.graph, narrow.data.graph), "");
  EXPECT_EQ(wide.batch.to_vector<int32_t>(), narrow.batch.to_vector<int32_t>());
  EXPECT_EQ(wide.edge_ptr, narrow.edge_ptr);
}

TEST(GraphBatch, UnbatchGivesTheGraphsBack) {
  const GraphData a = graph_a(), b = graph_b();
  const std::vector<GraphData> back = unbatch(batch_graphs({b, a}));
  ASSERT_EQ(back.size(), 2u);
  for (const auto& [got, want] : {std::pair{&back[0], &b}, {&back[1], &a}}) {
    EXPECT_EQ(edge_pairs(got->graph), edge_pairs(want->graph));
    EXPECT_EQ(host_f64(got->x), host_f64(want->x));
    EXPECT_EQ(host_f64(got->y), host_f64(want->y));
    EXPECT_EQ(host_f64(got->edge_attr), host_f64(want->edge_attr));
  }
  // One graph alone is itself, and a batch without edge features has none.
  GraphData plain = graph_b();
  plain.edge_attr = Tensor();
  const GraphBatch one = batch_graphs({plain});
  EXPECT_EQ(edge_pairs(one.data.graph), edge_pairs(plain.graph));
  EXPECT_FALSE(one.data.edge_attr.defined());
  EXPECT_EQ(one.batch.to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
}

// unbatch reads rows by node_ptr and edge_ptr: a batch not made by batch_graphs (default, or its
// offsets changed by hand) read past the batch's row pointers (garbage in the message) or threw
// "use of an undefined Tensor". batch_graphs dereferenced a null member.
TEST(GraphBatch, UnbatchAndBatchGraphsRefuseBatchesTheyDidNotMake) {
  expect_error([] { unbatch(GraphBatch{}); }, {"unbatch: the batch has no graph, x or y"});
  const GraphData a = graph_a(), b = graph_b();
  for (const auto& [k, value] : {std::pair{1, int64_t{100}}, {1, int64_t{-1}}, {0, int64_t{1}}}) {
    GraphBatch bad = batch_graphs({a, b});
    bad.node_ptr[static_cast<size_t>(k)] = value;
    expect_error([&] { unbatch(bad); }, {"unbatch: node_ptr", "must run from 0"});
  }
  GraphBatch short_edges = batch_graphs({a, b});
  short_edges.edge_ptr.pop_back();
  expect_error([&] { unbatch(short_edges); }, {"unbatch: edge_ptr"});
  GraphBatch more_graphs = batch_graphs({a, b});
  more_graphs.edge_ptr.insert(more_graphs.edge_ptr.begin() + 1, 0);
  expect_error([&] { unbatch(more_graphs); }, {"node_ptr has 3 entries, edge_ptr 4"});
  expect_error([] { batch_graphs(std::vector<const GraphData*>{nullptr}); }, {"graph 0 is a null pointer"});
}

TEST(GraphBatch, ALayerOverTheBatchIsTheLayerOverEachGraph) {
  std::mt19937_64 rng(5);
  std::vector<GraphData> graphs;
  for (int64_t n : {7, 3, 12}) {
    GraphData g;
    g.graph = small_graph(n, rng);
    g.x = random_tensor({g.graph.num_nodes(), 4}, rng, -1, 1);
    g.y = Tensor::zeros({g.graph.num_nodes(), 2}, DType::f64);
    graphs.push_back(std::move(g));
  }
  Generator init(3);
  GATConv conv(conv_options(4, 3, 2, true, true, 0.0), init);
  const GraphBatch batch = batch_graphs(graphs);
  const Tensor together = conv.forward(batch.data.x, batch.data.graph.with_self_loops());
  for (size_t k = 0; k < graphs.size(); ++k) {
    const Tensor alone = conv.forward(graphs[k].x, graphs[k].graph.with_self_loops());
    expect_close(together.rows(batch.node_ptr[k], batch.node_ptr[k + 1]), alone, "graph " + std::to_string(k),
                 1e-12);
  }
  // The batch vector gives each graph's mean through the pooling op.
  const std::vector<double> pooled = host_f64(ops::global_mean_pool(batch.data.x, batch.batch));
  for (size_t k = 0; k < graphs.size(); ++k) {
    const std::vector<double> x = host_f64(graphs[k].x);
    const auto n = static_cast<double>(graphs[k].num_nodes());
    for (size_t f = 0; f < 4; ++f) {
      double sum = 0;
      for (size_t i = f; i < x.size(); i += 4) sum += x[i];
      EXPECT_NEAR(pooled[k * 4 + f], sum / n, 1e-12);
    }
  }
}

TEST(GraphBatch, RefusesGraphsThatDoNotFitTogether) {
  const GraphData a = graph_a();
  expect_error([] { batch_graphs(std::vector<GraphData>{}); }, {"batch_graphs", "no graphs"});
  GraphData wide = graph_b();
  wide.x = Tensor::zeros({2, 3}, DType::f64);
  expect_error([&] { batch_graphs({a, wide}); }, {"batch_graphs", "graph 1", "x is (2, 3)", "(3, 2)"});
  GraphData labels = graph_b();
  labels.y = Tensor::zeros({2, 4}, DType::f64);
  expect_error([&] { batch_graphs({a, labels}); }, {"graph 1", "y is (2, 4)", "one row shape"});
  GraphData short_y = graph_b();
  short_y.y = Tensor::zeros({1, 3}, DType::f64);
  expect_error([&] { batch_graphs({a, short_y}); }, {"graph 1", "y (1, 3)", "2 nodes"});
  GraphData no_attr = graph_b();
  no_attr.edge_attr = Tensor();
  expect_error([&] { batch_graphs({a, no_attr}); }, {"graph 1 has no edge features", "graph 0 has"});
  GraphData bipartite = graph_b();
  bipartite.graph = Graph::from_edges(3, 2, {0}, {1});
  expect_error([&] { batch_graphs({bipartite}); }, {"graph 0", "bipartite"});
  GraphData empty = graph_b();
  empty.graph = Graph::from_edges(0, {}, {});
  expect_error([&] { batch_graphs({empty}); }, {"graph 0 has no nodes"});
}
