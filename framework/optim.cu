#include <algorithm>

#include "gat/framework/cuda_check.h"
#include "gat/framework/optim_update.h"

namespace gat::optim::cuda_impl {

namespace {

template <class T>
struct Batch {
  Slot<T> slots[kMaxSlots];
  int count;
  Rule rule;
};

// Thread k advances slot k's update counter (before the update kernel reads it).
template <class T>
__global__ void count_step_kernel(const __grid_constant__ Batch<T> batch) {
  if (threadIdx.x < batch.count) ++*batch.slots[threadIdx.x].step;
}

// blockIdx.y = the parameter; blocks along x stride over its elements. Elementwise, so the
// result does not depend on the launch shape. __grid_constant__: the slots are read from the
// kernel argument space, never copied per thread.
// The step's scalars (two double pow) are worked out once per block that has elements: per
// thread, over every block of the grid, they were most of the kernel's time on Cora.
template <class T>
__global__ void optimizer_step_kernel(const __grid_constant__ Batch<T> batch) {
  const Slot<T>& slot = batch.slots[blockIdx.y];
  if (blockIdx.x * (long long)blockDim.x >= slot.n) return;  // the whole block: no element here
  __shared__ Scalars<T> shared_scalars;
  if (threadIdx.x == 0) shared_scalars = scalars_for<T>(batch.rule, *slot.step);
  __syncthreads();
  const Scalars<T> scalars = shared_scalars;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < slot.n;
       i += (long long)gridDim.x * blockDim.x) {
    T p = slot.param[i];
    T m = slot.buffer1 ? slot.buffer1[i] : T(0), v = slot.buffer2 ? slot.buffer2[i] : T(0);
    update_element(scalars, p, slot.grad[i], m, v);
    slot.param[i] = p;
    if (slot.buffer1) slot.buffer1[i] = m;
    if (slot.buffer2) slot.buffer2[i] = v;
  }
}

template <class T>
void launch(const Rule& rule, const std::vector<Slot<T>>& slots) {
  static_assert(sizeof(Batch<T>) <= 4096, "the slots must fit in the kernel argument space");
  static_assert(kMaxSlots <= 32, "count_step_kernel runs one warp");
  for (size_t first = 0; first < slots.size(); first += kMaxSlots) {
    Batch<T> batch{};
    batch.rule = rule;
    long long largest = 1;
    for (size_t i = first; i < slots.size() && batch.count < kMaxSlots; ++i) {
      batch.slots[batch.count++] = slots[i];
      largest = std::max(largest, slots[i].n);
    }
    count_step_kernel<T><<<1, 32, 0, cuda::stream()>>>(batch);
    CUDA_CHECK_LAUNCH("count_step_kernel");
    const dim3 grid(cuda::blocks_for(largest), static_cast<unsigned>(batch.count));
    optimizer_step_kernel<T><<<grid, 256, 0, cuda::stream()>>>(batch);
    CUDA_CHECK_LAUNCH("optimizer_step_kernel");
  }
}

}  // namespace

void step(const Rule& rule, const std::vector<Slot<float>>& slots) { launch(rule, slots); }
void step(const Rule& rule, const std::vector<Slot<double>>& slots) { launch(rule, slots); }

}  // namespace gat::optim::cuda_impl
