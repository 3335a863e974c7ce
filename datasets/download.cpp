#include "gat/datasets/download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <mutex>
#include <vector>

#include "gat/datasets/ppi.h"
#include "gat/datasets/zip.h"
#include "gat/framework/check.h"
#include "gat/framework/io.h"
#include "gat/framework/progress.h"
#include "gat/framework/quote.h"

#if GAT_WITH_DOWNLOAD
#include <curl/curl.h>
#include <openssl/evp.h>
#endif

namespace gat {

namespace {

// `url` as messages and progress lines show it: a password in it ("https://user:secret@host/")
// replaced by ***, as curl -v does (it went to the terminal and to logs in every error).
std::string shown_url(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t host = scheme + 3, path = url.find('/', host);
  const size_t at = url.rfind('@', path == std::string::npos ? std::string::npos : path);
  if (at == std::string::npos || at < host) return url;
  const size_t colon = url.find(':', host);
  if (colon == std::string::npos || colon > at) return url;  // a user name alone is no secret
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

// What to do when a Planetoid file cannot be had, appended to every error of fetch_planetoid.
std::string by_hand(const std::string& file, const std::string& url, const std::string& dir) {
  const std::string base = url.substr(0, url.size() - file.size());
  const std::string stem = file.substr(0, file.find('.', 4) + 1);  // "ind.<name>."
  std::string parts;
  for (const char* part : kPlanetoidParts) parts += (parts.empty() ? "" : ",") + std::string(part);
  return detail::concat(".\n  ", file, " is missing from ", dir, ". To get the data by hand, download ", stem,
                        "{", parts, "} from ", shown_url(base),
                        " into that folder, or point --data-dir (or GAT_DATA_DIR) at a folder that ",
                        "holds them.");
}

// The same for PPI's files (`missing` of them), appended to every error of fetch_ppi.
std::string ppi_by_hand(const std::vector<std::string>& missing, const std::string& url,
                        const std::string& dir) {
  const std::string more =
      missing.size() > 1 ? detail::concat(" and ", missing.size() - 1, " more of PPI's files are") : " is";
  return detail::concat(
      ".\n  ", missing.front(), more, " missing from ", dir, ". To get PPI by hand, download ",
      shown_url(url),
      " into that folder (it is verified and extracted there), or unzip it and put its files ",
      "{train,valid,test}_{graph.json,feats.npy,labels.npy,graph_id.npy} there, or point ",
      "--data-dir (or GAT_DATA_DIR) at a folder that holds them.");
}

// A data folder that exists must be a folder.
void check_is_folder(const std::string& dir, const std::string& dataset) {
  GAT_CHECK(!io::path_exists(dir) || io::is_directory(dir), "the data folder ", dir,
            " is a file, not a folder: point --data-dir (or GAT_DATA_DIR) at the folder of the ", dataset,
            " files");
}

#if GAT_WITH_DOWNLOAD
// What each file must hash to. SHA-256 of the files in the Planetoid project's data folder (its
// commit af6abf4), computed with sha256sum; each of those files is byte for byte the git blob that
// the folder's tree names. ind.pubmed.allx (over 4 MiB) could not be fetched to hash it here, so it
// is checked against that tree's git blob id instead: SHA-1 of "blob <size>\0" + the bytes, as
// `git hash-object` computes it.
struct Digest {
  enum class Kind { sha256, git_blob_sha1 };
  const char* file;
  Kind kind;
  const char* hex;
};
constexpr Digest kDigests[] = {
    {"ind.cora.x", Digest::Kind::sha256, "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab"},
    {"ind.cora.tx", Digest::Kind::sha256, "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a"},
    {"ind.cora.allx", Digest::Kind::sha256,
     "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543"},
    {"ind.cora.y", Digest::Kind::sha256, "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1"},
    {"ind.cora.ty", Digest::Kind::sha256, "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad"},
    {"ind.cora.ally", Digest::Kind::sha256,
     "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71"},
    {"ind.cora.graph", Digest::Kind::sha256,
     "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d"},
    {"ind.cora.test.index", Digest::Kind::sha256,
     "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875"},
    {"ind.citeseer.x", Digest::Kind::sha256,
     "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6"},
    {"ind.citeseer.tx", Digest::Kind::sha256,
     "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21"},
    {"ind.citeseer.allx", Digest::Kind::sha256,
     "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668"},
    {"ind.citeseer.y", Digest::Kind::sha256,
     "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924"},
    {"ind.citeseer.ty", Digest::Kind::sha256,
     "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce"},
    {"ind.citeseer.ally", Digest::Kind::sha256,
     "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95"},
    {"ind.citeseer.graph", Digest::Kind::sha256,
     "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7"},
    {"ind.citeseer.test.index", Digest::Kind::sha256,
     "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4"},
    {"ind.pubmed.x", Digest::Kind::sha256,
     "fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33"},
    {"ind.pubmed.tx", Digest::Kind::sha256,
     "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d"},
    {"ind.pubmed.allx", Digest::Kind::git_blob_sha1, "3b86bccf08111c37c632a9dd8ab63db25ea76361"},
    {"ind.pubmed.y", Digest::Kind::sha256,
     "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3"},
    {"ind.pubmed.ty", Digest::Kind::sha256,
     "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd"},
    {"ind.pubmed.ally", Digest::Kind::sha256,
     "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e"},
    {"ind.pubmed.graph", Digest::Kind::sha256,
     "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9"},
    {"ind.pubmed.test.index", Digest::Kind::sha256,
     "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5"},
};

const Digest& digest_of(const std::string& file) {
  for (const Digest& d : kDigests)
    if (file == d.file) return d;
  GAT_FAIL("fetch_planetoid: no digest is known for ", file);
}

// Lower-case hex digest of the concatenated pieces.
std::string digest_hex(const EVP_MD* md, std::initializer_list<std::string_view> pieces) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  GAT_CHECK(ctx != nullptr, "digest: out of memory");
  bool ok = EVP_DigestInit_ex(ctx, md, nullptr) == 1;
  for (std::string_view piece : pieces) ok = ok && EVP_DigestUpdate(ctx, piece.data(), piece.size()) == 1;
  ok = ok && EVP_DigestFinal_ex(ctx, out, &len) == 1;
  EVP_MD_CTX_free(ctx);
  GAT_CHECK(ok, "digest: OpenSSL's EVP digest failed");
  std::string hex(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) std::snprintf(&hex[2 * i], 3, "%02x", out[i]);
  return hex;
}

std::string digest_hex(const Digest& expected, std::string_view bytes) {
  return expected.kind == Digest::Kind::sha256 ? sha256_hex(bytes) : git_blob_id(bytes);
}

const char* kind_name(Digest::Kind kind) { return kind == Digest::Kind::sha256 ? "SHA-256" : "git blob id"; }

std::string human_bytes(double bytes) {
  char text[32];
  if (bytes < 1024)
    std::snprintf(text, sizeof text, "%.0f B", bytes);
  else if (bytes < 1024 * 1024)
    std::snprintf(text, sizeof text, "%.0f KiB", bytes / 1024);
  else
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024 * 1024));
  return text;
}

