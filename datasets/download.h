// Fetching the Planetoid raw files: what is missing from a data folder is downloaded (libcurl)
// from the Planetoid project's public folder, checked against the digests below and written
// atomically (a temporary file in the same folder, renamed into place once verified). A build
// configured without libcurl and OpenSSL (GAT_DOWNLOAD=OFF, or AUTO where they are missing) says
// where to put a missing file instead.
//
// Environment:
//   GAT_DATASET_URL        base URL (default kPlanetoidBaseUrl); a file is <base>/ind.<name>.<part>
//   GAT_DOWNLOAD_TIMEOUT   seconds to connect, and seconds without a byte before giving up
//                          (default 30)
//   GAT_DOWNLOAD_DEADLINE  seconds that all the downloads of one fetch_planetoid call may take
//                          together, however steadily the bytes come (default 600)
//
// Progress lines go through progress::line (framework/progress.h): a program that has not
// switched progress on (gat_train with --quiet) prints none.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gat {

// The Planetoid project's data folder on GitHub, where PyTorch Geometric fetches them too.
inline constexpr const char* kPlanetoidBaseUrl = "https://github.com/kimiyoung/planetoid/raw/master/data";

// The eight parts of a Planetoid dataset: ind.<name>.<part>.
inline constexpr const char* kPlanetoidParts[] = {"x",  "tx",   "allx",  "y",
                                                  "ty", "ally", "graph", "test.index"};

struct DownloadOptions {
  std::string base_url = kPlanetoidBaseUrl;
  long timeout_s = 30;    // to connect, and without receiving a byte
  long deadline_s = 600;  // all the downloads of one fetch_planetoid call together
  // No file of the Planetoid project is larger; a server that sends more is refused.
  int64_t max_bytes = int64_t{64} << 20;

  // The defaults with GAT_DATASET_URL, GAT_DOWNLOAD_TIMEOUT and GAT_DOWNLOAD_DEADLINE applied.
  static DownloadOptions from_environment();
};

// Makes sure `dir` holds the eight files of `name` (cora, citeseer or pubmed, lower case):
// every missing one is downloaded and verified; files already there are used as they are.
// `dir` is created when a download succeeds. Every failure is a gat::Error naming the file, the
// URL tried and where to put the file by hand.
void fetch_planetoid(const std::string& name, const std::string& dir,
                     const DownloadOptions& options = DownloadOptions::from_environment());

// The git blob id of `bytes`, as `git hash-object` computes it: SHA-1 of "blob <size>\0" and the
// bytes, in lower-case hex. ind.pubmed.allx is verified by it. A gat::Error in a build without
// the downloader (no OpenSSL).
std::string git_blob_id(std::string_view bytes);

}  // namespace gat
