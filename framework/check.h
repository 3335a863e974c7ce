// Error handling: every failure becomes a gat::Error with what, where and why.
//
//   GAT_CHECK(cond, "matmul: inner dimensions differ: ", shape_str(a), " vs ", shape_str(b));
//   GAT_FAIL("planetoid: ", path, ": truncated at byte ", off);
//
// CUDA_CHECK / CUBLAS_CHECK live in framework/cuda_check.h (CUDA translation units only).
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

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
// Throws gat::Error(message + " [file:line]"). Control bytes (a NUL, an escape sequence from a
// hostile file) are written as \xNN; past 16 KiB a message is cut, saying so (framework/quote.h).
[[noreturn]] void fail(const char* file, int line, const std::string& message);
}  // namespace detail

// a * b, or a gat::Error "<what>: a x b overflows" when the product does not fit in int64_t.
int64_t checked_mul(int64_t a, int64_t b, const char* what);

}  // namespace gat

// Throws gat::Error("message (file:line)") when cond is false.
#define GAT_CHECK(cond, ...)                                                                  \
  do {                                                                                        \
    if (!(cond)) ::gat::detail::fail(__FILE__, __LINE__, ::gat::detail::concat(__VA_ARGS__)); \
  } while (0)

#define GAT_FAIL(...) ::gat::detail::fail(__FILE__, __LINE__, ::gat::detail::concat(__VA_ARGS__))

namespace gat {

// The values a setting may take: [lo, hi], either end open on request; printed as "[1, 1024]" or
// "(0, 1000]". A floating-point value must also be finite.
template <class T>
struct Range {
  T lo, hi;
  bool lo_open = false, hi_open = false;

  constexpr bool contains(T v) const {
    if constexpr (std::is_floating_point_v<T>)
      // NaN or infinite (constexpr, so not std::isfinite)
      if (!(v == v) || v - v != 0) return false;  // NOLINT(misc-redundant-expression)
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  std::string str() const { return detail::concat(lo_open ? "(" : "[", lo, ", ", hi, hi_open ? ")" : "]"); }
};

// Throws gat::Error("<what> <value> is outside <range>") unless range.contains(value).
template <class T>
void check_in_range(const std::string& what, T value, const Range<T>& range) {
  GAT_CHECK(range.contains(value), what, " ", value, " is outside ", range.str());
}

}  // namespace gat
