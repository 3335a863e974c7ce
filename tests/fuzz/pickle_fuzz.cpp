// libFuzzer target for the restricted unpickler and its converters (datasets/pickle.h).
//
// Every input must end in a parsed Document or a gat::Error; anything else (a crash, a sanitizer
// report, an uncaught exception of another type, a timeout, an allocation past -rss_limit_mb)
// is a finding. Build and run: see tests/fuzz/CMakeLists.txt.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gat/datasets/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const gat::pickle::Document doc =
        gat::pickle::Document::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.pkl");
    try {
      gat::pickle::to_dense(doc);
    } catch (const gat::Error&) {
    }
    try {
      gat::pickle::to_adjacency(doc);
    } catch (const gat::Error&) {
    }
  } catch (const gat::Error&) {
  }
  return 0;
}
