#include <algorithm>
#include <cstdint>

#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/detail/last_block.cuh"
#include "gat/framework/optim_update.h"

namespace gat::optim::cuda_impl {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kElementsPerThread = 4;
constexpr long long kBlockElements = kThreads * kElementsPerThread;

// Up to kMaxSlots parameters, each taking the blocks [first_block[s], first_block[s + 1]) of one
// launch (kBlockElements elements a block).
template <class T>
struct Batch {
  Slot<T> slots[kMaxSlots];
  int first_block[kMaxSlots + 1];
  int count;
  Rule rule;
};

// A block updates kBlockElements elements of one parameter. Elementwise, so the result does not
// depend on the launch shape. __grid_constant__: the slots are read from the kernel argument
// space, never copied per thread. The step's scalars (two double pow) are worked out once a
// block, from the parameter's update count + 1 (per thread they were most of the kernel's time on
// Cora); the grid's last block then advances the counts, once every block has read its own (a
// kernel of one warp did it before this one: 2 us of Cora's 120 us step). The blocks cover the
// elements and no more: a grid of as many blocks for every parameter as the largest needs was
// mostly blocks with nothing to do, and their arrivals at the one count took 4 us on Cora.
struct OptimizerStepCounts;  // last_block_to_arrive's tag
template <class T>
__global__ void __launch_bounds__(kThreads) optimizer_step_kernel(const __grid_constant__ Batch<T> batch) {
  int s = 0;  // the block's parameter; none (s == count) for the one block of a batch without elements
  while (s < batch.count && static_cast<int>(blockIdx.x) >= batch.first_block[s + 1]) ++s;
  if (s < batch.count) {  // the same for the whole block
    const Slot<T>& slot = batch.slots[s];
    // (Issuing the elements' loads before this wait was 0.5-0.9 us faster on Cora, but the compiler
    // then fused other products into multiply-adds: other bits, and Cora's 10-seed accuracy was
    // 83.14 % against 83.21.)
    __shared__ Scalars<T> shared_scalars;
    if (threadIdx.x == 0) shared_scalars = scalars_for<T>(batch.rule, *slot.step + 1);
    __syncthreads();
    const Scalars<T> scalars = shared_scalars;
    const long long first = (blockIdx.x - batch.first_block[s]) * kBlockElements + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kElementsPerThread; ++k) {
      const long long i = first + k * static_cast<long long>(kThreads);
      if (i >= slot.n) break;
      T p = slot.param[i];
      T m = slot.buffer1 ? slot.buffer1[i] : T(0), v = slot.buffer2 ? slot.buffer2[i] : T(0),
        a = slot.buffer3 ? slot.buffer3[i] : T(0);
      update_element(scalars, p, slot.grad[i], m, v, a);
      slot.param[i] = p;
      if (slot.buffer1) slot.buffer1[i] = m;
      if (slot.buffer2) slot.buffer2[i] = v;
      if (slot.buffer3) slot.buffer3[i] = a;
    }
  }
  if (gat::detail::last_block_to_arrive<OptimizerStepCounts>() && threadIdx.x < batch.count)
    ++*batch.slots[threadIdx.x].step;
}

template <class T>
void launch(const Rule& rule, const std::vector<Slot<T>>& slots) {
  static_assert(sizeof(Batch<T>) <= 4096, "the slots must fit in the kernel argument space");
  static_assert(kMaxSlots <= kThreads, "the last block's threads advance the slots' counts");
  for (size_t first = 0; first < slots.size(); first += kMaxSlots) {
    Batch<T> batch{};
    batch.rule = rule;
    long long blocks = 0;
    for (size_t i = first; i < slots.size() && batch.count < kMaxSlots; ++i) {
      batch.first_block[batch.count] = static_cast<int>(blocks);
      batch.slots[batch.count++] = slots[i];
      blocks += (slots[i].n + kBlockElements - 1) / kBlockElements;
      GAT_CHECK(blocks <= INT32_MAX, "optimizer step: parameters of more than 2^31 blocks of ",
                kBlockElements, " elements in one launch");
    }
    batch.first_block[batch.count] = static_cast<int>(blocks);
    // At least one block, whose last-block work advances the counts when no parameter has elements.
    optimizer_step_kernel<T>
        <<<static_cast<unsigned>(std::max(blocks, 1LL)), kThreads, 0, cuda::stream()>>>(batch);
    CUDA_CHECK_LAUNCH("optimizer_step_kernel");
  }
}

}  // namespace

void step(const Rule& rule, const std::vector<Slot<float>>& slots) { launch(rule, slots); }
void step(const Rule& rule, const std::vector<Slot<double>>& slots) { launch(rule, slots); }

}  // namespace gat::optim::cuda_impl
