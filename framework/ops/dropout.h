// Dropout with autograd (f32/f64, CPU and CUDA). x: any shape -> the same shape.
//
//   out[i] = x[i] * (keep[i] ? 1 / (1 - p) : 0),   keep[i] = key.keep(i), i the flat index
//
// The mask is a pure function of (key.seed, key.stream, i) (Philox, framework/rng.h): the CPU
// and CUDA backends draw the same mask. d x = g with the same mask: CUDA draws it again, the
// CPU keeps the forward's keep bits (n / 8 bytes; drawing them is most of the op's CPU time).
// When !key.active() (p == 0) dropout returns x itself. p must lie in [0, 1).
// bf16 inputs: computed in f32, the result stored in bf16: on CUDA by the kernels themselves (bf16
// storage, f32 arithmetic), on the CPU through f32 copies (docs/precision.md).
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/rng.h"
#include "gat/framework/rng_cpu.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor dropout(const Tensor& x, const DropoutKey& key);

// 1 / (1 - key.p), computed in double once per call: every dropout of the framework (dense,
// sparse, ops::elu_dropout) and both devices then scale by the same number.
double dropout_keep_scale(const DropoutKey& key);

// The kernels (docs/design.md, the op pattern), every tensor viewed flat (n,):
//   forward:  out = x * keep * keep_scale, with keep_scale = 1 / (1 - key.p) computed once by
//             the caller (both devices then scale by the same number);
//   backward: grad_x = grad_out * keep * keep_scale, the forward's mask.
// kept holds the forward's decisions where a device keeps them: the CPU fills it in the forward
// pass and reads it in the backward pass; CUDA draws the mask again and leaves it empty.
GAT_DECLARE_KERNEL_FN(dropout_forward, (const Tensor& x, const DropoutKey& key, double keep_scale,
                                        Tensor& out, KeepMask& kept))
GAT_DECLARE_KERNEL_FN(dropout_backward, (const Tensor& grad_out, const DropoutKey& key, double keep_scale,
                                         const KeepMask& kept, Tensor& grad_x))

}  // namespace gat::ops
