// ELU followed by dropout as one op with autograd (f32/f64, CPU and CUDA). x: any shape -> the
// same shape.
//
//   out[i] = keep[i] ? elu(x[i], alpha) * keep_scale : 0,   keep[i] = key.keep(i), i the flat index
//
// bit for bit ops::dropout(ops::elu(x, alpha), key) (activations.h, dropout.h): the same ELU, the
// same Philox mask over the flat index, the same keep_scale = 1 / (1 - p). When !key.active()
// (p == 0, or a model in eval mode) it is elu(x, alpha) (keep = 1, keep_scale = 1).
//
// One pass instead of two, and the backward needs only the output, not x: a kept element has
// elu(x) = out / keep_scale, and out > 0 exactly where x > 0; for x <= 0, elu'(x) = alpha exp(x)
// = elu(x) + alpha. So, with the derivative at x = 0 taken from the left as ops::elu does,
//
//   d x[i] = g[i] * keep[i] * (out[i] > 0 ? keep_scale : out[i] + alpha * keep_scale).
//
// (PyTorch's ELU backward from its result is the same formula.) The tensor that the next op (a
// projection) keeps anyway is then all that lives until the backward; a separate ELU would keep
// its input as well. The price: for x <= 0 the gradient's rounding error is a few ulp of
// alpha * keep_scale * g rather than of d x itself (out + alpha * keep_scale cancels as exp(x)
// gets small; below the dtype's epsilon, x < -16 in f32 or x < -36 in f64, d x is 0 or that
// rounding error instead of alpha exp(x) keep_scale g).
// CUDA draws the mask again in the backward; the CPU keeps the forward's keep bits (as dropout).
//
// Errors (gat::Error): x not f32/f64; p outside [0, 1); alpha negative or NaN (the output would
// not tell the two sides apart); a key recorded for a CUDA graph on the CPU.
// bf16 inputs: computed in f32, the result stored in bf16: on CUDA by the kernels themselves (bf16
// storage, f32 arithmetic), on the CPU through f32 copies (docs/precision.md). On CUDA the backward
// reads the bf16 output it keeps, so for x <= 0 the gradient's error is a bf16 rounding of out
// (2^-9 of |out| keep_scale g) rather than an f32 one.
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/rng.h"
#include "gat/framework/rng_cpu.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor elu_dropout(const Tensor& x, double alpha, const DropoutKey& key);

// The kernels (docs/design.md, the op pattern), every tensor viewed flat (n,), keep_scale
// computed by the caller (dropout_keep_scale, or 1 for an inactive key):
//   forward:  out = elu(x, alpha) * keep * keep_scale;
//   backward: grad_x = grad_out * keep * (out > 0 ? keep_scale : out + alpha * keep_scale),
//             from the forward's out.
// keep is 1 everywhere when !key.active(). kept holds the forward's decisions where a device
// keeps them: the CPU fills it in the forward pass (when the key is active) and reads it in the
// backward pass; CUDA draws the mask again and leaves it empty.
GAT_DECLARE_KERNEL_FN(elu_dropout_forward, (const Tensor& x, double alpha, const DropoutKey& key,
                                            double keep_scale, Tensor& out, KeepMask& kept))
GAT_DECLARE_KERNEL_FN(elu_dropout_backward,
                      (const Tensor& out, const Tensor& grad_out, double alpha, const DropoutKey& key,
                       double keep_scale, const KeepMask& kept, Tensor& grad_x))

}  // namespace gat::ops
