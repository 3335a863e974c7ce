// GAT's fused attention CPU backward for double, compiled apart
// (framework/ops/attention/detail/csr_softmax_aggregate_rows.h).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_rows.h"

namespace gat::ops::cpu_impl::csr_aggregate {
template void Kernels<double>::gat_backward(const GatAttentionBackwardArgs&);
}  // namespace gat::ops::cpu_impl::csr_aggregate
