// edge_attr_in_graph_order: edge attributes listed per input edge, moved into the edge-id order of
// the graph Graph::from_edges builds from the same lists (sorted, deduplicated, symmetrised,
// loops removed), with PyG's coalesce / to_undirected rule for duplicates (their rows added).
#include <gtest/gtest.h>

#include <vector>

#include "gat/framework/graph.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

// Input edge k has attributes (k + 1, 10 (k + 1)).
Tensor numbered_attr(size_t m, DType dtype = DType::f64) {
  std::vector<double> v;
  for (size_t k = 0; k < m; ++k) v.insert(v.end(), {k + 1.0, 10.0 * (k + 1.0)});
  return Tensor::from_vector(v, {static_cast<int64_t>(m), 2}).to(dtype);
}

}  // namespace

TEST(EdgeAttrInGraphOrder, FollowsTheSortedEdgesAndSumsDuplicates) {
  // 2 -> 0, 0 -> 1, 1 -> 0 (sorted differently), 2 -> 0 again, and a loop 1 -> 1.
  const std::vector<int32_t> src{2, 0, 1, 2, 1}, dst{0, 1, 0, 0, 1};
  GraphBuildOptions options;
  const Graph graph = Graph::from_edges(3, src, dst, options);
  // Edge ids: 1 -> 0, 2 -> 0, 0 -> 1, 1 -> 1.
  ASSERT_EQ(graph.sources(), (std::vector<int32_t>{1, 2, 0, 1}));
  for (DType dtype : {DType::f64, DType::f32}) {
    const Tensor got = edge_attr_in_graph_order(graph, src, dst, options, numbered_attr(src.size(), dtype));
    EXPECT_EQ(got.dtype(), dtype);
    EXPECT_EQ(host_f64(got), (std::vector<double>{3, 30, 1 + 4, 10 + 40, 2, 20, 5, 50}));
  }
}

TEST(EdgeAttrInGraphOrder, ReverseEdgesTakeTheirInputsRowAsToUndirectedDoes) {
  // 0 -> 1 listed once; 1 -> 2 and 2 -> 1 both listed; a loop 2 -> 2 that the options remove.
  const std::vector<int32_t> src{0, 1, 2, 2}, dst{1, 2, 1, 2};
  GraphBuildOptions options;
  options.symmetrize = true;
  options.remove_self_loops = true;
  const Graph graph = Graph::from_edges(3, src, dst, options);
  // Edge ids: 1 -> 0, 0 -> 1, 2 -> 1, 1 -> 2.
  ASSERT_EQ(graph.sources(), (std::vector<int32_t>{1, 0, 2, 1}));
  const Tensor got = edge_attr_in_graph_order(graph, src, dst, options, numbered_attr(src.size()));
  EXPECT_EQ(host_f64(got), (std::vector<double>{1, 10, 1, 10, 2 + 3, 20 + 30, 2 + 3, 20 + 30}));
}

TEST(EdgeAttrInGraphOrder, RejectsWhatItCannotMap) {
  const std::vector<int32_t> src{0, 1}, dst{1, 2};
  GraphBuildOptions options;
  const Graph graph = Graph::from_edges(3, src, dst, options);
  expect_error([&] { edge_attr_in_graph_order(graph, src, dst, options, numbered_attr(3)); },
               {"edge_attr_in_graph_order", "one row per input edge"});
  expect_error(
      [&] {
        edge_attr_in_graph_order(graph, src, dst, options, Tensor::zeros({2, 2}, DType::i32));
      },
      {"edge_attr_in_graph_order", "edge_attr"});
  expect_error(
      [&] {
        edge_attr_in_graph_order(graph, {0, 2}, {1, 1}, options, numbered_attr(2));
      },
      {"input edge 1 (2 -> 1) is not in the graph"});
  expect_error(
      [&] {
        edge_attr_in_graph_order(graph, {0, 0}, {1, 1}, options, numbered_attr(2));
      },
      {"edge 1 of the graph is no input edge"});
  GraphBuildOptions looped = options;
  looped.add_self_loops = true;
  expect_error(
      [&] {
        edge_attr_in_graph_order(Graph::from_edges(3, src, dst, looped), src, dst, looped, numbered_attr(2));
      },
      {"without add_self_loops", "ops::self_loop_attr"});
}
