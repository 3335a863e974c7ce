// Whether the calling block is the last of its grid to get here, for a kernel whose last block
// finishes what the others left (a mean over their rows, the optimiser's step counts) instead of
// a second launch. Included by CUDA sources only.
//
// Every thread of every block calls it once, after the writes (and reads) that the last block's
// work must see done. In the last block those writes are visible to loads through the L2 (__ldcg;
// not through a const __restrict__ pointer, which may compile to the non-coherent path).
// There is one count per Kernel (a tag type: the kernel that uses it), so kernels on the main and
// the side stream never share one; two launches of the same Kernel must not run concurrently (the
// framework queues each kernel's launches on one stream). The last block sets the count back to
// zero for the next launch, a replayed CUDA graph's included.
#pragma once

#include <cuda_runtime.h>

namespace gat::detail {

template <class Kernel>
__device__ __forceinline__ bool last_block_to_arrive() {
  static unsigned arrived = 0;  // global memory, zero when the module is loaded
  __shared__ bool last;
  __threadfence();  // this thread's writes, before its block is counted
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
    last = atomicAdd(&arrived, 1u) == blocks - 1;
    if (last) arrived = 0;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

}  // namespace gat::detail
