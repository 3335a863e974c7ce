#include "gat/framework/ops/scatter_add.h"

#include "gat/framework/autograd.h"

namespace gat::ops {

Tensor scatter_add(const Tensor& src, const RowIndex& index, int64_t num_segments) {
  check_defined("scatter_add", "src", src);
  check_float("scatter_add", "src", src);
  GAT_CHECK(src.dim() >= 1, "scatter_add: 'src' must have at least one dimension, got ", src.describe());
  GAT_CHECK(index.index().defined(), "scatter_add: the RowIndex is empty (default-constructed)");
  GAT_CHECK(index.has_backward_plan(),
            "scatter_add: the RowIndex has no scatter plan (RowIndex::gather_only)");
  GAT_CHECK(index.device() == src.device(), "scatter_add: the index is on ", device_name(index.device()),
            " but 'src' ", src.describe(), " is not");
  GAT_CHECK(index.size() == src.size(0), "scatter_add: 'src' ", src.describe(),
            " needs one row per index entry (", index.size(), ")");
  GAT_CHECK(num_segments >= 0, "scatter_add: num_segments ", num_segments, " is negative");
  GAT_CHECK(index.max_index() < num_segments, "scatter_add: index ", index.max_index(), " at position ",
            index.max_position(), " is out of range for ", num_segments, " segments");
  const int64_t row_elems = shape_numel(Shape(src.shape().begin() + 1, src.shape().end()));  // D
  Shape out_shape = src.shape();
  out_shape[0] = num_segments;

  Tensor out = Tensor::zeros(out_shape, src.dtype(), src.device());  // (S, D): rows no index names stay 0
  kernels::scatter_rows(src, index, row_elems, out);

  const Shape& src_shape = src.shape();
  return autograd::record("scatter_add", out, {src}, [index, src_shape, row_elems](const Tensor& g) {
    Tensor grad_src = Tensor::empty(src_shape, g.dtype(), g.device(), "scatter_add backward");  // (E, D)
    kernels::gather_rows(g, index, row_elems * static_cast<int64_t>(dtype_size(g.dtype())) / 4, grad_src);
    return std::vector<Tensor>{grad_src};
  });
}

Tensor scatter_add(const Tensor& src, const Tensor& index, int64_t num_segments) {
  check_defined("scatter_add", "src", src);
  return scatter_add(src, RowIndex(index, src.device(), "scatter_add"), num_segments);
}

}  // namespace gat::ops
