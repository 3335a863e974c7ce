// Tests of the message-passing ops: scatter_add, the segment reductions (segment_sum,
// segment_mean, segment_max) and the global pools, on each device: worked examples with their
// gradients for non-uniform upstream gradients, the boundaries (empty segments, one segment, no
// rows, ties and NaN in max, repeated and unsorted indices, unsorted batches), errors; the
// message-passing layer of docs/message-passing.md against a hand computation and a gradient
// check; and beyond the backend table (test_backend_ops.cpp), the CUDA results bit for bit equal
// to the CPU's. gather is index_rows (its tests are in test_ops_elementwise.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/graph.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/global_pool.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/reshape.h"
#include "gat/framework/ops/scatter_add.h"
#include "gat/framework/ops/segment_reduce.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

using Inputs = std::vector<Tensor>;

Tensor i32(const std::vector<int32_t>& values) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
}

// The output of f(x) and the gradient of x for the upstream gradient g.
struct Result {
  std::vector<double> out, grad;
};
Result forward_backward(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const Tensor& g) {
  Tensor leaf = x.detach().set_requires_grad();
  Tensor out = f(leaf);
  out.backward(g.to(out.device()));
  return {host_f64(out), host_f64(leaf.grad())};
}

// A worked example of six rows, two features, six segments: empty, rows 0-1, empty, rows 2-4
// (with a tie for the max in column 0: rows 2 and 4), row 5, empty.
const std::vector<int32_t> kOffsets = {0, 0, 2, 2, 5, 6, 6};
const std::vector<double> kX = {1,  -2,  //
                                3,  4,   //
                                7,  0,   //
                                -1, 5,   //
                                7,  -3,  //
                                2,  2};
// The upstream gradient, different for every element.
const std::vector<double> kG = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120};

}  // namespace

class SegmentOpsOnDevice : public DeviceTest {
 protected:
  Tensor on_device(const Tensor& t) const { return t.to(device()); }
  ops::Segments segments(const std::vector<int32_t>& offsets) const {
    return ops::Segments(i32(offsets), device());
  }
};

TEST_P(SegmentOpsOnDevice, SegmentSumWorkedExample) {
  const Result r = forward_backward([&](const Tensor& x) { return ops::segment_sum(x, segments(kOffsets)); },
                                    on_device(f64(kX, {6, 2})), f64(kG, {6, 2}));
  EXPECT_EQ(r.out, (std::vector<double>{0, 0, 4, 2, 0, 0, 13, 2, 2, 2, 0, 0}));
  // Each row gets its segment's upstream row.
  EXPECT_EQ(r.grad, (std::vector<double>{30, 40, 30, 40, 70, 80, 70, 80, 70, 80, 90, 100}));
}

// A graph's i64 offsets (at most 2^31 - 1 rows) are taken narrowed: the same sums.
TEST_P(SegmentOpsOnDevice, WideOffsetsOfAGraphGiveTheSameSegments) {
  const ops::Segments wide(Tensor::from_vector(std::vector<int64_t>(kOffsets.begin(), kOffsets.end()),
                                               {static_cast<int64_t>(kOffsets.size())}),
                           device());
  EXPECT_EQ(wide.offsets().dtype(), DType::i32);
  const Result a = forward_backward([&](const Tensor& x) { return ops::segment_max(x, segments(kOffsets)); },
                                    on_device(f64(kX, {6, 2})), f64(kG, {6, 2}));
  const Result b = forward_backward([&](const Tensor& x) { return ops::segment_max(x, wide); },
                                    on_device(f64(kX, {6, 2})), f64(kG, {6, 2}));
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.grad, b.grad);
}

TEST_P(SegmentOpsOnDevice, SegmentMeanWorkedExample) {
  const Result r = forward_backward([&](const Tensor& x) { return ops::segment_mean(x, segments(kOffsets)); },
                                    on_device(f64(kX, {6, 2})), f64(kG, {6, 2}));
  EXPECT_EQ(r.out, (std::vector<double>{0, 0, 2, 1, 0, 0, 13.0 / 3, 2.0 / 3, 2, 2, 0, 0}));
  EXPECT_EQ(r.grad, (std::vector<double>{15, 20, 15, 20, 70.0 / 3, 80.0 / 3, 70.0 / 3, 80.0 / 3, 70.0 / 3,
                                         80.0 / 3, 90, 100}));
}

