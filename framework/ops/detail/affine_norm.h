// The tape entry that batch_norm and layer_norm share: a normalisation of x with an optional
// affine weight and bias, each (C,); and their kernels' view of an optional tensor.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "gat/framework/autograd.h"

namespace gat::ops::detail {

// The elements of an optional weight or bias: null where it is undefined.
template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Records `out` with the inputs x, weight and bias (the last two only where defined). Its
// backward allocates grad_x like x and a (C,) gradient for each defined one of weight and bias,
// calls backward(g, grad_x, grad_weight, grad_bias) with null for an undefined one, and returns
// the gradients in the inputs' order. Allocations are named after `op` ("OP backward",
// "OP d weight", "OP d bias").
template <class Backward>
Tensor record_affine_norm(const char* op, Tensor out, const Tensor& x, const Tensor& weight,
                          const Tensor& bias, int64_t C, Backward backward) {
  const bool has_weight = weight.defined(), has_bias = bias.defined();
  std::vector<Tensor> inputs{x};
  if (has_weight) inputs.push_back(weight);
  if (has_bias) inputs.push_back(bias);
  const std::string name = op;
  const Shape shape = x.shape();
  const DType dtype = x.dtype();
  const Device device = x.device();
  return autograd::record(op, std::move(out), inputs,
                          [name, shape, dtype, device, C, has_weight, has_bias, backward](const Tensor& g) {
                            Tensor grad_x = Tensor::empty(shape, dtype, device, (name + " backward").c_str());
                            Tensor grad_weight, grad_bias;
                            if (has_weight)
                              grad_weight = Tensor::empty({C}, dtype, device, (name + " d weight").c_str());
                            if (has_bias)
                              grad_bias = Tensor::empty({C}, dtype, device, (name + " d bias").c_str());
                            backward(g, grad_x, has_weight ? &grad_weight : nullptr,
                                     has_bias ? &grad_bias : nullptr);
                            std::vector<Tensor> grads{grad_x};
                            if (has_weight) grads.push_back(grad_weight);
                            if (has_bias) grads.push_back(grad_bias);
                            return grads;
                          });
}

}  // namespace gat::ops::detail
