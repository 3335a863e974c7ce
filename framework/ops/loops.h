// CPU loop helper shared by the op implementations (included by framework/ops/*.cpp only).
#pragma once

#include <cstdint>

namespace gat::ops::detail {

// Below this many elementary steps a loop runs on the calling thread: forking costs more than it
// saves.
constexpr int64_t kParallelThreshold = 32768;

// f(i) for i in [0, n), split statically over the OpenMP threads where n * cost_per_item (about
// the elementary steps of the whole loop) is large enough. Each i is handled by exactly one
// thread, so results do not depend on the thread count.
template <class F>
void parallel_for(int64_t n, F&& f, int64_t cost_per_item = 1) {
#pragma omp parallel for schedule(static) if (n * cost_per_item > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace gat::ops::detail
