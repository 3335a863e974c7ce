#include "gat/framework/check.h"

#include <cstdio>
#include <cstring>

namespace gat {
namespace detail {

void fail(const char* file, int line, const std::string& message) {
  std::string text;
  text.reserve(message.size());
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 || c == '\n' || c == '\t') {
      text += c;
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      text += escaped;
    }
  }
  const char* base = std::strrchr(file, '/');
  throw Error(concat(text, " [", base ? base + 1 : file, ":", line, "]"));
}

}  // namespace detail

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) GAT_FAIL(what, ": ", a, " x ", b, " overflows");
  return product;
}

}  // namespace gat