using Clock = std::chrono::steady_clock;

// One transfer's state, shared with libcurl's callbacks.
struct Transfer {
  Transfer(const std::string& file, const DownloadOptions& options, Clock::time_point deadline)
      : file(&file), options(&options), deadline(deadline) {}
  const std::string* file;
  const DownloadOptions* options;
  Clock::time_point deadline;  // of all the downloads of this fetch
  std::string body;
  bool too_large = false;
  bool stalled = false;
  bool overdue = false;
  curl_off_t received = 0;
  Clock::time_point last_byte = Clock::now();
  Clock::time_point last_report = last_byte;
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (static_cast<int64_t>(t->body.size() + bytes) > t->options->max_bytes) {
    t->too_large = true;
    return 0;  // libcurl aborts the transfer (CURLE_WRITE_ERROR)
  }
  t->body.append(data, bytes);
  return bytes;
}

// Progress lines, at most one a second; ends the transfer when no byte came for
// options->timeout_s or the deadline has passed (libcurl calls this about once a second even
// when nothing arrives).
int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  const auto clock = Clock::now();
  if (clock >= t->deadline) {
    t->overdue = true;
    return 1;  // libcurl aborts the transfer (CURLE_ABORTED_BY_CALLBACK)
  }
  if (now != t->received) {
    t->received = now;
    t->last_byte = clock;
  } else if (clock - t->last_byte >= std::chrono::seconds(t->options->timeout_s)) {
    t->stalled = true;
    return 1;  // libcurl aborts the transfer (CURLE_ABORTED_BY_CALLBACK)
  }
  if (!progress::enabled() || clock - t->last_report < std::chrono::seconds(1)) return 0;
  t->last_report = clock;
  progress::line(detail::concat("download: ", *t->file, ": ", human_bytes(static_cast<double>(now)),
                                total > 0 ? " of " + human_bytes(static_cast<double>(total)) : ""));
  return 0;
}

