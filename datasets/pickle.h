// A restricted unpickler for the Python 2 protocol-2 pickles of the Planetoid raw files.
//
// It understands exactly the 29 opcodes those files use (PROTO, STOP, MARK, GLOBAL, REDUCE, BUILD,
// NEWOBJ, NONE, NEWTRUE, NEWFALSE, BININT, BININT1, BININT2, BINSTRING, SHORT_BINSTRING,
// EMPTY_LIST, EMPTY_DICT, EMPTY_TUPLE, TUPLE, TUPLE1, TUPLE2, TUPLE3, APPEND, APPENDS, SETITEM,
// SETITEMS, BINPUT, LONG_BINPUT, BINGET; SETITEM is what Python's pickler writes for a last batch
// of one key, as for a graph of 1001 nodes) and names exactly 6 globals (`scipy.sparse.csr csr_matrix`,
// `numpy.core.multiarray _reconstruct`, `numpy ndarray`, `numpy dtype`, `collections
// defaultdict`, `__builtin__ list`). Nothing is ever called or imported: REDUCE, NEWOBJ and BUILD
// only record (callable, arguments, state) in an Object value, and the converters below read
// those records. Anything else is refused with a gat::Error naming the file, the byte offset and
// the opcode or global.
//
// Hostile input: every length is checked against the bytes that remain before it is used, the
// number of open MARKs is bounded, and the bytes held by the value tree are capped at a multiple
// of the file size, so a small file cannot make a large allocation. All values live in an arena
// owned by the Document (cycles built with BINGET/APPEND cannot leak).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/tensor.h"

namespace gat::pickle {

struct Value {
  enum class Kind : uint8_t { none, boolean, integer, string, list, tuple, dict, global, object };
  Kind kind = Kind::none;
  int64_t integer = 0;                                         // boolean (0/1) and integer
  std::string text;                                            // string: the raw bytes; global: "module name"
  std::vector<const Value*> items;                             // list, tuple
  std::vector<std::pair<const Value*, const Value*>> entries;  // dict; object (defaultdict items)
  const Value* callable = nullptr;  // object: the global it was made from (REDUCE / NEWOBJ)
  const Value* args = nullptr;      // object: the argument tuple
  const Value* state = nullptr;     // object: the BUILD state, null until built

  bool is_global(const char* name) const { return kind == Kind::global && text == name; }
  // object made from the global `name`
  bool is_object_of(const char* name) const {
    return kind == Kind::object && callable != nullptr && callable->is_global(name);
  }
};

const char* kind_name(Value::Kind kind);

class Document {
 public:
  // Parses `bytes` (the whole file); `name` appears in every error message.
  static Document parse(const std::string& bytes, std::string name);
  // Reads and parses a file.
  static Document load(const std::string& path);

  const Value& root() const { return *root_; }
  const std::string& name() const { return name_; }
  size_t file_size() const { return file_size_; }
  size_t value_count() const { return arena_.size(); }

  // Throws gat::Error("pickle: <name>: <message>").
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    GAT_FAIL("pickle: ", name_, ": ", args...);
  }

 private:
  friend class Parser;
  std::string name_;
  size_t file_size_ = 0;
  std::vector<std::unique_ptr<Value>> arena_;
  const Value* root_ = nullptr;
};

// ---- converters (every error names the file) -----------------------------------------------

// A numpy.ndarray object (_reconstruct + BUILD state (version, shape, dtype, is_fortran, bytes),
// dtype i4/i8/f4/f8 in either byte order) as a dense row-major tensor of `dtype` (f32, f64 or i32;
// i32 needs integer values within range).
Tensor ndarray_to_tensor(const Document& doc, const Value& array, DType dtype);
// A scipy.sparse.csr_matrix object (state dict with _shape, indptr, indices, data) as a dense
// (rows, cols) f32 tensor; duplicate entries add up, as in scipy's todense(). The shape is the
// one size a file states without paying for it in bytes, so the dense form is capped at
// kDenseCellsPerFileByte cells per byte of file (plus 2^20), and at kMaxDenseElements overall:
// Planetoid's files need at most ~15 cells a byte.
Tensor csr_to_dense(const Document& doc, const Value& matrix);
inline constexpr int64_t kMaxDenseElements = int64_t{1} << 28;
inline constexpr int64_t kDenseCellsPerFileByte = 4096;
// The root as a dense f32 tensor: a csr_matrix or a 2-D ndarray.
Tensor to_dense(const Document& doc);
// A collections.defaultdict(list) (or dict) of int -> list of int, as a sorted map. Each neighbour
// id costs a file at least kFileBytesPerNeighbour bytes (an int opcode and its argument), so the
// lists may hold at most file_size / kFileBytesPerNeighbour ids in all, however often a memoised
// list is referenced.
std::map<int64_t, std::vector<int64_t>> to_adjacency(const Document& doc);
inline constexpr size_t kFileBytesPerNeighbour = 2;

}  // namespace gat::pickle
