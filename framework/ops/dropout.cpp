#include "framework/ops/dropout.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/autograd.h"
#include "framework/ops/dispatch.h"
#include "framework/ops/loops.h"

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

// Keep bits of the elements in blocks of four: bit k of byte b keeps element 4 b + k.
using KeepBits = std::vector<uint8_t>;

// The same on the CPU, with the keep bits drawn into `bits` (the forward) or read from it.
Tensor cpu_apply(const Tensor& x, const DropoutKey& key, KeepBits& bits, bool draw) {
  GAT_CHECK(!key.stream_base, "dropout: a key recorded for a CUDA graph reached the CPU");
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "dropout");
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();  // (n,)
    T* po = out.data<T>();      // (n,)
    const T s = static_cast<T>(keep_scale(key));
    const int64_t n = out.numel();
    detail::parallel_for((n + 3) / 4, [&](int64_t block) {  // elements [4 block, 4 block + 4)
      if (draw) bits[block] = static_cast<uint8_t>(key.keep4(static_cast<uint64_t>(block)));
      const unsigned kept = bits[block];
      for (int64_t k = 0, i = 4 * block; k < 4 && i < n; ++k, ++i)
        po[i] = DropoutKey::apply_kept(px[i], (kept >> k) & 1u, s);
    }, draw ? 16 : 4);  // a Philox block is about 16 multiply-adds
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
  auto bits = std::make_shared<KeepBits>(static_cast<size_t>((x.numel() + 3) / 4));
  Tensor out = cpu_apply(x, key, *bits, true);
  return autograd::record("dropout", out, {x}, [key, bits](const Tensor& g) {
    return std::vector<Tensor>{cpu_apply(g, key, *bits, false)};
  });
}

}  // namespace gat::ops