TEST_P(SegmentOpsOnDevice, SegmentMaxGivesTheGradientToTheFirstRowHoldingTheMax) {
  const Result r = forward_backward([&](const Tensor& x) { return ops::segment_max(x, segments(kOffsets)); },
                                    on_device(f64(kX, {6, 2})), f64(kG, {6, 2}));
  // Empty segments give 0; segment 3's column 0 is 7 in rows 2 and 4.
  EXPECT_EQ(r.out, (std::vector<double>{0, 0, 3, 4, 0, 0, 7, 5, 2, 2, 0, 0}));
  // Row 2 (the first 7) takes d out[3, 0] = 70, row 4 nothing; column 1's max is row 3's 5.
  EXPECT_EQ(r.grad, (std::vector<double>{0, 0, 30, 40, 70, 0, 0, 80, 0, 0, 90, 100}));
}

TEST_P(SegmentOpsOnDevice, SegmentMaxPassesTheFirstNaNOn) {
  const Tensor x = on_device(f64({1, NAN, 5, NAN}, {4, 1}));
  const Result r = forward_backward(
      [&](const Tensor& t) {
        return ops::segment_max(t, segments({0, 4}));
      },
      x, f64({3}, {1, 1}));
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_TRUE(std::isnan(r.out[0]));
  EXPECT_EQ(r.grad, (std::vector<double>{0, 3, 0, 0}));
}

TEST_P(SegmentOpsOnDevice, OneSegmentReducesEveryRow) {
  const Tensor x = on_device(f64(kX, {6, 2}));
  EXPECT_EQ(host_f64(ops::segment_sum(x, segments({0, 6}))), (std::vector<double>{19, 6}));
  EXPECT_EQ(host_f64(ops::segment_mean(x, segments({0, 6}))), (std::vector<double>{19.0 / 6, 1}));
  EXPECT_EQ(host_f64(ops::segment_max(x, segments({0, 6}))), (std::vector<double>{7, 5}));
}

TEST_P(SegmentOpsOnDevice, NoRowsGiveZerosAndNoSegmentsGiveNoRows) {
  for (auto op : {ops::segment_sum, ops::segment_mean, ops::segment_max}) {
    const Result r = forward_backward(
        [&](const Tensor& x) {
          return op(x, segments({0, 0, 0}));
        },
        on_device(Tensor::zeros({0, 3}, DType::f64)), f64({1, 2, 3, 4, 5, 6}, {2, 3}));
    EXPECT_EQ(r.out, (std::vector<double>(6, 0.0)));
    EXPECT_TRUE(r.grad.empty());
    EXPECT_EQ(op(on_device(Tensor::zeros({0, 3}, DType::f64)), segments({0})).shape(), (Shape{0, 3}));
  }
}

TEST_P(SegmentOpsOnDevice, TrailingDimensionsAreFeatures) {
  std::mt19937_64 rng(3);
  const Tensor x = random_f64({6, 2, 3}, rng);
  const Tensor flat = ops::segment_max(ops::reshape(x, {6, 6}), segments(kOffsets));
  EXPECT_EQ(ops::segment_max(x, segments(kOffsets)).shape(), (Shape{6, 2, 3}));
  EXPECT_EQ(host_f64(ops::segment_max(x, segments(kOffsets))), host_f64(flat));
}

TEST_P(SegmentOpsOnDevice, ScatterAddSumsRepeatedUnsortedIndicesAndLeavesOtherRowsZero) {
  // Rows 0, 2 and 3 go to output row 2; row 1 to 0, row 4 to 4; rows 1, 3, 5 get nothing.
  const Tensor index = i32({2, 0, 2, 2, 4});
  const Result r = forward_backward([&](const Tensor& src) { return ops::scatter_add(src, index, 6); },
                                    on_device(f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2})), f64(kG, {6, 2}));
  EXPECT_EQ(r.out, (std::vector<double>{3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8, 0, 0, 9, 10, 0, 0}));
  // d src[k] = d out[index[k]].
  EXPECT_EQ(r.grad, (std::vector<double>{50, 60, 10, 20, 50, 60, 50, 60, 90, 100}));
  // No entries: all-zero rows.
  EXPECT_EQ(host_f64(ops::scatter_add(on_device(Tensor::zeros({0, 2}, DType::f64)), i32({}), 2)),
            (std::vector<double>(4, 0.0)));
}

