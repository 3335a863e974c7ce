// csr_softmax_aggregate's forward for float, compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl::csr_aggregate {
template void stored_forward<float>(const CsrSoftmaxAggregateForwardArgs&);
}  // namespace gat::ops::cuda_impl::csr_aggregate
