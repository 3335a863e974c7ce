// libFuzzer target for the custom dataset loader (datasets/custom.h) and the gzip/CSV text layer
// beneath it (datasets/text.h): the input becomes the six files of a dataset folder, each plain
// or gzip-compressed, and load_custom reads the folder.
//
// Input: one control byte (bit k set: file k is gzip-compressed before it is written), then the
// files' contents separated by the line "--" (node-feat, node-label, edge, train, valid, test;
// missing ones are empty). A file that itself starts with the gzip magic bytes reaches the gzip
// decoder as it is. Every input must end in a Dataset or a gat::Error; anything else (a crash, a
// sanitizer report, another exception, a timeout, -rss_limit_mb) is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "../gzip_testing.h"
#include "gat/datasets/custom.h"

namespace {

const char* const kFiles[] = {"node-feat.csv",   "node-label.csv",  "edge.csv",
                              "split/train.csv", "split/valid.csv", "split/test.csv"};

// A folder of this process's own, made once.
const std::filesystem::path& folder() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gat_csv_fuzz_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) std::abort();
    std::filesystem::create_directories(std::filesystem::path(tmpl) / "split");
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const unsigned gz = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (int k = 0; k < 6; ++k) {
    const size_t cut = rest.find("\n--\n");
    std::string text(rest.substr(0, cut));
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 4);
    const std::filesystem::path path = folder() / kFiles[k];
    const std::filesystem::path gz_path = path.string() + ".gz";
    std::filesystem::remove(path);
    std::filesystem::remove(gz_path);
    std::ofstream((gz >> k) & 1 ? gz_path : path, std::ios::binary)
        << ((gz >> k) & 1 ? gat::testing::gzip(text) : text);
  }
  try {
    gat::load_custom(folder().string());
  } catch (const gat::Error&) {
  }
  return 0;
}
