// Error handling: every failure becomes a gat::Error with what, where and why.
//
//   GAT_CHECK(cond, "matmul: inner dimensions differ: ", shape_str(a), " vs ", shape_str(b));
//   GAT_FAIL("planetoid: ", path, ": truncated at byte ", off);
//
// CUDA_CHECK / CUBLAS_CHECK live in framework/cuda_check.h (CUDA translation units only).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace gat {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void fail(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace gat

// Throws gat::Error("message (file:line)") when cond is false.
#define GAT_CHECK(cond, ...)                                                     \
  do {                                                                           \
    if (!(cond)) ::gat::detail::fail(__FILE__, __LINE__, ::gat::detail::concat(__VA_ARGS__)); \
  } while (0)

#define GAT_FAIL(...) ::gat::detail::fail(__FILE__, __LINE__, ::gat::detail::concat(__VA_ARGS__))
