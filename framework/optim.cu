#include <algorithm>

#include "framework/cuda_check.h"
#include "framework/optim_update.h"

namespace gat::optim::cuda_impl {

namespace {

template <class T>
struct Batch {
  Slot<T> slots[kMaxSlots];
  int count;
};

// blockIdx.y = the parameter; blocks along x stride over its elements. Elementwise, so the
// result does not depend on the launch shape. __grid_constant__: the slots are read from the
// kernel argument space, never copied per thread.
template <class T>
__global__ void optimizer_step_kernel(const __grid_constant__ Batch<T> batch) {
  const Slot<T>& slot = batch.slots[blockIdx.y];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < slot.n;
       i += (long long)gridDim.x * blockDim.x) {
    T p = slot.param[i];
    T m = slot.buffer1 ? slot.buffer1[i] : T(0), v = slot.buffer2 ? slot.buffer2[i] : T(0);
    update_element(slot.scalars, p, slot.grad[i], m, v);
    slot.param[i] = p;
    if (slot.buffer1) slot.buffer1[i] = m;
    if (slot.buffer2) slot.buffer2[i] = v;
  }
}

template <class T>
void launch(const std::vector<Slot<T>>& slots) {
  static_assert(sizeof(Batch<T>) <= 4096, "the slots must fit in the kernel argument space");
  for (size_t first = 0; first < slots.size(); first += kMaxSlots) {
    Batch<T> batch{};
    long long largest = 1;
    for (size_t i = first; i < slots.size() && batch.count < kMaxSlots; ++i) {
      batch.slots[batch.count++] = slots[i];
      largest = std::max(largest, slots[i].n);
    }
    const dim3 grid(cuda::blocks_for(largest), static_cast<unsigned>(batch.count));
    optimizer_step_kernel<T><<<grid, 256, 0, cuda::stream()>>>(batch);
    CUDA_CHECK_LAUNCH("optimizer_step_kernel");
  }
}

}  // namespace

void step(const std::vector<Slot<float>>& slots) { launch(slots); }
void step(const std::vector<Slot<double>>& slots) { launch(slots); }

}  // namespace gat::optim::cuda_impl
