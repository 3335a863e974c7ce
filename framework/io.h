// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes: header length L, little-endian u64]
//   [L bytes: JSON {"NAME": {"dtype": "F32"|"F64"|"I32", "shape": [...],
//                            "data_offsets": [begin, end]}, ...,
//                   "__metadata__": {"key": "value", ...}}]
//   [raw little-endian tensor bytes; offsets are relative to the end of the header]
//
// Saving writes names sorted, tensors back to back in that order, through an OutputFile (below):
// a crash leaves either the old file or the new one, never half of one, and the temporary file
// that a killed process leaves is removed by the next save to the same path. PATH must be new or
// a regular file: a symbolic link, directory, device or FIFO is refused (check_save_path), never
// replaced. Tensor names and metadata keys must be valid UTF-8 (JSON's encoding); a metadata value
// that is not (a path in a file system's bytes) is written with U+FFFD for each invalid byte.
// Loading reads regular files only, validates everything, and every error names the file and,
// where there is one, the tensor.
#pragma once

#include <map>
#include <string>

#include "gat/framework/module.h"
#include "gat/framework/optim.h"
#include "gat/framework/tensor.h"

namespace gat::io {

using TensorMap = std::map<std::string, Tensor>;      // sorted by name
using Metadata = std::map<std::string, std::string>;  // the "__metadata__" object

struct Safetensors {
  TensorMap tensors;  // host tensors
  Metadata metadata;
};

// Tensors may live on any device (they are copied to the host to be written).
void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata = {});
Safetensors load_safetensors(const std::string& path);
// The same from the file's bytes; `name` starts every error message.
Safetensors parse_safetensors(const std::string& bytes, const std::string& name);

// Throws a gat::Error starting with `what` and naming `path` unless a file can be saved there:
// `path` is not empty and either names a regular file (not a symbolic link) that no OutputFile of
// a running process holds, or does not exist in an existing, writable directory. OutputFile
// checks it; programs call it before long work that ends in a save.
void check_save_path(const std::string& path, const std::string& what = "save");

// A file's next content, written the one way every output of the library and of gat_train is:
// PATH is checked (check_save_path) when the OutputFile is made, the bytes go to a new temporary
// file beside it, PATH.gat-<pid>-XXXXXX.tmp (created exclusively, so never through a link planted
// there; <pid> is the writer's process), and commit() fsyncs it and renames it over PATH (PATH
// checked again first, then the directory fsynced). Until commit() PATH keeps its old content;
// writes after commit() append to PATH itself (a log that grows line by line). Destroyed before
// commit(), it removes its temporary file. A process killed before then leaves it: making an
// OutputFile for PATH first removes those (remove_stale_temporaries). While it lives it holds an
// exclusive flock on its file, the temporary and then PATH, so that another OutputFile for PATH
// (another run given the same --log) is refused (check_save_path) instead of replacing a file
// still being appended to. Errors start with `what` (e.g. "--log") and name the file.
class OutputFile {
 public:
  OutputFile(std::string path, std::string what);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* bytes, size_t n);
  void write(const std::string& text) { write(text.data(), text.size()); }
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_, what_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Creates a temporary file beside `path`, named as OutputFile names its own (so that one left by a
// kill is cleaned up as theirs are), and removes it. A folder that access() calls writable yet
// refuses a new file (a file system out of inodes, sysfs) is then refused before any work, not
// when the output is written at its end. Errors start with `what` and name the path.
void check_file_creatable_beside(const std::string& path, const std::string& what);

// Removes the temporary files of PATH (PATH.gat-<pid>-XXXXXX.tmp) whose process <pid> no longer
// runs: what a writer killed before its commit() left. Only regular files (not links) of this
// user that have exactly that name go; a live process's file stays. Returns how many went.
int remove_stale_temporaries(const std::string& path);

// Whether a and b are the same file: the same inode where both exist (links followed), else the
// same absolute path once the existing folders in it are resolved.
bool same_file(const std::string& a, const std::string& b);
// Whether `path` is the folder `dir` or lies inside it (compared as same_file compares).
bool inside_folder(const std::string& path, const std::string& dir);

// The whole content of a regular file (a symbolic link is followed to its target). A directory,
// a device (/dev/zero), a FIFO or a socket is refused with a gat::Error naming the path and what
// it is, before anything is read; so is a read error, and a file that cannot be opened says why
// (errno's reason: permission denied, no such file, a symbolic link to a missing target). So is a
// file with more bytes than its size says (a /proc or /sys pseudo-file, a file being written).
std::string read_regular_file(const std::string& path);

// Whether anything is at `path`, a symbolic link not followed (a dangling link is something):
// false when nothing is (ENOENT, or ENOTDIR: a component is a file); any other failure (permission
// denied on a folder on the way, a name too long) is a gat::Error naming the path and the reason.
// Loaders ask this, not whether a file can be read, so that an unreadable file is an error, never
// taken for an absent one.
bool path_exists(const std::string& path);

// Whether `path` is a directory, a symbolic link followed: false when nothing is there (ENOENT,
// ENOTDIR) or something else is; any other failure (a loop of links, a name too long) is a
// gat::Error naming the path and the reason, never std::filesystem's exception, which
// std::filesystem::is_directory(path) throws for it.
bool is_directory(const std::string& path);

// Typed reads of checkpoint metadata: numbers are JSON numbers (as metadata_number writes them),
// and a missing key or a value of the wrong type is a gat::Error naming `where` (the file), the
// key and the value. Ranges are the caller's to check.
class MetadataReader {
 public:
  MetadataReader(const Metadata& metadata, std::string where);
  bool has(const std::string& key) const { return metadata_.count(key) > 0; }
  const std::string& text(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  uint64_t unsigned_integer(const std::string& key) const;
  double number(const std::string& key) const;  // finite

 private:
  const Metadata& metadata_;
  std::string where_;
};
// A number as metadata text that reads back to the same value (JSON, shortest round trip).
std::string metadata_number(double value);
std::string metadata_number(int64_t value);
std::string metadata_number(uint64_t value);

// A module's state_dict() (its parameters and buffers) as a checkpoint.
void save(const Module& module, const std::string& path, const Metadata& metadata = {});
// Module::load_state_dict from a checkpoint (the same checks; errors name the file) and returns
// its metadata. Entries named "optimizer.*" or "trainer.*" (a run's state, below) are not the
// module's and are skipped.
Metadata load_into(Module& module, const std::string& path);
// The same from a file already read (`path` names it in errors).
void load_into(Module& module, const Safetensors& file, const std::string& path);

// A checkpoint to continue training from: the module as above, and beside it the optimiser's
// state_dict() with every name prefixed "optimizer." and the training loop's own tensors
// (`run_state`) prefixed "trainer.".
constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kRunStatePrefix = "trainer.";
void save(const Module& module, const Optimizer& optimizer, const std::string& path,
          const Metadata& metadata = {}, const TensorMap& run_state = {});
// Loads the module and the optimiser (the checkpoint must hold the optimiser's state; both are
// checked before either changes) and returns the metadata; `run_state`, if given, receives the
// "trainer." tensors (names without the prefix, host tensors).
Metadata load_into(Module& module, Optimizer& optimizer, const std::string& path,
                   TensorMap* run_state = nullptr);
// The same from a file already read (`path` names it in errors).
void load_into(Module& module, Optimizer& optimizer, const Safetensors& file, const std::string& path);

}  // namespace gat::io
