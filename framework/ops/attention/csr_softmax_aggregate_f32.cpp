// csr_softmax_aggregate's CPU forward and backward, and csr_softmax, for float, compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_rows.h).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_rows.h"

namespace gat::ops::cpu_impl::csr_aggregate {
template void Kernels<float>::stored_forward(const CsrSoftmaxAggregateForwardArgs&);
template void Kernels<float>::stored_backward(const CsrSoftmaxAggregateBackwardArgs&);
template void Kernels<float>::softmax(const CsrSoftmaxArgs&);
}  // namespace gat::ops::cpu_impl::csr_aggregate
