// LayerNorm: torch.nn.LayerNorm(D, eps, elementwise_affine) over the last axis of its input.
// weight starts at ones and bias at zeros; without elementwise_affine there are neither.
#pragma once

#include <cstdint>

#include "gat/framework/module.h"
#include "gat/framework/tensor.h"

namespace gat {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true,
                     DType dtype = DType::f32);

  // x: (..., D) -> the same shape (ops::layer_norm)
  Tensor forward(const Tensor& x) const;

  double eps() const { return eps_; }

  Tensor weight;  // (D,), undefined without elementwise_affine
  Tensor bias;    // (D,), undefined without elementwise_affine

 private:
  double eps_;
};

}  // namespace gat
