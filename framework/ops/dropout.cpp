#include "framework/ops/dropout.h"

#include "framework/autograd.h"
#include "framework/ops/dispatch.h"
#include "framework/ops/loops.h"

namespace gat::ops {

namespace {

// The masked, rescaled copy of x: forward of x, backward of g. Both devices scale by the same
// T(1 / (1 - p)), so they agree bit for bit.
Tensor apply_mask(const Tensor& x, const DropoutKey& key) {
  const double keep_scale = 1.0 / (1.0 - static_cast<double>(key.p));
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "dropout");
  if (x.is_cuda()) {
    GAT_CUDA_CALL(cuda_impl::dropout(x, key, keep_scale, out));
    return out;
  }
  GAT_CHECK(!key.stream_base, "dropout: a key recorded for a CUDA graph reached the CPU");
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();  // (n,)
    T* po = out.data<T>();      // (n,)
    const T s = static_cast<T>(keep_scale);
    const int64_t n = out.numel();
    detail::parallel_for((n + 3) / 4, [&](int64_t block) {  // elements [4 block, 4 block + 4)
      const unsigned kept = key.keep4(static_cast<uint64_t>(block));
      for (int64_t k = 0, i = 4 * block; k < 4 && i < n; ++k, ++i)
        po[i] = DropoutKey::apply_kept(px[i], (kept >> k) & 1u, s);
    }, 16);  // a Philox block is about 16 multiply-adds
  });
  return out;
}

}  // namespace

Tensor dropout(const Tensor& x, const DropoutKey& key) {
  check_float("dropout", "x", x);
  GAT_CHECK(key.p >= 0.0f && key.p < 1.0f, "dropout: drop probability p = ", key.p,
            " is outside [0, 1)");
  if (!key.active()) return x;
  return autograd::record("dropout", apply_mask(x, key), {x},
                          [key](const Tensor& g) { return std::vector<Tensor>{apply_mask(g, key)}; });
}

}  // namespace gat::ops
