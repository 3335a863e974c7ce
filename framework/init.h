// Parameter initialisers, drawn on the host from gat::Generator (rng.h) and then moved to the
// requested device, so a seed gives the same parameters on CPU and CUDA.
#pragma once

#include <cstdint>

#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"

namespace gat::init {

// Uniform in [-bound, bound), as torch's uniform_(-bound, bound). Elements are drawn in row-major
// order.
Tensor uniform(const Shape& shape, double bound, Generator& gen, DType dtype = DType::f32,
               Device device = Device::cpu);

// uniform() with bound a = sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010), the bound of
// PyTorch's xavier_uniform_ and PyG's glorot.
Tensor glorot_uniform(const Shape& shape, int64_t fan_in, int64_t fan_out, Generator& gen,
                      DType dtype = DType::f32, Device device = Device::cpu);

// Normal with mean 0 and standard deviation `std` (torch's normal_(0, std), as nn.Embedding's
// weights): Box-Muller, one pair of uniform() draws per two elements, in row-major order.
Tensor normal(const Shape& shape, double std, Generator& gen, DType dtype = DType::f32,
              Device device = Device::cpu);

// All zeros (biases).
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);

}  // namespace gat::init
