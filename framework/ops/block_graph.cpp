#include "gat/framework/ops/block_graph.h"

#include <limits>

#include "gat/framework/check.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

Graph block_graph(const Tensor& row_ptr, const Tensor& col, int64_t num_src) {
  constexpr const char* op = "block_graph";
  constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
  check_dtype(op, "row_ptr", row_ptr, DType::i32);
  check_dim(op, "row_ptr", row_ptr, 1);
  check_dtype(op, "col", col, DType::i32);
  check_dim(op, "col", col, 1);
  check_same(op, "row_ptr", row_ptr, "col", col);
  GAT_CHECK(row_ptr.numel() >= 1, op, ": row_ptr is empty (needs Nd+1 entries)");
  const int64_t nd = row_ptr.numel() - 1;
  GAT_CHECK(num_src >= nd && num_src <= kMaxIndex, op, ": ", num_src, " sources for ", nd,
            " destinations (a block's destinations are its first sources: Nd <= Ns <= 2^31 - 1)");
  GAT_CHECK(col.numel() + nd <= kMaxIndex, op, ": ", col.numel(), " edges and ", nd,
            " self loops do not fit 32-bit edge ids (at most 2^31 - 1)");
  if (row_ptr.is_cuda()) return GAT_CUDA_CALL(cuda_impl::block_graph(row_ptr, col, num_src));
  return Graph::from_csr(num_src, row_ptr.to_vector<int32_t>(), col.to_vector<int32_t>()).with_self_loops();
}

}  // namespace gat::ops