TEST_P(SegmentOpsOnDevice, ScatterAddEqualsSegmentSumOfTheSortedRows) {
  std::mt19937_64 rng(5);
  const Tensor src = random_f64({9, 4}, rng);
  const Tensor index = i32({3, 0, 3, 1, 0, 3, 4, 1, 3});
  // The rows of each output row in ascending k, then segment_sum over the runs: the same adds in
  // the same order.
  const Tensor sorted = ops::index_rows(src, i32({1, 4, 3, 7, 0, 2, 5, 8, 6}));
  EXPECT_TRUE(bitwise_equal(ops::scatter_add(src, index, 6),
                            ops::segment_sum(sorted, segments({0, 2, 4, 4, 8, 9, 9}))));
}

TEST_P(SegmentOpsOnDevice, GlobalPoolsOverAnUnsortedBatchEqualThoseOverTheSortedOne) {
  std::mt19937_64 rng(7);
  // Sorted: graph 0 has rows 0-2, graph 1 none, graph 2 rows 3-4, graph 3 row 5, graph 4 none.
  const Tensor x = random_f64({6, 3}, rng);
  const Tensor batch = i32({0, 0, 0, 2, 2, 3});
  // The same nodes listed in another order; within a graph, their order is kept.
  const std::vector<int32_t> listing = {3, 0, 5, 1, 4, 2};
  const Tensor unsorted_x = ops::index_rows(x, i32(listing));
  const Tensor unsorted_batch = i32({2, 0, 3, 0, 2, 0});
  for (auto pool : {ops::global_add_pool, ops::global_mean_pool, ops::global_max_pool}) {
    const Tensor want = pool(x, batch, 5);
    EXPECT_EQ(want.shape(), (Shape{5, 3}));
    EXPECT_TRUE(bitwise_equal(pool(unsorted_x, unsorted_batch, 5), want));
    EXPECT_TRUE(bitwise_equal(pool(unsorted_x, unsorted_batch.to(device()), -1), pool(x, batch, -1)));
  }
  EXPECT_EQ(ops::global_add_pool(x, batch).shape(), (Shape{4, 3}));  // max(batch) + 1 graphs
  EXPECT_EQ(ops::global_mean_pool(Tensor::zeros({0, 3}, DType::f64, device()), i32({})).shape(),
            (Shape{0, 3}));
}

TEST_P(SegmentOpsOnDevice, GlobalMaxPoolOfAnUnsortedBatchGivesATieToTheNodeFirstInX) {
  // Graph 1 holds nodes 0, 2 and 3, with 4 at nodes 2 and 3; graph 0 holds node 1.
  const Tensor x = on_device(f64({1, 9, 4, 4}, {4, 1}));
  const Result r = forward_backward(
      [](const Tensor& t) {
        return ops::global_max_pool(t, i32({1, 0, 1, 1}));
      },
      x, f64({5, 7}, {2, 1}));
  EXPECT_EQ(r.out, (std::vector<double>{9, 4}));
  EXPECT_EQ(r.grad, (std::vector<double>{0, 5, 7, 0}));
}

TEST_P(SegmentOpsOnDevice, GlobalPoolsWorkedExample) {
  const Tensor x = on_device(f64({1, 2, 3, 4, 5, 6, -7, 8}, {4, 2}));
  const Tensor batch = i32({1, 0, 1, 1});  // graph 0: node 1; graph 1: nodes 0, 2, 3; graph 2: none
  EXPECT_EQ(host_f64(ops::global_add_pool(x, batch, 3)), (std::vector<double>{3, 4, -1, 16, 0, 0}));
  EXPECT_EQ(host_f64(ops::global_mean_pool(x, batch, 3)),
            (std::vector<double>{3, 4, -1.0 / 3, 16.0 / 3, 0, 0}));
  EXPECT_EQ(host_f64(ops::global_max_pool(x, batch, 3)), (std::vector<double>{3, 4, 5, 8, 0, 0}));
}

