// Device dispatch for op implementations, included by the ops' source files, by
// framework/ops/kernel.h (GAT_RUN_KERNEL) and by the optimisers (framework/optim.cpp).
//
//   if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::relu(x));
//
// In a build without CUDA the call only appears inside decltype (unevaluated, so the cuda_impl
// symbol need not exist) and reaching it throws. It cannot be reached in practice, since no
// CUDA tensor can be allocated in such a build.
#pragma once

#include "gat/framework/check.h"

namespace gat::detail {
template <class R>
[[noreturn]] R no_cuda_backend() {
  GAT_FAIL("this build of gat has no CUDA backend (configure with GAT_CUDA=ON)");
}
}  // namespace gat::detail

#if GAT_WITH_CUDA
#define GAT_CUDA_CALL(...) (__VA_ARGS__)
#else
#define GAT_CUDA_CALL(...) (::gat::detail::no_cuda_backend<decltype(__VA_ARGS__)>())
#endif
