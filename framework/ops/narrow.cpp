#include "gat/framework/ops/narrow.h"

#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/concat.h"
#include "gat/framework/ops/reshape.h"

namespace gat::ops {

namespace {

// `axis` of x counted from the front; throws naming the op.
int64_t axis_of(const char* op, const Tensor& x, int64_t axis) {
  const int64_t a = axis < 0 ? axis + x.dim() : axis;
  GAT_CHECK(a >= 0 && a < x.dim(), op, ": axis ", axis, " is out of range for 'x' ", x.describe());
  return a;
}

// The slice [start, start + length) along axis a of `whole` (outer, L, inner) copied to or from
// `part` (outer, length, inner).
void copy_slice(const Tensor& whole, int64_t a, int64_t start, const Tensor& part, bool into_part) {
  if (part.numel() == 0) return;
  const Shape& shape = whole.shape();
  const size_t outer = static_cast<size_t>(shape_numel(Shape(shape.begin(), shape.begin() + a)));
  const size_t inner_bytes =
      static_cast<size_t>(shape_numel(Shape(shape.begin() + a + 1, shape.end()))) * dtype_size(whole.dtype());
  const size_t whole_pitch = static_cast<size_t>(shape[static_cast<size_t>(a)]) * inner_bytes;
  const size_t part_pitch = static_cast<size_t>(part.size(a)) * inner_bytes;
  char* w = static_cast<char*>(whole.raw_data()) + static_cast<size_t>(start) * inner_bytes;
  char* p = static_cast<char*>(part.raw_data());
  if (into_part)
    kernels::copy_rows(whole.device(), p, part_pitch, w, whole_pitch, part_pitch, outer);
  else
    kernels::copy_rows(whole.device(), w, whole_pitch, p, part_pitch, part_pitch, outer);
}

}  // namespace

Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t length) {
  check_defined("narrow", "x", x);
  const int64_t a = axis_of("narrow", x, axis);
  const int64_t L = x.size(a);
  GAT_CHECK(start >= 0 && start <= L, "narrow: start ", start, " is out of range for axis ", axis, " of 'x' ",
            x.describe(), " (0 to ", L, ")");
  GAT_CHECK(length >= 0 && length <= L - start, "narrow: length ", length, " from start ", start,
            " does not fit axis ", axis, " of 'x' ", x.describe(), " (", L, " long)");
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(a)] = length;
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device(), "narrow");
  copy_slice(x, a, start, out, true);
  const Shape in_shape = x.shape();
  return autograd::record("narrow", out, {x}, [in_shape, a, start](const Tensor& g) {
    Tensor grad_x = Tensor::zeros(in_shape, g.dtype(), g.device());
    copy_slice(grad_x, a, start, g, false);
    return std::vector<Tensor>{grad_x};
  });
}

Tensor select(const Tensor& x, int64_t axis, int64_t index) {
  check_defined("select", "x", x);
  const int64_t a = axis_of("select", x, axis);
  const int64_t L = x.size(a);
  GAT_CHECK(index >= -L && index < L, "select: index ", index, " is out of range for axis ", axis, " of 'x' ",
            x.describe(), " (", L, " long)");
  Shape out_shape = x.shape();
  out_shape.erase(out_shape.begin() + a);
  return reshape(narrow(x, a, index < 0 ? index + L : index, 1), out_shape);
}

}  // namespace gat::ops
