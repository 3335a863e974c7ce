#include "gat/framework/io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "gat/framework/detail/json.h"
#include "gat/framework/quote.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores little-endian bytes; this code copies them as they are in memory");

namespace gat::io {

namespace {

constexpr const char* kMetadataKey = "__metadata__";

const char* st_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i32:
      return "I32";
    case DType::bf16:
      return "BF16";
    case DType::i64:
      return "I64";
  }
  return "?";
}

bool parse_st_dtype(const std::string& name, DType* dtype) {
  if (name == "F32")
    *dtype = DType::f32;
  else if (name == "F64")
    *dtype = DType::f64;
  else if (name == "I32")
    *dtype = DType::i32;
  else if (name == "BF16")
    *dtype = DType::bf16;
  else if (name == "I64")
    *dtype = DType::i64;
  else
    return false;
  return true;
}

std::string errno_text() { return std::strerror(errno); }

// Writes all of `bytes` to fd; false on any failure (errno set).
bool write_all(int fd, const char* bytes, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, bytes, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Whether JSON can hold `text` as it is.
bool valid_utf8(const std::string& text) {
  try {
    nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata) {
  check_save_path(path);  // before the host copies
  // Header and the host copies, in name order (std::map is sorted).
  nlohmann::json header = nlohmann::json::object();
  std::vector<Tensor> host;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    GAT_CHECK(valid_utf8(name), "safetensors: ", path, ": tensor name ", quote(name), " is not valid UTF-8");
    GAT_CHECK(name != kMetadataKey, "safetensors: ", path, ": a tensor may not be named '", kMetadataKey,
              "'");
    GAT_CHECK(tensor.defined(), "safetensors: ", path, ": tensor '", name, "' is undefined");
    host.push_back(tensor.to(Device::cpu));
    const uint64_t bytes = tensor.nbytes();
    header[name] = {{"dtype", st_dtype(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  for (const auto& entry : metadata)
    GAT_CHECK(valid_utf8(entry.first), "safetensors: ", path, ": metadata key ", quote(entry.first),
              " is not valid UTF-8");
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  // A value that is not UTF-8 (a dataset's path, in the bytes the file system gave) is written with
  // U+FFFD for each invalid byte: the header is JSON, which must be UTF-8.
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned

  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xff);
  OutputFile file(path, "safetensors");
  file.write(length, 8);
  file.write(text);
  for (const Tensor& t : host) file.write(t.raw_data(), t.nbytes());
  file.commit();
}

namespace {

constexpr const char* kTemporaryInfix = ".gat-";  // PATH.gat-<pid>-XXXXXX.tmp
constexpr const char* kTemporarySuffix = ".tmp";

std::string file_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What a temporary file's name starts with for an output named `base`: `base`, cut to a length
// that leaves room for ".gat-<pid>-XXXXXX.tmp" within NAME_MAX (255 bytes). A legal name of 250
// bytes made a temporary name of 270, and its output was refused as "File name too long".
std::string temporary_stem(const std::string& base) {
  constexpr size_t kNameMax = 255, kPidDigits = 10, kRandom = 7;  // "-XXXXXX"
  const size_t room = kNameMax - std::string(kTemporaryInfix).size() - kPidDigits - kRandom -
                      std::string(kTemporarySuffix).size();
  return base.size() <= room ? base : base.substr(0, room);
}

// The pid in `name` when it names a temporary file of `base` (base.gat-<pid>-XXXXXX.tmp), else 0.
pid_t temporary_owner(const std::string& name, const std::string& base) {
  const std::string prefix = temporary_stem(base) + kTemporaryInfix;
  const size_t suffix = std::string(kTemporarySuffix).size(), random = 6;
  if (name.size() < prefix.size() + 2 + random + suffix || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix, suffix, kTemporarySuffix) != 0)
    return 0;
  const std::string middle =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix);  // <pid>-XXXXXX
  const size_t dash = middle.size() - random - 1;
  if (middle[dash] != '-') return 0;
  for (size_t i = dash + 1; i < middle.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(middle[i]))) return 0;
  int64_t pid = 0;
  const auto [end, ec] = std::from_chars(middle.data(), middle.data() + dash, pid);
  if (ec != std::errc() || end != middle.data() + dash || pid <= 0 || pid > std::numeric_limits<pid_t>::max())
    return 0;
  return static_cast<pid_t>(pid);
}

bool process_runs(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// mkstemps' template for a temporary file of `path`: PATH.gat-<pid>-XXXXXX.tmp.
std::string temporary_template(const std::string& path) {
  const std::string base = file_name(path);
  return path.substr(0, path.size() - base.size()) + temporary_stem(base) + kTemporaryInfix +
         std::to_string(::getpid()) + "-XXXXXX" + kTemporarySuffix;
}

int make_temporary(std::string& name) {
  return ::mkstemps(name.data(), static_cast<int>(std::string(kTemporarySuffix).size()));
}

}  // namespace

void check_file_creatable_beside(const std::string& path, const std::string& what) {
  std::string probe = temporary_template(path);
  const int fd = make_temporary(probe);
  GAT_CHECK(fd >= 0, what, ": ", path, ": cannot create a file beside it: ", errno_text());
  ::close(fd);
  ::unlink(probe.c_str());
}

int remove_stale_temporaries(const std::string& path) {
  const std::string dir = parent_directory(path), base = file_name(path);
  DIR* listing = ::opendir(dir.c_str());
  if (!listing) return 0;  // nothing to clean where nothing can be listed
  int removed = 0;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    const pid_t owner = temporary_owner(name, base);
    if (owner == 0 || process_runs(owner)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(listing), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != ::geteuid())
      continue;
    if (::unlinkat(::dirfd(listing), name.c_str(), 0) == 0) ++removed;
  }
  ::closedir(listing);
  return removed;
}

OutputFile::OutputFile(std::string path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  check_save_path(path_, what_);
  remove_stale_temporaries(path_);
  // mkstemps creates the file exclusively (O_EXCL): it never follows a link planted there.
  tmp_ = temporary_template(path_);
  fd_ = make_temporary(tmp_);
  GAT_CHECK(fd_ >= 0, what_, ": cannot create a temporary file beside ", path_, ": ", errno_text());
  // The writer's lock, on the new file: it stays with it through the rename and until this
  // OutputFile goes (a --log, appended to for the whole run). check_save_path refuses a file so
  // held: a second run given the same --log replaced the first's, whose lines then went to a
  // file no longer in any folder, both exiting 0. Where flock is not supported, nothing is held.
  (void)::flock(fd_, LOCK_EX | LOCK_NB);
  if (::fchmod(fd_, 0644) != 0) {
    const std::string why = errno_text();
    ::close(fd_);
    ::unlink(tmp_.c_str());
    GAT_FAIL(what_, ": ", tmp_, ": ", why);
  }
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void OutputFile::write(const void* bytes, size_t n) {
  GAT_CHECK(write_all(fd_, static_cast<const char*>(bytes), n), what_, ": writing ",
            committed_ ? path_ : tmp_, " failed: ", errno_text());
}

void OutputFile::commit() {
  GAT_CHECK(!committed_, what_, ": ", path_, " is already written (commit() was called before)");
  GAT_CHECK(::fsync(fd_) == 0, what_, ": writing ", tmp_, " failed: ", errno_text());
  check_save_path(path_, what_);  // still a regular file or absent, after the time the writing took
  GAT_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, what_, ": cannot rename ", tmp_, " to ", path_, ": ",
            errno_text());
  committed_ = true;
  // Make the rename itself durable.
  const int dir = ::open(parent_directory(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  // The error_code overloads throughout: absolute("") threw a raw filesystem_error.
  std::error_code ea, eb;
  std::filesystem::path pa = std::filesystem::absolute(a, ea), pb = std::filesystem::absolute(b, eb);
  if (ea || eb) return false;
  pa = std::filesystem::weakly_canonical(pa, ea);
  pb = std::filesystem::weakly_canonical(pb, eb);
  return !ea && !eb && pa == pb;
}

bool inside_folder(const std::string& path, const std::string& dir) {
  std::error_code ec;
  std::filesystem::path at = std::filesystem::absolute(path, ec);
  if (ec) return false;
  at = std::filesystem::weakly_canonical(at, ec);
  if (ec) return false;
  for (; !at.empty(); at = at.parent_path()) {
    if (same_file(at.string(), dir)) return true;
    if (at == at.root_path()) break;
  }
  return false;
}

namespace {

// Reads n bytes at `offset` of a safetensors source into `into` (a file, or bytes in memory).
using ReadAt = std::function<void(uint64_t offset, uint64_t n, char* into)>;

// A safetensors source of `size` bytes, read through `read`: the length field and the header
// first, every check of the header against `size`, and only then each tensor's bytes, straight
// into its tensor. A file that is not what its header says (a large file of anything given to
// --load) is refused having read no more than its header.
Safetensors parse_safetensors_from(uint64_t size, const ReadAt& read, const std::string& path) {
  GAT_CHECK(size >= 8, "safetensors: ", path, ": file is ", size,
            " bytes, too short for the 8-byte header length");
  char length[8];
  read(0, 8, length);
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t{static_cast<unsigned char>(length[i])} << (8 * i);
  GAT_CHECK(header_length <= size - 8, "safetensors: ", path, ": header length ", header_length,
            " exceeds the ", size - 8, " bytes after the length field (truncated file?)");
  const uint64_t data_size = size - 8 - header_length;
  const uint64_t data_start = 8 + header_length;
  std::string header_text(static_cast<size_t>(header_length), '\0');
  read(8, header_length, header_text.data());

  // A key given twice in one object (a tensor, a metadata entry) is refused.
  std::string duplicate;
  nlohmann::json header;
  try {
    header = gat::detail::parse_json_unique_keys(header_text, duplicate);
  } catch (const nlohmann::json::exception& e) {
    GAT_FAIL("safetensors: ", path, ": bad JSON header: ", e.what());
  } catch (const gat::detail::JsonTooDeep& e) {
    GAT_FAIL("safetensors: ", path, ": bad JSON header: ", e.what());
  }
  GAT_CHECK(duplicate.empty(), "safetensors: ", path, ": the header holds the key ", quote(duplicate),
            " twice in one object (which value is meant cannot be told)");
  GAT_CHECK(header.is_object(), "safetensors: ", path, ": the header is not a JSON object");

  Safetensors result;
  struct Extent {
    uint64_t begin, end;
    std::string name;
    DType dtype;
    Shape shape;
  };
  std::vector<Extent> extents;
  for (const auto& [name, entry] : header.items()) {
    const std::string where = detail::concat("safetensors: ", path, ": tensor ", quote(name), ": ");
    if (name == kMetadataKey) {
      GAT_CHECK(entry.is_object(), "safetensors: ", path, ": '", kMetadataKey, "' is not an object");
      for (const auto& [key, value] : entry.items()) {
        GAT_CHECK(value.is_string(), "safetensors: ", path, ": metadata ", quote(key), " is not a string");
        result.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    GAT_CHECK(entry.is_object(), where, "entry is not an object");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      GAT_CHECK(entry.contains(field), where, "no '", field, "'");
    GAT_CHECK(entry.size() == 3, where, "unexpected fields besides dtype, shape, data_offsets");

    const nlohmann::json& jdtype = entry["dtype"];
    DType dtype = DType::f32;
    GAT_CHECK(jdtype.is_string() && parse_st_dtype(jdtype.get<std::string>(), &dtype), where,
              "unsupported dtype ", jdtype.dump(), " (expected F32, F64, BF16, I32 or I64)");

    const nlohmann::json& jshape = entry["shape"];
    GAT_CHECK(jshape.is_array(), where, "shape ", jshape.dump(), " is not an array");
    Shape shape;
    uint64_t numel = 1;
    for (const nlohmann::json& d : jshape) {
      GAT_CHECK(d.is_number_unsigned(), where, "shape ", jshape.dump(),
                " has an entry that is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      GAT_CHECK(v <= uint64_t{std::numeric_limits<int64_t>::max()} &&
                    (v == 0 || numel <= size / v),  // a tensor can never exceed the file
                where, "shape ", jshape.dump(), " is larger than the file");
      numel *= v;
      shape.push_back(static_cast<int64_t>(v));
    }

    const nlohmann::json& joff = entry["data_offsets"];
    GAT_CHECK(
        joff.is_array() && joff.size() == 2 && joff[0].is_number_unsigned() && joff[1].is_number_unsigned(),
        where, "data_offsets ", joff.dump(), " is not a pair of non-negative integers");
    const uint64_t begin = joff[0].get<uint64_t>(), end = joff[1].get<uint64_t>();
    GAT_CHECK(begin <= end, where, "data_offsets [", begin, ", ", end, "] are reversed");
    GAT_CHECK(end <= data_size, where, "data_offsets [", begin, ", ", end, "] run past the ", data_size,
              " data bytes in the file (truncated file?)");
    const uint64_t expected = numel * dtype_size(dtype);
    GAT_CHECK(end - begin == expected, where, "data_offsets [", begin, ", ", end, "] hold ", end - begin,
              " bytes but ", st_dtype(dtype), " ", shape_str(shape), " needs ", expected);
    extents.push_back({begin, end, name, dtype, shape});
  }

  // The tensors must tile the data area exactly: no overlaps, no holes, no trailing bytes.
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (const Extent& x : extents) {
    GAT_CHECK(x.begin >= covered, "safetensors: ", path, ": tensor ", quote(x.name), " (bytes ", x.begin,
              "..", x.end, ") overlaps tensor ", quote(previous ? *previous : ""), " (ending at ", covered,
              ")");
    GAT_CHECK(x.begin == covered, "safetensors: ", path, ": bytes ", covered, "..", x.begin,
              " before tensor ", quote(x.name), " belong to no tensor");
    covered = x.end;
    previous = &x.name;
  }
  GAT_CHECK(covered == data_size, "safetensors: ", path, ": ", data_size - covered,
            " trailing data bytes belong to no tensor");

  // The header holds: the data, exactly as much as it describes, straight into the tensors.
  for (const Extent& x : extents) {
    Tensor t = Tensor::empty(x.shape, x.dtype, Device::cpu, "safetensors tensor");
    if (x.end > x.begin) read(data_start + x.begin, x.end - x.begin, static_cast<char*>(t.raw_data()));
    result.tensors.emplace(x.name, t);
  }
  return result;
}

// A regular file opened for reading (see read_regular_file), closed when this goes.
class RegularFile {
 public:
  explicit RegularFile(const std::string& path);
  ~RegularFile() { ::close(fd_); }
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  uint64_t size() const { return size_; }
  // n bytes at `offset` into `into`, all of them, or a gat::Error naming the file.
  void read(uint64_t offset, uint64_t n, char* into) const;
  // A gat::Error when a byte follows the size fstat gave: a pseudo-file (/proc, /sys report 0
  // bytes and read as text) or a file still being written. Reading `size` bytes alone took
  // /proc/self/status as empty, without a word.
  void check_nothing_follows() const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

Safetensors load_safetensors(const std::string& path) {
  const RegularFile file(path);
  return parse_safetensors_from(
      file.size(), [&](uint64_t offset, uint64_t n, char* into) { file.read(offset, n, into); }, path);
}

Safetensors parse_safetensors(const std::string& file, const std::string& path) {
  return parse_safetensors_from(
      file.size(),
      [&](uint64_t offset, uint64_t n, char* into) {
        std::memcpy(into, file.data() + offset, static_cast<size_t>(n));
      },
      path);
}

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace

namespace {

// Whether another open file description holds the writer's lock on the regular file at `path`
// (OutputFile's, kept while it lives: a --log for the whole run). Any failure to tell (a file
// system without flock) answers false.
bool locked_by_a_writer(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  const bool locked = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the probe's own lock
  return locked;
}

}  // namespace

void check_save_path(const std::string& path, const std::string& what) {
  GAT_CHECK(!path.empty(), what, ": the path is empty");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    GAT_CHECK(S_ISREG(st.st_mode), what, ": ", path, " is ", file_kind(st.st_mode),
              "; only a regular file or a new path is written (a link is not followed)");
    GAT_CHECK(::access(path.c_str(), W_OK) == 0, what, ": ", path, ": ", errno_text());
    GAT_CHECK(!locked_by_a_writer(path), what, ": ", path,
              " is being written by another running process (a run's --log, or a file being saved); "
              "wait for it to end, or choose another path");
  } else {
    GAT_CHECK(errno == ENOENT, what, ": ", path, ": ", errno_text());
  }
  const std::string dir = parent_directory(path);
  GAT_CHECK(::stat(dir.c_str(), &st) == 0, what, ": ", path, ": the directory ", dir, ": ", errno_text());
  GAT_CHECK(S_ISDIR(st.st_mode), what, ": ", path, ": ", dir, " is not a directory");
  GAT_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, what, ": ", path, ": the directory ", dir, ": ",
            errno_text());
}

bool path_exists(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return true;
  GAT_CHECK(errno == ENOENT || errno == ENOTDIR, path, ": ", errno_text());
  return false;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  GAT_CHECK(errno == ENOENT || errno == ENOTDIR, path, ": ", errno_text());
  return false;
}

RegularFile::RegularFile(const std::string& path) : path_(path) {
  GAT_CHECK(!path.empty(), "the path of a file to read is empty");
  // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat can refuse it.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    const std::string why = errno_text();
    char target[4096];
    const ssize_t length = errno == ENOENT ? ::readlink(path.c_str(), target, sizeof target) : -1;
    GAT_CHECK(length < 0, path, ": cannot open: a symbolic link to ",
              std::string_view(target, static_cast<size_t>(std::max<ssize_t>(length, 0))),
              ", which does not exist");
    GAT_FAIL(path, ": cannot open: ", why);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd_);
    GAT_FAIL(path, ": ", why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    GAT_FAIL(path, " is ", file_kind(st.st_mode), ", not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

void RegularFile::read(uint64_t offset, uint64_t n, char* into) const {
  uint64_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, into + got, static_cast<size_t>(std::min<uint64_t>(n - got, 1u << 30)),
                              static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    GAT_CHECK(r > 0, path_, ": read error after ", offset + got, " of ", size_,
              " bytes: ", r < 0 ? errno_text() : std::string("the file shrank while it was read"));
    got += static_cast<uint64_t>(r);
  }
}

void RegularFile::check_nothing_follows() const {
  char more = 0;
  ssize_t r = 0;
  do {
    r = ::pread(fd_, &more, 1, static_cast<off_t>(size_));
  } while (r < 0 && errno == EINTR);
  GAT_CHECK(r <= 0, path_, ": has more bytes than its size, ", size_,
            ", says: a pseudo-file (/proc, /sys) or a file still being written; copy it to a regular file");
}

std::string read_regular_file(const std::string& path) {
  const RegularFile file(path);
  std::string bytes(static_cast<size_t>(file.size()), '\0');
  file.read(0, file.size(), bytes.data());
  file.check_nothing_follows();
  return bytes;
}

MetadataReader::MetadataReader(const Metadata& metadata, std::string where)
    : metadata_(metadata), where_(std::move(where)) {}

const std::string& MetadataReader::text(const std::string& key) const {
  auto it = metadata_.find(key);
  GAT_CHECK(it != metadata_.end(), where_, ": metadata has no ", quote(key));
  return it->second;
}

namespace {

// A JSON number, exactly: JSON's parser also takes white space around it (" 3"), which
// metadata_number never writes and '+3' (refused) shows is not meant.
nlohmann::json parse_number(const std::string& text, const std::string& where, const std::string& key) {
  nlohmann::json v;
  const bool bare = !text.empty() && !std::isspace(static_cast<unsigned char>(text.front())) &&
                    !std::isspace(static_cast<unsigned char>(text.back()));
  try {
    if (bare) v = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
  }
  GAT_CHECK(v.is_number(), where, ": metadata ", quote(key), " = ", quote(text), " is not a number");
  return v;
}

}  // namespace

int64_t MetadataReader::integer(const std::string& key) const {
  const nlohmann::json v = parse_number(text(key), where_, key);
  const bool fits = v.is_number_unsigned()
                        ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                        : v.is_number_integer();
  GAT_CHECK(fits, where_, ": metadata ", quote(key), " = ", text(key), " is not a 64-bit integer");
  return v.get<int64_t>();
}

uint64_t MetadataReader::unsigned_integer(const std::string& key) const {
  const nlohmann::json v = parse_number(text(key), where_, key);
  GAT_CHECK(v.is_number_unsigned(), where_, ": metadata ", quote(key), " = ", text(key),
            " is not an integer in [0, 2^64)");
  return v.get<uint64_t>();
}

double MetadataReader::number(const std::string& key) const {
  const double v = parse_number(text(key), where_, key).get<double>();
  GAT_CHECK(std::isfinite(v), where_, ": metadata ", quote(key), " = ", text(key), " is not a finite number");
  return v;
}

std::string metadata_number(double value) { return nlohmann::json(value).dump(); }
std::string metadata_number(int64_t value) { return nlohmann::json(value).dump(); }
std::string metadata_number(uint64_t value) { return nlohmann::json(value).dump(); }

namespace {

bool has_prefix(const std::string& name, const char* prefix) { return name.rfind(prefix, 0) == 0; }

// A run's state rather than the module's.
bool is_run_entry(const std::string& name) {
  return has_prefix(name, kOptimizerPrefix) || has_prefix(name, kRunStatePrefix);
}

TensorMap module_tensors(const Module& module) {
  TensorMap tensors = module.state_dict();
  for (const auto& [name, t] : tensors)
    GAT_CHECK(!is_run_entry(name), "io::save: the module's tensor '", name, "' uses a prefix ('",
              kOptimizerPrefix, "' or '", kRunStatePrefix, "') that checkpoints keep for a run's state");
  return tensors;
}

// Checks file's module entries against the module, then copies them in (Module::load_state_dict).
void copy_into(Module& module, const Safetensors& file, const std::string& path) {
  TensorMap state;
  for (const auto& [name, t] : file.tensors)
    if (!is_run_entry(name)) state.emplace(name, t);
  module.load_state_dict(state, "load_into: " + path, "the file");
}

}  // namespace

void save(const Module& module, const std::string& path, const Metadata& metadata) {
  save_safetensors(path, module_tensors(module), metadata);
}

Metadata load_into(Module& module, const std::string& path) {
  const Safetensors file = load_safetensors(path);
  load_into(module, file, path);
  return file.metadata;
}

void load_into(Module& module, const Safetensors& file, const std::string& path) {
  copy_into(module, file, path);
}

void save(const Module& module, const Optimizer& optimizer, const std::string& path, const Metadata& metadata,
          const TensorMap& run_state) {
  TensorMap tensors = module_tensors(module);
  for (auto& [name, t] : optimizer.state_dict()) tensors.emplace(kOptimizerPrefix + name, t);
  for (auto& [name, t] : run_state) tensors.emplace(kRunStatePrefix + name, t);
  save_safetensors(path, tensors, metadata);
}

Metadata load_into(Module& module, Optimizer& optimizer, const std::string& path, TensorMap* run_state) {
  Safetensors file = load_safetensors(path);
  load_into(module, optimizer, file, path);
  if (run_state)
    for (const auto& [name, t] : file.tensors)
      if (has_prefix(name, kRunStatePrefix))
        run_state->emplace(name.substr(std::string(kRunStatePrefix).size()), t);
  return file.metadata;
}

void load_into(Module& module, Optimizer& optimizer, const Safetensors& file, const std::string& path) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : file.tensors) {
    if (has_prefix(name, kOptimizerPrefix))
      state.emplace(name.substr(std::string(kOptimizerPrefix).size()), t);
  }
  GAT_CHECK(!state.empty(), "load_into: ", path, ": holds no optimiser state (no '", kOptimizerPrefix,
            "' tensors): not a checkpoint to resume from");
  // Both are checked before either changes: the module's entries first (copy_into copies only
  // after checking all), so the optimiser's are checked on a copy of its state.
  const std::map<std::string, Tensor> previous = optimizer.state_dict();
  optimizer.load_state_dict(state);
  try {
    copy_into(module, file, path);
  } catch (...) {
    optimizer.load_state_dict(previous);
    throw;
  }
}

}  // namespace gat::io

namespace gat::detail {

nlohmann::json parse_json_unique_keys(const std::string& text, std::string& duplicate) {
  duplicate.clear();
  std::vector<std::set<std::string>> open_objects;  // the keys seen so far in each enclosing object
  auto no_duplicate_keys = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth)
      throw JsonTooDeep(concat("arrays and objects nested more than ", kMaxJsonDepth, " deep"));
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end) open_objects.pop_back();
    if (event == Event::key && !open_objects.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  return nlohmann::json::parse(text, no_duplicate_keys);
}

}  // namespace gat::detail