// The body of `url`, or a gat::Error saying why not, with `by_hand` (what to do instead) appended.
std::string download(const std::string& file, const std::string& url, const DownloadOptions& options,
                     Clock::time_point deadline, const std::string& by_hand) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  GAT_CHECK(curl != nullptr, "cannot download ", file, ": libcurl failed to start", by_hand);
  Transfer transfer(file, options, deadline);
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);  // HTTP 4xx/5xx are errors, not bodies
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, options.timeout_s);
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_bytes));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_cleanup(curl);
  if (transfer.too_large)
    GAT_FAIL("cannot download ", file, " from ", shown_url(url), ": the server sent more than ",
             human_bytes(static_cast<double>(options.max_bytes)), by_hand);
  if (transfer.overdue)
    GAT_FAIL("cannot download ", file, " from ", shown_url(url), ": the downloads took more than ",
             options.deadline_s, " s in all (GAT_DOWNLOAD_DEADLINE sets the limit)", by_hand);
  if (transfer.stalled || code == CURLE_OPERATION_TIMEDOUT)
    GAT_FAIL("cannot download ", file, " from ", shown_url(url), ": ",
             transfer.stalled ? "no data" : "no connection", " for ", options.timeout_s,
             " s (GAT_DOWNLOAD_TIMEOUT sets the limit)", by_hand);
  GAT_CHECK(code == CURLE_OK, "cannot download ", file, " from ", shown_url(url), ": ",
            *error ? error : curl_easy_strerror(code), by_hand);
  return std::move(transfer.body);
}

// Writes `bytes` to dir/file as every output is written (io::OutputFile): through a temporary
// file beside it, dir/file.gat-<pid>-XXXXXX.tmp, renamed into place, so that the file is either
// absent or whole. One that a killed download left is removed by the next fetch (below).
void write_atomically(const std::string& dir, const std::string& file, const std::string& bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  GAT_CHECK(!ec, "cannot create the data folder ", dir, ": ", ec.message());
  io::OutputFile out((fs::path(dir) / file).string(), "download");
  out.write(bytes);
  out.commit();
}

// The member of ppi.zip (at `zip_path`) that holds `file`: "ppi/<file>" or "<file>", not both.
const ZipArchive::Member& ppi_member(const ZipArchive& zip, const std::string& file,
                                     const std::string& zip_path) {
  const ZipArchive::Member* in_folder = zip.find("ppi/" + file);
  const ZipArchive::Member* at_top = zip.find(file);
  GAT_CHECK(in_folder || at_top, zip_path, ": has no member ppi/", file, " or ", file,
            " (not PPI's archive)");
  GAT_CHECK(!(in_folder && at_top), zip_path, ": has both ppi/", file, " and ", file,
            " (which one is PPI's cannot be told)");
  return in_folder ? *in_folder : *at_top;
}

// The ppi.zip at `path` (kept from a download, or put there by hand), read whole once it is
// `archive`; a gat::Error saying how to remove it when it is not.
std::string read_kept_archive(const std::string& path, const ExpectedArchive& archive) {
  const std::string remove =
      detail::concat(". Remove it to download it again (rm '", path, "'), or put DGL's ppi.zip there");
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  GAT_CHECK(!error, "cannot read ", path, " (", error.message(), ")", remove);
  GAT_CHECK(size == static_cast<uintmax_t>(archive.bytes), path, " is not DGL's ppi.zip: it has ", size,
            " bytes, not ", archive.bytes, remove);
  std::string bytes = io::read_regular_file(path);
  const std::string got = sha256_hex(bytes);
  GAT_CHECK(got == archive.sha256, path, " is not DGL's ppi.zip: its SHA-256 is ", got, ", expected ",
            archive.sha256, remove);
  return bytes;
}

