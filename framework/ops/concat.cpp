#include "gat/framework/ops/concat.h"

#include <cstring>
#include <string>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/reshape.h"

namespace gat::ops {

namespace cpu_impl {

void copy_rows(Device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
               size_t rows) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  detail::parallel_for(
      static_cast<int64_t>(rows),
      [&](int64_t r) { std::memcpy(d + r * dst_pitch, s + r * src_pitch, row_bytes); },
      static_cast<int64_t>(row_bytes / sizeof(double)));
}

}  // namespace cpu_impl

namespace kernels {

void copy_rows(Device device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
               size_t row_bytes, size_t rows) {
  if (row_bytes == 0 || rows == 0) return;
  if (device == Device::cuda)
    return GAT_CUDA_CALL(cuda_impl::copy_rows(device, dst, dst_pitch, src, src_pitch, row_bytes, rows));
  cpu_impl::copy_rows(device, dst, dst_pitch, src, src_pitch, row_bytes, rows);
}

}  // namespace kernels

Tensor concat(const std::vector<Tensor>& inputs, int64_t axis) {
  GAT_CHECK(!inputs.empty(), "concat: no inputs");
  const Tensor& first = inputs[0];
  check_defined("concat", "inputs[0]", first);
  const int64_t dim = first.dim();
  const int64_t a = axis < 0 ? axis + dim : axis;
  GAT_CHECK(a >= 0 && a < dim, "concat: axis ", axis, " is out of range for inputs[0] ", first.describe());

  Shape out_shape = first.shape();
  out_shape[static_cast<size_t>(a)] = 0;
  std::vector<int64_t> lengths;  // L_k along the axis
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string name = "inputs[" + std::to_string(k) + "]";
    check_same("concat", "inputs[0]", first, name.c_str(), inputs[k]);
    Shape expected = first.shape();
    const bool same_rank = inputs[k].dim() == dim;
    if (same_rank) expected[static_cast<size_t>(a)] = inputs[k].size(a);
    GAT_CHECK(same_rank && inputs[k].shape() == expected, "concat: ", name, " ", inputs[k].describe(),
              " does not match inputs[0] ", first.describe(), " outside axis ", a);
    lengths.push_back(inputs[k].size(a));
    out_shape[static_cast<size_t>(a)] += lengths.back();
  }

  const size_t outer = static_cast<size_t>(shape_numel(Shape(out_shape.begin(), out_shape.begin() + a)));
  const size_t inner_bytes =
      static_cast<size_t>(shape_numel(Shape(out_shape.begin() + a + 1, out_shape.end()))) *
      dtype_size(first.dtype());
  const size_t out_pitch = static_cast<size_t>(out_shape[static_cast<size_t>(a)]) * inner_bytes;
  const Device device = first.device();

  Tensor out = Tensor::empty(out_shape, first.dtype(), device, "concat");
  size_t offset = 0;  // bytes into an output row
  for (size_t k = 0; k < inputs.size(); ++k) {
    const size_t bytes = static_cast<size_t>(lengths[k]) * inner_bytes;
    kernels::copy_rows(device, static_cast<char*>(out.raw_data()) + offset, out_pitch,
                       static_cast<const char*>(inputs[k].raw_data()), bytes, bytes, outer);
    offset += bytes;
  }

  std::vector<Shape> shapes;
  std::vector<bool> needs_grad;
  for (const Tensor& t : inputs) {
    shapes.push_back(t.shape());
    needs_grad.push_back(t.requires_grad());
  }
  return autograd::record("concat", out, inputs, [=](const Tensor& g) {
    std::vector<Tensor> grads;
    size_t g_offset = 0;
    for (size_t k = 0; k < shapes.size(); ++k) {
      const size_t bytes = static_cast<size_t>(lengths[k]) * inner_bytes;
      Tensor grad;
      if (needs_grad[k]) {
        grad = Tensor::empty(shapes[k], g.dtype(), g.device(), "concat backward");
        kernels::copy_rows(device, static_cast<char*>(grad.raw_data()), bytes,
                           static_cast<const char*>(g.raw_data()) + g_offset, out_pitch, bytes, outer);
      }
      grads.push_back(grad);
      g_offset += bytes;
    }
    return grads;
  });
}

Tensor stack(const std::vector<Tensor>& inputs, int64_t axis) {
  GAT_CHECK(!inputs.empty(), "stack: no inputs");
  check_defined("stack", "inputs[0]", inputs[0]);
  const Shape& shape = inputs[0].shape();
  const int64_t rank = inputs[0].dim() + 1;  // the output's
  const int64_t a = axis < 0 ? axis + rank : axis;
  GAT_CHECK(a >= 0 && a < rank, "stack: axis ", axis, " is out of range for inputs of ",
            inputs[0].describe());
  Shape with_axis = shape;
  with_axis.insert(with_axis.begin() + a, 1);
  std::vector<Tensor> parts;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string name = "inputs[" + std::to_string(k) + "]";
    check_defined("stack", name.c_str(), inputs[k]);
    GAT_CHECK(inputs[k].shape() == shape, "stack: ", name, " ", inputs[k].describe(),
              " does not match inputs[0] ", inputs[0].describe());
    parts.push_back(reshape(inputs[k], with_axis));
  }
  return concat(parts, a);
}

}  // namespace gat::ops
