// GAT's fused attention forward for double, without an edge term, compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl::csr_aggregate {
template void gat_forward<double, false>(const GatAttentionForwardArgs&);
}  // namespace gat::ops::cuda_impl::csr_aggregate
