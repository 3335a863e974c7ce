#include <cstdint>

#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/transpose.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // a block is kTile x kRowsPerPass threads

// One block per 32 x 32 tile at a time (grid-stride over tiles): a coalesced read of the tile's
// rows into shared memory (one column of padding against bank conflicts), then a coalesced write
// of its columns as rows of out.
template <class W>
__global__ void transpose_kernel(const W* __restrict__ in,  // (R, C)
                                 W* __restrict__ out,       // (C, R)
                                 long long R, long long C) {
  __shared__ W tile[kTile][kTile + 1];
  const long long tile_cols = (C + kTile - 1) / kTile, tiles = (R + kTile - 1) / kTile * tile_cols;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long r0 = t / tile_cols * kTile, c0 = t % tile_cols * kTile;
    for (int k = threadIdx.y; k < kTile; k += kRowsPerPass) {
      const long long r = r0 + k, c = c0 + threadIdx.x;
      if (r < R && c < C) tile[k][threadIdx.x] = in[r * C + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kRowsPerPass) {
      const long long c = c0 + k, r = r0 + threadIdx.x;
      if (c < C && r < R) out[c * R + r] = tile[threadIdx.x][k];
    }
    __syncthreads();  // the tile is reused by the next iteration
  }
}

template <class W>
void launch(const Tensor& x, Tensor& out) {
  const long long R = x.size(0), C = x.size(1);
  const long long tiles = (R + kTile - 1) / kTile * ((C + kTile - 1) / kTile);
  const unsigned blocks = static_cast<unsigned>(std::min<long long>(tiles, cuda::kMaxGridBlocks));
  transpose_kernel<W><<<blocks, dim3(kTile, kRowsPerPass), 0, cuda::stream()>>>(
      static_cast<const W*>(x.raw_data()), static_cast<W*>(out.raw_data()), R, C);
  CUDA_CHECK_LAUNCH("transpose_kernel");
}

}  // namespace

void transpose(const Tensor& x, Tensor& out) {
  if (x.numel() == 0) return;
  if (dtype_size(x.dtype()) == 8)
    launch<uint64_t>(x, out);
  else if (dtype_size(x.dtype()) == 4)
    launch<uint32_t>(x, out);
  else
    launch<uint16_t>(x, out);
}

}  // namespace gat::ops::cuda_impl
