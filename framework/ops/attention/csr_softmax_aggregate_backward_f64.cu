// csr_softmax_aggregate's backward for double, compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl::csr_aggregate {
template void stored_backward<double>(const CsrSoftmaxAggregateBackwardArgs&);
}  // namespace gat::ops::cuda_impl::csr_aggregate
