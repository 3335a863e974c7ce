#include "gat/framework/ops/reshape.h"

#include "gat/framework/autograd.h"

namespace gat::ops {

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined("reshape", "x", x);
  Tensor out;
  try {
    out = x.view(shape);
  } catch (const Error& e) {
    GAT_FAIL("reshape: 'x' ", x.describe(), ": ", e.what());
  }
  const Shape& in_shape = x.shape();
  return autograd::record("reshape", out, {x},
                          [in_shape](const Tensor& g) { return std::vector<Tensor>{g.view(in_shape)}; });
}

}  // namespace gat::ops
