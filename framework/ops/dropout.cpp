#include "gat/framework/ops/dropout.h"

#include <memory>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/loops.h"
#include "gat/framework/rng_cpu.h"

namespace gat::ops {

namespace {

double keep_scale(const DropoutKey& key) { return 1.0 / (1.0 - static_cast<double>(key.p)); }

// The masked, rescaled copy of x on CUDA: forward of x, backward of g. Both devices scale by the
// same T(1 / (1 - p)), so they agree bit for bit.
Tensor cuda_apply(const Tensor& x, const DropoutKey& key) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "dropout");
  GAT_CUDA_CALL(cuda_impl::dropout(x, key, keep_scale(key), out));
  return out;
}

// The same on the CPU, with the decisions drawn once by the forward and read again by the backward.
Tensor cpu_apply(const Tensor& x, const KeepMask& mask, const DropoutKey& key) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "dropout");
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();  // (n,)
    T* po = out.data<T>();      // (n,)
    const T s = static_cast<T>(keep_scale(key));
    detail::parallel_for(out.numel(), [&, s](int64_t i) { po[i] = DropoutKey::apply_kept(px[i], mask[i], s); });
  });
  return out;
}

}  // namespace

Tensor dropout(const Tensor& x, const DropoutKey& key) {
  check_float("dropout", "x", x);
  GAT_CHECK(key.p >= 0.0f && key.p < 1.0f, "dropout: drop probability p = ", key.p,
            " is outside [0, 1)");
  if (!key.active()) return x;
  if (x.is_cuda())
    return autograd::record("dropout", cuda_apply(x, key), {x},
                            [key](const Tensor& g) { return std::vector<Tensor>{cuda_apply(g, key)}; });
  auto mask = std::make_shared<const KeepMask>(key, x.numel());
  return autograd::record("dropout", cpu_apply(x, *mask, key), {x}, [key, mask](const Tensor& g) {
    return std::vector<Tensor>{cpu_apply(g, *mask, key)};
  });
}

}  // namespace gat::ops
