// GAT's fused attention backward for float, compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl::csr_aggregate {
template bool gat_backward<float>(const GatAttentionBackwardArgs&);
}  // namespace gat::ops::cuda_impl::csr_aggregate
