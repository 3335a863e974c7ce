#include "gat/framework/progress.h"

#include <atomic>
#include <cstdio>

#include "gat/framework/quote.h"

namespace gat::progress {

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point kProgramStart = Clock::now();  // static initialisation, before main
std::atomic<bool> on{false};

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

void enable(bool enabled) { on = enabled; }
bool enabled() { return on; }

double elapsed_seconds() { return seconds_between(kProgramStart, Clock::now()); }

void line(const std::string& text) {
  if (!on) return;
  std::fprintf(stderr, "[%8.2f s] %s\n", elapsed_seconds(), cut_long_words(text).c_str());
}

Stage::Stage(std::string what, int64_t work) : what_(std::move(what)), work_(work), start_(Clock::now()) {}

void Stage::done(const std::string& result) const {
  if (!on || work_ < kMinStageWork) return;
  char duration[32];
  std::snprintf(duration, sizeof duration, " (%.2f s)", seconds_between(start_, Clock::now()));
  line(what_ + (result.empty() ? "" : ": " + result) + duration);
}

}  // namespace gat::progress
