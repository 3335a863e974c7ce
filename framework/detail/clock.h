// The milliseconds a training loop reports (a step's, an epoch's), read off one steady clock:
// the trainers (train/) and gat_bench time their stages with it.
#pragma once

#include <chrono>

namespace gat::detail {

using Clock = std::chrono::steady_clock;

// Milliseconds from `start` to now.
inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace gat::detail
