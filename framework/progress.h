// Progress of long stages on stderr, each line prefixed with the seconds since the program
// started:
//
//   [   4.12 s] synthetic: 49648438 edge pairs drawn (2.31 s)
//   [   5.02 s] graph: sorted by destination: 99296876 edges (0.90 s)
//
// Silent until a program switches it on (gat_train does, unless --quiet), so a library user
// sees nothing unasked. The library's long stages (the dataset generator, graph construction,
// copies to the device) report through Stage, and only when their work is at least
// kMinStageWork elements: small graphs such as Cora print none.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gat::progress {

constexpr int64_t kMinStageWork = 1000000;

void enable(bool on);
bool enabled();

// Seconds since the program started (since the library was loaded).
double elapsed_seconds();

// Writes "[elapsed s] text" and a newline to stderr, in one write, when enabled.
void line(const std::string& text);

// A stage of `work` elements (edges, entries) that reports its end with its duration.
class Stage {
 public:
  Stage(std::string what, int64_t work);
  // Prints "<what>: <result> (<seconds> s)" (or "<what> (<seconds> s)" without a result) when
  // enabled and the work is at least kMinStageWork.
  void done(const std::string& result = "") const;

 private:
  std::string what_;
  int64_t work_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gat::progress