TEST_P(SegmentOpsOnDevice, GradientsOfTheBoundaryCases) {
  std::mt19937_64 rng(11);
  // Empty segments at both ends and inside, one-row segments; an unsorted batch with an empty
  // graph; a scatter with repeats and untouched rows.
  expect_gradients_match("segment ops",
                         [&](const Inputs& in) {
                           const ops::Segments s = segments(kOffsets);
                           return ops::segment_sum(in[0], s) + ops::segment_mean(in[0], s) * 2.0 +
                                  ops::segment_max(in[0], s) * 3.0;
                         },
                         {random_f64({6, 2, 2}, rng)});
  expect_gradients_match("global pools",
                         [](const Inputs& in) {
                           const Tensor batch = i32({2, 0, 2, 3, 0, 2});
                           return ops::global_add_pool(in[0], batch, 5) +
                                  ops::global_mean_pool(in[0], batch, 5) * 2.0 +
                                  ops::global_max_pool(in[0], batch, 5) * 3.0;
                         },
                         {random_f64({6, 3}, rng)});
  expect_gradients_match("scatter_add",
                         [](const Inputs& in) {
                           return ops::scatter_add(in[0], i32({4, 0, 4, 1, 4}), 6);
                         },
                         {random_f64({5, 3}, rng)});
}

// ---- the message-passing layer of docs/message-passing.md ----------------------------------

// Mean aggregation: out[i] = (the mean of x[j] over the edges j -> i) W, 0 for a node without
// in-edges. The graph's edges are sorted by destination, so its row_ptr cuts them into one
// segment per destination.
Tensor mean_aggregation(const Graph& graph, const Tensor& x, const Tensor& weight) {
  const Tensor messages = ops::matmul(ops::index_rows(x, graph.edge_src()), weight);  // (E, F_out)
  return ops::segment_mean(messages, ops::Segments(graph.row_ptr()));                 // (N, F_out)
}

// The same sum of messages from an edge list in any order, without a Graph.
Tensor sum_aggregation(const Tensor& src, const Tensor& dst, int64_t num_nodes, const Tensor& x,
                       const Tensor& weight) {
  const Tensor messages = ops::matmul(ops::index_rows(x, src), weight);  // (E, F_out)
  return ops::scatter_add(messages, dst, num_nodes);                     // (N, F_out)
}

TEST_P(SegmentOpsOnDevice, MeanAggregationLayerMatchesTheHandComputation) {
  // Edges 0->2, 1->2, 3->2, 2->0, 2->2; node 1 and node 3 have no in-edges.
  const std::vector<int32_t> src = {0, 1, 3, 2, 2}, dst = {2, 2, 2, 0, 2};
  const Graph graph = Graph::from_edges(4, src, dst).to(device());
  const Tensor x = on_device(f64({1, 0, 0, 2, 4, 4, 3, -2}, {4, 2}));
  const Tensor weight = on_device(f64({1, 2, 0, 1}, {2, 2}));  // x W = (x0, 2 x0 + x1)
  // Node 0: x[2] W = (4, 12). Node 2: the mean of x[0], x[1], x[3], x[2] = (2, 1), so (2, 5).
  EXPECT_EQ(host_f64(mean_aggregation(graph, x, weight)), (std::vector<double>{4, 12, 0, 0, 2, 5, 0, 0}));
  // Sums from the unsorted edge list: node 2's is 4 times its mean.
  EXPECT_EQ(host_f64(sum_aggregation(i32(src), i32(dst), 4, x, weight)),
            (std::vector<double>{4, 12, 0, 0, 8, 20, 0, 0}));

  std::mt19937_64 rng(13);
  expect_gradients_match("mean_aggregation",
                         [&](const Inputs& in) { return mean_aggregation(graph, in[0], in[1]); },
                         {random_f64({4, 2}, rng), random_f64({2, 3}, rng)});
  expect_gradients_match(
      "sum_aggregation",
      [&](const Inputs& in) { return sum_aggregation(i32(src), i32(dst), 4, in[0], in[1]); },
      {random_f64({4, 2}, rng), random_f64({2, 3}, rng)});
}

