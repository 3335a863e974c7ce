// libFuzzer target for the checkpoint reader: the safetensors parser (framework/io.h) and
// gat_train's checkpoint metadata (train/checkpoint.h), which must refuse every value a model
// could not be built from.
//
// Every input must end in a checkpoint or a gat::Error; anything else (a crash, a sanitizer
// report, another exception, a timeout, -rss_limit_mb) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gat/framework/io.h"
#include "gat/train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const gat::io::Safetensors file = gat::io::parse_safetensors(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
    const gat::CheckpointInfo info = gat::CheckpointInfo::from_metadata(file.metadata, "fuzz.safetensors");
    // What was read must write back to the same values.
    if (!(gat::CheckpointInfo::from_metadata(info.to_metadata(), "round trip") == info)) __builtin_trap();
  } catch (const gat::Error&) {
  }
  return 0;
}
