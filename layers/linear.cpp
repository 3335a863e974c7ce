#include "gat/layers/linear.h"

#include <cmath>

#include "gat/framework/init.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/sparse_matmul.h"
#include "gat/layers/dropout.h"

namespace gat {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias_on, Generator& init, DType dtype,
               LinearBiasInit bias_init, LinearWeightInit weight_init) {
  GAT_CHECK(in_features > 0 && out_features > 0, "Linear: in_features ", in_features, " and out_features ",
            out_features, " must be positive");
  checked_mul(in_features, out_features, "Linear: in_features x out_features");
  const double fan_in_bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter(
      "weight",
      weight_init == LinearWeightInit::glorot
          ? init::glorot_uniform({in_features, out_features}, in_features, out_features, init, dtype)
          : init::uniform({in_features, out_features}, fan_in_bound, init, dtype));
  if (bias_on)
    bias = register_parameter("bias", bias_init == LinearBiasInit::zeros
                                          ? init::zeros({out_features}, dtype)
                                          : init::uniform({out_features}, fan_in_bound, init, dtype));
}

Tensor features_matmul(const Features& x, const Tensor& w, const DropoutKey& x_dropout) {
  if (x.is_sparse()) return ops::sparse_dropout_matmul(x.sparse(), x_dropout, w);
  return ops::matmul(dropout_features(x, x_dropout).dense(), w);
}

Tensor Linear::forward(const Features& x, const DropoutKey& x_dropout) const {
  if (!x.is_sparse()) check_dim("Linear", "x", x.dense(), 2);
  GAT_CHECK(x.cols() == in_features(), "Linear: 'x' ", x.describe(), " must have ", in_features(),
            " columns (weight ", weight.describe(), ")");
  Tensor y = features_matmul(x, weight, x_dropout);  // (N, out)
  return bias.defined() ? ops::add_bias(y, bias) : y;
}

}  // namespace gat
