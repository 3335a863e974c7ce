// Dropout with autograd (f32/f64, CPU and CUDA). x: any shape -> the same shape.
//
//   out[i] = x[i] * (keep[i] ? 1 / (1 - p) : 0),   keep[i] = key.keep(i), i the flat index
//
// The mask is a pure function of (key.seed, key.stream, i) (Philox, framework/rng.h): the CPU
// and CUDA backends draw the same mask. d x = g with the same mask: CUDA draws it again, the
// CPU keeps the forward's keep bits (n / 8 bytes; drawing them is most of the op's CPU time).
// When !key.active() (p == 0) dropout returns x itself. p must lie in [0, 1).
#pragma once

#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor dropout(const Tensor& x, const DropoutKey& key);

namespace cuda_impl {  // dropout.cu
// out (n,) = x (n,) * keep * keep_scale, with keep_scale = 1 / (1 - key.p) computed by the caller.
void dropout(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out);
}  // namespace cuda_impl

}  // namespace gat::ops
