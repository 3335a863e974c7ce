// GAT's fused attention backward for double, compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl::csr_aggregate {
template bool gat_backward<double>(const GatAttentionBackwardArgs&);
}  // namespace gat::ops::cuda_impl::csr_aggregate