// ppi.zip downloaded from `url`, once it is `archive`. Nothing is written.
std::string download_archive(const std::string& url, const std::string& dir, const DownloadOptions& options,
                             const ExpectedArchive& archive, const std::string& by_hand) {
  DownloadOptions bounded = options;
  bounded.max_bytes = archive.bytes;  // a server that sends more is refused as soon as it does
  const auto deadline = Clock::now() + std::chrono::seconds(options.deadline_s);
  progress::line(detail::concat("download: ", shown_url(url), " into ", dir));
  std::string bytes = download(kPpiZipName, url, bounded, deadline, by_hand);
  const std::string got = sha256_hex(bytes);
  GAT_CHECK(static_cast<int64_t>(bytes.size()) == archive.bytes && got == archive.sha256, "cannot download ",
            kPpiZipName, " from ", shown_url(url), ": ",
            static_cast<int64_t>(bytes.size()) != archive.bytes
                ? detail::concat(bytes.size(), " bytes, expected ", archive.bytes)
                : detail::concat("its SHA-256 is ", got, ", expected ", archive.sha256),
            " (corrupted or not DGL's ppi.zip; nothing was written)", by_hand);
  progress::line(detail::concat("download: ", kPpiZipName, ": ",
                                human_bytes(static_cast<double>(bytes.size())), ", SHA-256 verified"));
  return bytes;
}

#endif  // GAT_WITH_DOWNLOAD

// Whether `name` is a temporary file of dir/`file` as gat wrote downloads before they went through
// io::OutputFile (up to 429942c): mkstemp's ".FILE.XXXXXX", six letters or digits.
bool is_old_download_temporary(const std::string& name, const std::string& file) {
  constexpr size_t kRandom = 6;
  const std::string prefix = "." + file + ".";
  if (name.size() != prefix.size() + kRandom || name.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

// How long an old-style temporary must have been left unchanged before it is removed. Its name
// has no pid, so whether its writer runs cannot be asked; but that writer (a gat binary older than
// 429942c sharing the data folder) created it only after the whole download was in memory, wrote
// it in one go, then renamed it: it lived for the seconds a write of at most 8 MB and an fsync
// take, and every write moved its mtime. Unchanged for ten minutes, it is a killed download's. Even
// removed mid-write, nothing is lost: that old run's rename fails and it says so; no data file is
// touched.
constexpr auto kOldTemporaryAge = std::chrono::minutes(10);

// Removes dir/.FILE.XXXXXX left by an old binary's killed download: a regular file (not a link)
// of this user, unchanged for kOldTemporaryAge. Nothing renamed them since 429942c, so they stayed.
void remove_old_download_temporaries(const std::string& dir, const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_old_download_temporary(name, file)) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    const auto modified = std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec);
    if (std::chrono::system_clock::now() - modified < kOldTemporaryAge) continue;
    ::unlink(it->path().c_str());
  }
}

// Removes what a download of dir/file killed before its rename left (io::remove_stale_temporaries:
// only temporaries whose process is gone, so a download running in another process keeps its own;
// and an older binary's .FILE.XXXXXX, above). Done for every file a fetch looks at, present or
// not: the file may have been put there by hand since.
void remove_stale_downloads(const std::string& dir, const std::string& file) {
  io::remove_stale_temporaries((std::filesystem::path(dir) / file).string());
  remove_old_download_temporaries(dir, file);
}

// $variable as a number of seconds in [1, 86400], or `fallback` when it is unset or empty.
long seconds_from_environment(const char* variable, long fallback) {
  const char* env = std::getenv(variable);
  if (!env || !*env) return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(env, &end, 10);
  GAT_CHECK(errno == 0 && *end == '\0' && value > 0 && value <= 86400, variable, "=", quote(env),
            " is not a number of seconds in [1, 86400]");
  return value;
}

}  // namespace

DownloadOptions DownloadOptions::from_environment() {
  DownloadOptions options;
  if (const char* url = std::getenv("GAT_DATASET_URL"); url && *url) options.base_url = url;
  if (const char* url = std::getenv("GAT_PPI_URL"); url && *url) options.ppi_url = url;
  options.timeout_s = seconds_from_environment("GAT_DOWNLOAD_TIMEOUT", options.timeout_s);
  options.deadline_s = seconds_from_environment("GAT_DOWNLOAD_DEADLINE", options.deadline_s);
  return options;
}

