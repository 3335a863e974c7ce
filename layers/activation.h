// Activations as modules, for Sequential: each forward(x) is the op of the same name
// (framework/ops/activations.h, framework/ops/unary.h), with PyTorch's defaults; x: any shape ->
// the same shape. No parameters.
#pragma once

#include "gat/framework/module.h"
#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/unary.h"
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

class ReLU6 : public Module {
 public:
  Tensor forward(const Tensor& x) const { return ops::relu6(x); }
};

class GELU : public Module {
 public:
  explicit GELU(ops::GeluApproximate approximate = ops::GeluApproximate::none) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) const { return ops::gelu(x, approximate_); }

 private:
  ops::GeluApproximate approximate_;
};

class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) const { return ops::silu(x); }
};

class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0) : beta_(beta), threshold_(threshold) {}
  Tensor forward(const Tensor& x) const { return ops::softplus(x, beta_, threshold_); }

 private:
  double beta_, threshold_;
};

}  // namespace gat
