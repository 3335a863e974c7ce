// Activations as modules, for Sequential: each forward(x) is the op of the same name
// (framework/ops/activations.h); x: any shape -> the same shape. No parameters.
#pragma once

#include "gat/framework/module.h"
#include "gat/framework/ops/activations.h"
#include "gat/framework/tensor.h"

namespace gat {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) const { return ops::relu(x); }
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope_(negative_slope) {}
  Tensor forward(const Tensor& x) const { return ops::leaky_relu(x, negative_slope_); }

 private:
  double negative_slope_;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : alpha_(alpha) {}
  Tensor forward(const Tensor& x) const { return ops::elu(x, alpha_); }

 private:
  double alpha_;
};

}  // namespace gat
