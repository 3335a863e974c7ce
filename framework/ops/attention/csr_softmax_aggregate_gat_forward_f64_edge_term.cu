// GAT's fused attention forward for double, with an edge term, compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl::csr_aggregate {
template void gat_forward<double, true>(const GatAttentionForwardArgs&);
}  // namespace gat::ops::cuda_impl::csr_aggregate
