// libFuzzer target for the zip reader (datasets/zip.h): the input is an archive; every member it
// lists is extracted. Every input must end in extracted bytes or a gat::Error; anything else (a
// crash, a sanitizer report, another exception, a timeout, -rss_limit_mb) is a finding. Seeds:
// archives written by tests/zip_testing.h or Python's zipfile, e.g. a PPI-format folder zipped.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gat/datasets/zip.h"
#include "gat/framework/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const gat::ZipArchive archive(std::string(reinterpret_cast<const char*>(data), size), "fuzz.zip");
    for (const gat::ZipArchive::Member& member : archive.members()) {
      try {
        archive.extract(member);
      } catch (const gat::Error&) {
      }
    }
  } catch (const gat::Error&) {
  }
  return 0;
}
