// GAT's fused attention backward for bf16 rows (computed in f32), compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl::csr_aggregate {
template bool gat_backward<bf16>(const GatAttentionBackwardArgs&);
}  // namespace gat::ops::cuda_impl::csr_aggregate
