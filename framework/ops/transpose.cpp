#include "gat/framework/ops/transpose.h"

#include <algorithm>
#include <cstdint>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

Tensor transposed(const Tensor& x) {
  Tensor out = Tensor::empty({x.size(1), x.size(0)}, x.dtype(), x.device(), "transpose");
  kernels::transpose(x, out);
  return out;
}

}  // namespace

Tensor transpose(const Tensor& x) {
  check_defined("transpose", "x", x);
  check_dim("transpose", "x", x, 2);
  return autograd::record("transpose", transposed(x), {x},
                          [](const Tensor& g) { return std::vector<Tensor>{transposed(g)}; });
}

namespace kernels {
void transpose(const Tensor& x, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::transpose(x, out));
  cpu_impl::transpose(x, out);
}
}  // namespace kernels

namespace cpu_impl {

namespace {

constexpr int64_t kTile = 32;

// Elements moved as raw words of their size (the transpose never looks at the values).
template <class W>
void transpose_words(const W* in, W* out, int64_t R, int64_t C) {  // in (R, C) -> out (C, R)
  const int64_t tile_rows = (R + kTile - 1) / kTile, tile_cols = (C + kTile - 1) / kTile;
  detail::parallel_for(
      tile_rows * tile_cols,
      [&](int64_t tile) {
        const int64_t r0 = tile / tile_cols * kTile, c0 = tile % tile_cols * kTile;
        const int64_t r1 = std::min(R, r0 + kTile), c1 = std::min(C, c0 + kTile);
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r) out[c * R + r] = in[r * C + c];
      },
      kTile * kTile);
}

}  // namespace

void transpose(const Tensor& x, Tensor& out) {
  const int64_t R = x.size(0), C = x.size(1);
  if (dtype_size(x.dtype()) == 8)
    transpose_words(static_cast<const uint64_t*>(x.raw_data()), static_cast<uint64_t*>(out.raw_data()), R, C);
  else if (dtype_size(x.dtype()) == 4)
    transpose_words(static_cast<const uint32_t*>(x.raw_data()), static_cast<uint32_t*>(out.raw_data()), R, C);
  else
    transpose_words(static_cast<const uint16_t*>(x.raw_data()), static_cast<uint16_t*>(out.raw_data()), R, C);
}

}  // namespace cpu_impl

}  // namespace gat::ops
