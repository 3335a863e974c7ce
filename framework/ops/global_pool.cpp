#include "gat/framework/ops/global_pool.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include <vector>

#include "gat/framework/ops/index_rows.h"
#include "gat/framework/ops/segment_reduce.h"

namespace gat::ops {

namespace {

using SegmentOp = Tensor (*)(const Tensor&, const Segments&);

Tensor global_pool(const char* op, SegmentOp reduce, const Tensor& x, const Tensor& batch, int64_t size) {
  check_defined(op, "x", x);
  check_float(op, "x", x);
  GAT_CHECK(x.dim() >= 1, op, ": 'x' must have at least one dimension, got ", x.describe());
  GAT_CHECK(x.size(0) <= INT32_MAX, op, ": 'x' ", x.describe(), " has more rows than i32 offsets hold");
  check_dtype(op, "batch", batch, DType::i32);
  GAT_CHECK(batch.dim() == 1 && batch.numel() == x.size(0), op, ": 'batch' ", batch.describe(),
            " must be (N,) with one entry per row of 'x' ", x.describe());
  GAT_CHECK(size >= -1 && size < INT32_MAX, op, ": size ", size, " is outside [-1, ", INT32_MAX - 1,
            "] (-1 takes max(batch) + 1)");
  const std::vector<int32_t> graph = batch.to_vector<int32_t>();  // (N,)
  const int32_t rows = static_cast<int32_t>(graph.size());
  int32_t largest = -1, largest_at = -1;
  for (int32_t i = 0; i < rows; ++i) {
    GAT_CHECK(graph[i] >= 0, op, ": batch[", i, "] = ", graph[i], " is negative");
    if (graph[i] > largest) largest = graph[i], largest_at = i;
  }
  if (size == -1) size = int64_t{largest} + 1;
  GAT_CHECK(largest < size, op, ": batch[", largest_at, "] = ", largest, " is out of range for size ", size);

  std::vector<int32_t> offsets(static_cast<size_t>(size) + 1, 0);  // (size+1,): nodes of graphs < b
  for (const int32_t b : graph) ++offsets[static_cast<size_t>(b) + 1];
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  const Segments graphs(Tensor::from_vector(offsets, {size + 1}), x.device());
  if (std::is_sorted(graph.begin(), graph.end())) return reduce(x, graphs);

  std::vector<int32_t> order(graph.size());  // (N,): the nodes in graph order, stable
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t p, int32_t q) { return graph[p] < graph[q]; });
  return reduce(index_rows(x, Tensor::from_vector(order, {int64_t{rows}})), graphs);
}

}  // namespace

Tensor global_add_pool(const Tensor& x, const Tensor& batch, int64_t size) {
  return global_pool("global_add_pool", segment_sum, x, batch, size);
}
Tensor global_mean_pool(const Tensor& x, const Tensor& batch, int64_t size) {
  return global_pool("global_mean_pool", segment_mean, x, batch, size);
}
Tensor global_max_pool(const Tensor& x, const Tensor& batch, int64_t size) {
  return global_pool("global_max_pool", segment_max, x, batch, size);
}

}  // namespace gat::ops
