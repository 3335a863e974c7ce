#include "layers/linear.h"

#include "framework/init.h"
#include "framework/ops/arithmetic.h"
#include "framework/ops/matmul.h"

namespace gat {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias_on, Generator& init,
               DType dtype) {
  GAT_CHECK(in_features > 0 && out_features > 0, "Linear: in_features ", in_features,
            " and out_features ", out_features, " must be positive");
  weight = register_parameter(
      "weight", init::glorot_uniform({in_features, out_features}, in_features, out_features, init, dtype));
  if (bias_on) bias = register_parameter("bias", init::zeros({out_features}, dtype));
}

Tensor Linear::forward(const Tensor& x) const {
  check_dim("Linear", "x", x, 2);
  GAT_CHECK(x.size(1) == in_features(), "Linear: 'x' ", x.describe(), " must have ", in_features(),
            " columns (weight ", weight.describe(), ")");
  Tensor y = ops::matmul(x, weight);  // (N, out)
  return bias.defined() ? ops::add_bias(y, bias) : y;
}

}  // namespace gat