void fetch_planetoid(const std::string& name, const std::string& dir, const DownloadOptions& options) {
  namespace fs = std::filesystem;
  std::string base = options.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  check_is_folder(dir, name);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.deadline_s);
  for (const char* part : kPlanetoidParts) {
    const std::string file = "ind." + name + "." + part;
    remove_stale_downloads(dir, file);
    // Anything there, even a dangling link or an unreadable file, is the file: the loader says
    // what is wrong with it.
    if (io::path_exists((fs::path(dir) / file).string())) continue;
#if GAT_WITH_DOWNLOAD
    const Digest& expected = digest_of(file);
    const std::string url = base + "/" + file;
    progress::line(detail::concat("download: ", shown_url(url), " into ", dir));
    const std::string bytes = download(file, url, options, deadline, by_hand(file, url, dir));
    const std::string got = digest_hex(expected, bytes);
    GAT_CHECK(got == expected.hex, "cannot download ", file, " from ", shown_url(url), ": its ",
              kind_name(expected.kind), " is ", got, ", expected ", expected.hex, " (", bytes.size(),
              " bytes, corrupted or not the Planetoid file; ", "nothing was written)",
              by_hand(file, url, dir));
    write_atomically(dir, file, bytes);
    progress::line(detail::concat("download: ", file, ": ", human_bytes(static_cast<double>(bytes.size())),
                                  ", ", kind_name(expected.kind), " verified"));
#else
    (void)deadline;
    GAT_FAIL("cannot download ", file,
             ": this build of gat has no downloader (libcurl and OpenSSL were not found ",
             "when it was configured)", by_hand(file, base + "/" + file, dir));
#endif
  }
}

void fetch_ppi(const std::string& dir, const DownloadOptions& options, const ExpectedArchive& archive) {
  namespace fs = std::filesystem;
  check_is_folder(dir, "PPI");
  std::vector<std::string> missing;
  remove_stale_downloads(dir, kPpiZipName);
  for (const std::string& file : ppi_raw_files()) {
    remove_stale_downloads(dir, file);
    // Anything there is the file, as for Planetoid: the loader says what is wrong with it.
    if (!io::path_exists((fs::path(dir) / file).string())) missing.push_back(file);
  }
  if (missing.empty()) return;
  const std::string by_hand = ppi_by_hand(missing, options.ppi_url, dir);
#if GAT_WITH_DOWNLOAD
  const std::string zip_path = (fs::path(dir) / kPpiZipName).string();
  std::string bytes;
  if (io::path_exists(zip_path)) {
    bytes = read_kept_archive(zip_path, archive);
  } else {
    bytes = download_archive(options.ppi_url, dir, options, archive, by_hand);
    write_atomically(dir, kPpiZipName, bytes);
  }
  // Every missing member is read and checked before the first file is written.
  const ZipArchive zip(std::move(bytes), zip_path);
  std::vector<std::string> contents;
  contents.reserve(missing.size());
  for (const std::string& file : missing) contents.push_back(zip.extract(ppi_member(zip, file, zip_path)));
  for (size_t k = 0; k < missing.size(); ++k) write_atomically(dir, missing[k], contents[k]);
  progress::line(
      detail::concat("download: extracted ", missing.size(), " files of ", kPpiZipName, " into ", dir));
#else
  (void)archive;
  GAT_FAIL("cannot get PPI's files: this build of gat has no downloader (libcurl and OpenSSL were not ",
           "found when it was configured), so it can neither download ppi.zip nor verify it", by_hand);
#endif
}

std::string sha256_hex(std::string_view bytes) {
#if GAT_WITH_DOWNLOAD
  return digest_hex(EVP_sha256(), {bytes});
#else
  (void)bytes;
  GAT_FAIL("sha256_hex: this build of gat has no downloader (OpenSSL was not found when it was configured)");
#endif
}

std::string git_blob_id(std::string_view bytes) {
#if GAT_WITH_DOWNLOAD
  const std::string header = "blob " + std::to_string(bytes.size()) + '\0';
  return digest_hex(EVP_sha1(), {header, bytes});
#else
  (void)bytes;
  GAT_FAIL("git_blob_id: this build of gat has no downloader (OpenSSL was not found when it was configured)");
#endif
}

}  // namespace gat
