// Fetching datasets' raw files with libcurl, each checked against a digest below and written
// atomically (a temporary file in the same folder, FILE.gat-<pid>-XXXXXX.tmp as io::OutputFile
// names it, renamed into place once verified; each fetch first removes those of its files whose
// process is gone, what a killed download left, and an older gat's .FILE.XXXXXX unchanged for ten
// minutes):
//   - the Planetoid files, each from the Planetoid project's public folder;
//   - PPI's twelve raw files, extracted from DGL's ppi.zip (what PyTorch Geometric downloads),
//     which is verified whole before anything is extracted.
// A build configured without libcurl and OpenSSL (GAT_DOWNLOAD=OFF, or AUTO where they are
// missing) says where to put a missing file instead.
//
// Environment:
//   GAT_DATASET_URL        Planetoid's base URL (default kPlanetoidBaseUrl); a file is
//                          <base>/ind.<name>.<part>
//   GAT_PPI_URL            the URL of ppi.zip (default kPpiUrl), for a mirror
//   GAT_DOWNLOAD_TIMEOUT   seconds to connect, and seconds without a byte before giving up
//                          (default 30)
//   GAT_DOWNLOAD_DEADLINE  seconds that all the downloads of one fetch_planetoid or fetch_ppi call
//                          may take together, however steadily the bytes come (default 600)
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

// PPI's raw files as PyTorch Geometric's PPI dataset downloads them: DGL's zip of the GraphSAGE
// data, split into train, valid and test (datasets/ppi.h).
inline constexpr const char* kPpiUrl = "https://data.dgl.ai/dataset/ppi.zip";
// The name it is kept under in the data folder.
inline constexpr const char* kPpiZipName = "ppi.zip";

// What a downloaded archive must be.
struct ExpectedArchive {
  int64_t bytes;
  const char* sha256;  // lower-case hex
};
// DGL's ppi.zip. Neither DGL nor PyG publishes a digest of it. This SHA-256 is the one that
// published reproduction manifests of the GraphSAGE and DGL PPI files list for it (those manifests
// pin SNAP's GraphSAGE ppi.zip as 53aeb76e...03fbd, which MLDatasets.jl pins independently), and
// the one GraphMLDatasets.jl pins for this URL. It could not be computed where this code was
// written (no network): the first real download checks it.
inline constexpr ExpectedArchive kPpiZip = {
    7088822, "1f5b2b09ac0f897fa6aa1338c64ab75a5473674cbba89380120bede8cddb2a6a"};

struct DownloadOptions {
  std::string base_url = kPlanetoidBaseUrl;
  std::string ppi_url = kPpiUrl;
  long timeout_s = 30;    // to connect, and without receiving a byte
  long deadline_s = 600;  // all the downloads of one fetch_planetoid or fetch_ppi call together
  // No file of the Planetoid project is larger; a server that sends more is refused. (An archive
  // is refused as soon as it passes its expected size.)
  int64_t max_bytes = int64_t{64} << 20;

  // The defaults with GAT_DATASET_URL, GAT_PPI_URL, GAT_DOWNLOAD_TIMEOUT and GAT_DOWNLOAD_DEADLINE
  // applied.
  static DownloadOptions from_environment();
};

// Makes sure `dir` holds the eight files of `name` (cora, citeseer or pubmed, lower case):
// every missing one is downloaded and verified; files already there are used as they are.
// `dir` is created when a download succeeds. Every failure is a gat::Error naming the file, the
// URL tried and where to put the file by hand.
void fetch_planetoid(const std::string& name, const std::string& dir,
                     const DownloadOptions& options = DownloadOptions::from_environment());

// Makes sure `dir` holds PPI's twelve raw files (ppi_raw_files(), datasets/ppi.h). Files already
// there are used as they are, and nothing is read from the network when all are. The missing ones
// are extracted from dir/ppi.zip, through temporary files, after the whole archive is checked
// against `archive` (its size and SHA-256) and each member against its CRC-32 (datasets/zip.h).
// A member may be named "ppi/<file>" (where PyG's PPI.download finds them) or "<file>", not both;
// other members are not read. When dir/ppi.zip is not there it is downloaded from
// options.ppi_url, verified and kept, and `dir` is created. A ppi.zip already there that does not
// match is refused, with the command that removes it; it is never replaced. Every failure is a
// gat::Error naming the file and the folder and saying how to get the data by hand.
void fetch_ppi(const std::string& dir, const DownloadOptions& options = DownloadOptions::from_environment(),
               const ExpectedArchive& archive = kPpiZip);

// The SHA-256 of `bytes` in lower-case hex. A gat::Error in a build without the downloader (no
// OpenSSL).
std::string sha256_hex(std::string_view bytes);

// The git blob id of `bytes`, as `git hash-object` computes it: SHA-1 of "blob <size>\0" and the
// bytes, in lower-case hex. ind.pubmed.allx is verified by it. A gat::Error in a build without
// the downloader (no OpenSSL).
std::string git_blob_id(std::string_view bytes);

}  // namespace gat
