#include "gat/framework/check.h"

#include <cstring>

namespace gat::detail {

void fail(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error(concat(message, " [", base ? base + 1 : file, ":", line, "]"));
}

}  // namespace gat::detail
