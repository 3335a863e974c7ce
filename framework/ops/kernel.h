// One declaration per kernel (docs/design.md, the op pattern). A kernel has three entry points
// of one signature and one contract, inside namespace gat::ops:
//   kernels::NAME    (in the op's .cpp file: picks the implementation by device),
//   cpu_impl::NAME   (in the op's .cpp file) and
//   cuda_impl::NAME  (in the op's .cu file, compiled only in CUDA builds),
// all returning void. The op's header declares the three in one line, below the kernel's
// contract (its shapes, what it writes, what may be null), with the parameter list in
// parentheses:
//
//   // out = op(a) · op(b), op(x) = x^T when the flag is set; a: (M, K) or (K, M), ...
//   GAT_DECLARE_KERNEL_FN(gemm, (const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
//                                Tensor& out))
//
// A kernel with many arguments or many optional outputs takes one struct instead (its members'
// shapes and the contract in comments; inputs as Tensor handles, outputs as Tensor*, null to
// skip an optional one), and GAT_DECLARE_KERNEL(NAME, ARGS) declares the three
// `void NAME(const ARGS& args)`:
//
//   struct CsrSoftmaxArgs { const Graph* graph = nullptr; Tensor edge_scores; Tensor* weights = nullptr; };
//   GAT_DECLARE_KERNEL(csr_softmax, CsrSoftmaxArgs)
//
// Callers set the fields by name:
//
//   CsrSoftmaxArgs a;
//   a.graph = &graph;
//   a.edge_scores = scores;
//   a.weights = &weights;
//   kernels::csr_softmax(a);
//
// The kernels:: entry, in NAME.cpp, runs the implementation on the device of one tensor, either
// with GAT_CUDA_CALL (framework/ops/dispatch.h):
//
//   void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out) {
//     if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::gemm(a, transpose_a, b, transpose_b, out));
//     cpu_impl::gemm(a, transpose_a, b, transpose_b, out);
//   }
//
// or with GAT_RUN_KERNEL_FN, which writes the same from the arguments in parentheses and the tensor
// whose device picks:
//
//   void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out) {
//     GAT_RUN_KERNEL_FN(gemm, (a, transpose_a, b, transpose_b, out), out);
//   }
//
// or, for a kernel of one argument struct, with GAT_RUN_KERNEL:
//
//   void kernels::csr_softmax(const CsrSoftmaxArgs& a) { GAT_RUN_KERNEL(csr_softmax, a, a.edge_scores); }
//
// A dispatcher that does more (checks, an early return, work shared by both devices) writes that
// around the same lines. In a build without CUDA, GAT_CUDA_CALL keeps the cuda_impl call inside
// decltype (cuda_impl::NAME is not compiled there) and throws if a CUDA tensor reaches it, which
// cannot happen since no CUDA tensor can be made there.
#pragma once

#include "gat/framework/ops/dispatch.h"
#include "gat/framework/tensor.h"

#define GAT_DECLARE_KERNEL_FN(NAME, PARAMS)     \
  namespace kernels {                           \
  void NAME PARAMS;                             \
  } /* picks cpu_impl or cuda_impl by device */ \
  namespace cpu_impl {                          \
  void NAME PARAMS;                             \
  }                                             \
  namespace cuda_impl {                         \
  void NAME PARAMS;                             \
  }

#define GAT_DECLARE_KERNEL(NAME, ARGS) GAT_DECLARE_KERNEL_FN(NAME, (const ARGS& args))

// Inside namespace gat::ops: cpu_impl::NAME ARGS, or cuda_impl::NAME ARGS when the tensor ON is on
// the GPU. ARGS is the parenthesised argument list, as PARAMS is in GAT_DECLARE_KERNEL_FN.
#define GAT_RUN_KERNEL_FN(NAME, ARGS, ON) \
  ((ON).is_cuda() ? GAT_CUDA_CALL(cuda_impl::NAME ARGS) : cpu_impl::NAME ARGS)

// The same for a kernel of one argument struct: ARGS is that struct.
#define GAT_RUN_KERNEL(NAME, ARGS, ON) GAT_RUN_KERNEL_FN(NAME, (ARGS), ON)