GAT_INSTANTIATE_DEVICE_TESTS(SegmentOpsOnDevice);

// Every C++ block of docs/message-passing.md after the first (the includes) is code of this file.
TEST(MessagePassingDoc, ExamplesAreTheTestedCode) {
  const auto read = [](const char* path) {
    std::ifstream in(std::filesystem::path(GAT_SOURCE_DIR) / path);
    EXPECT_TRUE(in) << path;
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string doc = read("docs/message-passing.md"), source = read("tests/test_segment_ops.cpp");
  const std::string open = "```cpp\n", close = "```\n";
  int blocks = 0;
  for (size_t at = doc.find(open); at != std::string::npos; at = doc.find(open, at)) {
    at += open.size();
    std::string block = doc.substr(at, doc.find(close, at) - at);
    if (blocks++ == 0) block = block.substr(block.find("Tensor mean_aggregation"));
    EXPECT_NE(source.find(block), std::string::npos) << "not in tests/test_segment_ops.cpp:\n" << block;
  }
  EXPECT_EQ(blocks, 2);
}

// ---- errors -----------------------------------------------------------------------------------

TEST(SegmentOpsErrors, BadOffsets) {
  expect_error([] { ops::Segments(Tensor::zeros({3}, DType::f32)); }, {"Segments", "offsets", "i32"});
  expect_error([] { ops::Segments(Tensor::zeros({2, 2}, DType::i32)); }, {"Segments", "offsets", "(2, 2)"});
  expect_error([] { ops::Segments(Tensor::zeros({0}, DType::i32)); }, {"Segments", "at least one entry"});
  expect_error([] { ops::Segments(i32({1, 3})); }, {"Segments", "offsets[0] = 1", "expected 0"});
  expect_error([] { ops::Segments(i32({0, 4, 3, 5})); }, {"Segments", "offsets[2] = 3 < offsets[1] = 4"});
  expect_error(
      [] {
        ops::Segments(Tensor::from_vector<int64_t>({0, int64_t{1} << 31}, {2}));
      },
      {"Segments", "2147483648", "32-bit offsets"});
  expect_error(
      [] {
        ops::Segments(Tensor::from_vector<int64_t>({0, 4, 3}, {3}));
      },
      {"Segments", "offsets[2] = 3 < offsets[1] = 4"});
  expect_error(
      [] {
        ops::segment_max(Tensor::zeros({3, 2}), ops::Segments(i32({0, 4})));
      },
      {"segment_max", "(3, 2)", "3 rows", "offsets end at 4"});
  expect_error([] { ops::segment_sum(Tensor::zeros({3, 2}), ops::Segments()); }, {"segment_sum", "empty"});
  expect_error([] { ops::segment_mean(Tensor::zeros({}), ops::Segments(i32({0}))); },
               {"segment_mean", "at least one dimension"});
}

TEST(SegmentOpsErrors, BadScatterAdd) {
  const Tensor src = Tensor::zeros({3, 2});
  expect_error(
      [&] {
        ops::scatter_add(src, i32({0, 1, 2}), -1);
      },
      {"scatter_add", "num_segments -1", "negative"});
  expect_error(
      [&] {
        ops::scatter_add(src, i32({0, 1, 2}), 2);
      },
      {"scatter_add", "index 2", "position 2", "out of range for 2 segments"});
  expect_error(
      [&] {
        ops::scatter_add(Tensor::zeros({3}, DType::i32), i32({0, 1, 2}), 3);
      },
      {"scatter_add", "i32"});
  expect_error([&] { ops::scatter_add(src, Tensor::zeros({3}, DType::f32), 3); },
               {"scatter_add", "index", "f32"});
  expect_error([&] { ops::scatter_add(src, ops::RowIndex(), 3); }, {"scatter_add", "default-constructed"});
}

TEST(SegmentOpsErrors, BadPools) {
  const Tensor x = Tensor::zeros({3, 2});
  expect_error([&] { ops::global_add_pool(x, i32({0, 1, 1}), -2); }, {"global_add_pool", "size -2"});
  expect_error([&] { ops::global_mean_pool(x, Tensor::zeros({3}, DType::f32)); },
               {"global_mean_pool", "batch", "f32"});
  expect_error(
      [&] {
        ops::global_max_pool(Tensor::zeros({3, 2}, DType::i32), i32({0, 1, 1}));
      },
      {"global_max_pool", "'x'", "i32"});
  expect_error(
      [&] {
        ops::global_max_pool(x, i32({0, 1, 3}), 3);
      },
      {"global_max_pool", "batch[2] = 3", "size 3"});
}

// ---- CUDA against the CPU, bit for bit --------------------------------------------------------

using CudaSegmentOps = CudaVsCpuTest;

TEST_F(CudaSegmentOps, ForwardAndBackwardAreBitwiseTheCpus) {
  std::mt19937_64 rng(19);
  // 2,000 segments over 20,000 rows: lengths 0 to 20, and one of 3,000 rows.
  std::vector<int32_t> offsets = {0};
  for (int s = 0; s < 2000; ++s) offsets.push_back(offsets.back() + static_cast<int32_t>(rng() % 21));
  offsets.push_back(offsets.back() + 3000);
  const int64_t rows = offsets.back(), S = static_cast<int64_t>(offsets.size()) - 1;
  std::vector<int32_t> index(static_cast<size_t>(rows));
  for (int32_t& v : index) v = static_cast<int32_t>(rng() % 1500);
  // Values from 9 levels, so that most segments' max is tied.
  std::vector<double> levels(static_cast<size_t>(rows * 21));
  for (double& v : levels) v = static_cast<double>(rng() % 9) / 4.0;
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = random_tensor({rows, 3, 7}, rng, -1, 1, dtype);
    const Tensor tied = Tensor::from_vector(levels, {rows, 3, 7}).to(dtype);
    const Tensor g = random_tensor({S, 3, 7}, rng, -1, 1, dtype);
    const Tensor gs = random_tensor({1600, 3, 7}, rng, -1, 1, dtype);
    const auto on = [&](const Tensor& t) { return ops::Segments(i32(offsets), t.device()); };
    const std::vector<std::pair<std::function<Tensor(const Tensor&)>, Tensor>> cases = {
        {[&](const Tensor& t) { return ops::segment_sum(t, on(t)); }, x},
        {[&](const Tensor& t) { return ops::segment_mean(t, on(t)); }, x},
        {[&](const Tensor& t) { return ops::segment_max(t, on(t)); }, x},
        {[&](const Tensor& t) { return ops::segment_max(t, on(t)); }, tied},
    };
    for (size_t k = 0; k < cases.size(); ++k) {
      SCOPED_TRACE("case " + std::to_string(k) + " " + dtype_name(dtype));
      const Result cpu = forward_backward(cases[k].first, cases[k].second, g);
      const Result cuda = forward_backward(cases[k].first, cases[k].second.to(Device::cuda), g);
      EXPECT_EQ(cpu.out, cuda.out);
      EXPECT_EQ(cpu.grad, cuda.grad);
    }
    const auto scatter = [&](const Tensor& t) { return ops::scatter_add(t, i32(index), 1600); };
    const Result cpu = forward_backward(scatter, x, gs),
                 cuda = forward_backward(scatter, x.to(Device::cuda), gs);
    EXPECT_EQ(cpu.out, cuda.out);
    EXPECT_EQ(cpu.grad, cuda.grad);
  }
}

TEST_F(CudaSegmentOps, AnIndexOnAnotherDeviceIsAnError) {
  const Tensor x = Tensor::zeros({3, 2}, DType::f32, Device::cuda);
  expect_error(
      [&] {
        ops::segment_sum(x, ops::Segments(i32({0, 3})));
      },
      {"segment_sum", "offsets are on cpu"});
  expect_error(
      [&] {
        ops::scatter_add(x, ops::RowIndex(i32({0, 1, 1})), 2);
      },
      {"scatter_add", "index is on cpu"});
  // The pools read the batch on the host, wherever it is: a CPU batch is fine.
  EXPECT_EQ(ops::global_add_pool(x, i32({0, 1, 1})).device(), Device::cuda);
}
