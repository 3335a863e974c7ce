// GAT's projection wh = x W read as the values and for el and er, without wh in memory: the
// kernels behind gat_linear_attention (csr_softmax_aggregate.h). With P = x W viewed (N, H, F):
//   forward:  values = dropout(P, key) (N, H, F), out1 = head_dot(P, a1), out2 = head_dot(P, a2)
//             (N, H): head_dot_pair_dropout_forward of P (head_dot.h), the same decisions
//             (flat element (n, h, f) of P) and keep_scale.
//   backward: given base = d values (N, H, F) and g1, g2 = d out1, d out2 (N, H), with
//             dP = head_dot_pair_grad_x(base, key, keep_scale, kept, a1, g1, a2, g2):
//               grad_x = dP W^T (N, K),  grad_w = x^T dP (K, H F),
//               grad_a1[h,f] = sum_n P[n,h,f] g1[n,h],  grad_a2 likewise with g2 (H, F);
//             any may be null.
// x: (N, K) f32|f64, w: (K, H F), a1, a2: (H, F), all of one dtype and device. `kept` holds the
// CPU's decisions (as dropout's). keep_bits (N, ceil(H F / 32)) i32, or null: CUDA's fused forward
// writes its decisions there (element (n, c) at bit c % 32 of word [n, c / 32]) for the backward
// to read instead of drawing them again; where it is not written (the CPU, the composition) the
// forward leaves *keep_bits undefined, and the backward given an undefined one draws.
//
// Both devices compute the definition by composition (matmul, then head_dot_pair_dropout_forward;
// head_dot_pair_grad_x, then the products), P made where it is needed. CUDA has fused kernels for
// GATConv's first layer at scale (x narrower than P: in < H F): the forward computes a tile of P
// in registers and writes only the values and the dots (x read once; P never stored), and the
// backward sums x^T [base * keep * keep_scale | g1 | g2] (K, H F + 2 H) in one pass over x and
// base, from which grad_w = x^T dP and grad_a1 = W^T . (x^T g1) by head follow in a small kernel
// (docs/kernels.md). Results agree with the composition to rounding, not bitwise.
#pragma once

#include "gat/framework/rng.h"
#include "gat/framework/rng_cpu.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

namespace kernels {
void linear_head_dot_pair_dropout_forward(const Tensor& x, const Tensor& w, const Tensor& a1,
                                          const Tensor& a2, const DropoutKey& key, double keep_scale,
                                          KeepMask& kept, Tensor& values, Tensor& out1, Tensor& out2,
                                          Tensor* keep_bits);
void linear_head_dot_pair_backward(const Tensor& x, const Tensor& w, const Tensor& a1, const Tensor& a2,
                                   const DropoutKey& key, double keep_scale, const KeepMask& kept,
                                   const Tensor& keep_bits, const Tensor& base, const Tensor& g1,
                                   const Tensor& g2, Tensor* grad_x, Tensor* grad_w, Tensor* grad_a1,
                                   Tensor* grad_a2);
}  // namespace kernels
namespace cuda_impl {  // linear_head_dot.cu: the fused kernels; false when the shapes do not fit them
// Whether the fused kernels take bf16 x of these shapes, forward and backward (N nodes, K input
// features, H heads of F): gat_linear_attention's native bf16 route on CUDA, which has no
// composition to fall back to. (Its tensors must also be 8-byte aligned, as fresh ones are.)
bool linear_head_dot_takes_bf16(int64_t N, int64_t K, int64_t H, int64_t F);
bool linear_head_dot_pair_dropout_forward(const Tensor& x, const Tensor& w, const Tensor& a1,
                                          const Tensor& a2, const DropoutKey& key, double keep_scale,
                                          Tensor& values, Tensor& out1, Tensor& out2, Tensor* keep_bits);
bool linear_head_dot_pair_backward(const Tensor& x, const Tensor& w, const Tensor& a1, const Tensor& a2,
                                   const DropoutKey& key, double keep_scale, const Tensor& keep_bits,
                                   const Tensor& base, const Tensor& g1, const Tensor& g2, Tensor& grad_w,
                                   Tensor& grad_a1, Tensor& grad_a2);
}  // namespace cuda_impl

}  // namespace gat::ops
