// One kernel interface: a kernel's arguments are declared once, in a struct, and its three entry
// points take that struct (docs/design.md, the op pattern).
//
// In the op's header, the struct (its members' shapes and the kernel's contract in comments;
// inputs as Tensor handles, outputs as Tensor*, null to skip an optional one) and one line:
//
//   struct CsrSoftmaxArgs { const Graph* graph = nullptr; Tensor edge_scores; Tensor* weights = nullptr; };
//   GAT_DECLARE_KERNEL(csr_softmax, CsrSoftmaxArgs)
//
// which declares, inside namespace gat::ops,
//   kernels::csr_softmax    (NAME.cpp: picks the implementation by device),
//   cpu_impl::csr_softmax   (NAME.cpp) and
//   cuda_impl::csr_softmax  (NAME.cu, compiled only in CUDA builds),
// all `void csr_softmax(const CsrSoftmaxArgs&)`, one signature and one contract for the three.
// Callers set the fields by name:
//
//   CsrSoftmaxArgs a;
//   a.graph = &graph;
//   a.edge_scores = scores;
//   a.weights = &weights;
//   kernels::csr_softmax(a);
//
// The kernels:: entry, in NAME.cpp, is one line where it only dispatches:
//
//   void kernels::csr_softmax(const CsrSoftmaxArgs& a) { GAT_RUN_KERNEL(csr_softmax, a, a.edge_scores); }
//
// (run on the device of the tensor named last); a kernel whose dispatcher does more (checks, an
// early return, work shared by both devices) writes that around the same GAT_RUN_KERNEL line.
// In a build without CUDA, GAT_RUN_KERNEL takes no address of cuda_impl::NAME (which is not
// compiled there) and throws if a CUDA tensor reaches it, which cannot happen since no CUDA
// tensor can be made there (as GAT_CUDA_CALL, framework/ops/dispatch.h).
#pragma once

#include "gat/framework/ops/dispatch.h"
#include "gat/framework/tensor.h"

#define GAT_DECLARE_KERNEL(NAME, ARGS)                   \
  namespace kernels {                                    \
  void NAME(const ARGS& args);                           \
  } /* picks cpu_impl or cuda_impl by device */          \
  namespace cpu_impl {                                   \
  void NAME(const ARGS& args);                           \
  }                                                      \
  namespace cuda_impl {                                  \
  void NAME(const ARGS& args);                           \
  }

namespace gat::ops::detail {

template <class Args>
using KernelImpl = void (*)(const Args&);

// Runs cuda (null in a build without CUDA) when `on` is on the GPU, else cpu.
template <class Args>
void run_kernel(const Tensor& on, const Args& args, KernelImpl<Args> cpu, KernelImpl<Args> cuda) {
  if (!on.is_cuda()) return cpu(args);
  if (!cuda) ::gat::detail::no_cuda_backend<void>();
  cuda(args);
}

}  // namespace gat::ops::detail

#if GAT_WITH_CUDA
#define GAT_CUDA_IMPL(FN) (&(FN))
#else
#define GAT_CUDA_IMPL(FN) (static_cast<decltype(&FN)>(nullptr))
#endif

// Inside namespace gat::ops: cpu_impl::NAME(args), or cuda_impl::NAME(args) when the tensor ON is
// on the GPU.
#define GAT_RUN_KERNEL(NAME, ARGS, ON) \
  ::gat::ops::detail::run_kernel((ON), (ARGS), &cpu_impl::NAME, GAT_CUDA_IMPL(cuda_impl::NAME))
