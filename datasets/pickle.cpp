#include "gat/datasets/pickle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "gat/framework/io.h"
#include "gat/framework/quote.h"

namespace gat::pickle {

namespace {

// The only globals a Planetoid pickle may name ("module name", as GLOBAL spells them).
constexpr const char* kCsrMatrix = "scipy.sparse.csr csr_matrix";
constexpr const char* kReconstruct = "numpy.core.multiarray _reconstruct";
constexpr const char* kNdarray = "numpy ndarray";
constexpr const char* kDtype = "numpy dtype";
constexpr const char* kDefaultdict = "collections defaultdict";
constexpr const char* kList = "__builtin__ list";
constexpr const char* kAllowedGlobals[] = {kCsrMatrix, kReconstruct, kNdarray, kDtype, kDefaultdict, kList};

// The opcodes, as pickletools names them.
enum Op : uint8_t {
  PROTO = 0x80,
  STOP = '.',
  MARK = '(',
  GLOBAL = 'c',
  REDUCE = 'R',
  BUILD = 'b',
  NEWOBJ = 0x81,
  NONE = 'N',
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  BININT = 'J',
  BININT1 = 'K',
  BININT2 = 'M',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  EMPTY_LIST = ']',
  EMPTY_DICT = '}',
  EMPTY_TUPLE = ')',
  TUPLE = 't',
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  APPEND = 'a',
  APPENDS = 'e',
  SETITEM = 's',
  SETITEMS = 'u',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  BINGET = 'h',
};

const char* op_name(uint8_t op) {
  switch (op) {
    case PROTO:
      return "PROTO";
    case STOP:
      return "STOP";
    case MARK:
      return "MARK";
    case GLOBAL:
      return "GLOBAL";
    case REDUCE:
      return "REDUCE";
    case BUILD:
      return "BUILD";
    case NEWOBJ:
      return "NEWOBJ";
    case NONE:
      return "NONE";
    case NEWTRUE:
      return "NEWTRUE";
    case NEWFALSE:
      return "NEWFALSE";
    case BININT:
      return "BININT";
    case BININT1:
      return "BININT1";
    case BININT2:
      return "BININT2";
    case BINSTRING:
      return "BINSTRING";
    case SHORT_BINSTRING:
      return "SHORT_BINSTRING";
    case EMPTY_LIST:
      return "EMPTY_LIST";
    case EMPTY_DICT:
      return "EMPTY_DICT";
    case EMPTY_TUPLE:
      return "EMPTY_TUPLE";
    case TUPLE:
      return "TUPLE";
    case TUPLE1:
      return "TUPLE1";
    case TUPLE2:
      return "TUPLE2";
    case TUPLE3:
      return "TUPLE3";
    case APPEND:
      return "APPEND";
    case APPENDS:
      return "APPENDS";
    case SETITEM:
      return "SETITEM";
    case SETITEMS:
      return "SETITEMS";
    case BINPUT:
      return "BINPUT";
    case LONG_BINPUT:
      return "LONG_BINPUT";
    case BINGET:
      return "BINGET";
    default:
      return nullptr;
  }
}

std::string op_str(uint8_t op) {
  const char* name = op_name(op);
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", op);
  return name ? detail::concat(name, " (", hex, ")") : detail::concat("unsupported opcode ", hex);
}

constexpr size_t kMaxOpenMarks = 64;  // nesting of MARK ... TUPLE/APPENDS/SETITEMS
// Bytes the value tree may hold per byte of file. No opcode adds more than one Value (~120 bytes)
// plus a few pointers, so well-formed and hostile files alike stay below it; the cap is the
// guard that keeps that linear bound true if the parser ever changes.
constexpr size_t kBudgetPerFileByte = 256;
constexpr size_t kBudgetSlack = size_t{1} << 20;
static_assert(sizeof(Value) + 8 * sizeof(void*) < kBudgetPerFileByte,
              "one opcode's worth must fit the budget");

}  // namespace

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::none:
      return "None";
    case Value::Kind::boolean:
      return "bool";
    case Value::Kind::integer:
      return "int";
    case Value::Kind::string:
      return "str";
    case Value::Kind::list:
      return "list";
    case Value::Kind::tuple:
      return "tuple";
    case Value::Kind::dict:
      return "dict";
    case Value::Kind::global:
      return "global";
    case Value::Kind::object:
      return "object";
  }
  return "unknown";
}

// Runs the opcodes of one file into its Document's arena.
class Parser {
 public:
  Parser(Document& doc, const std::string& bytes)
      : doc_(doc),
        data_(reinterpret_cast<const unsigned char*>(bytes.data())),
        size_(bytes.size()),
        budget_(bytes.size() * kBudgetPerFileByte + kBudgetSlack) {}

  const Value* run() {
    while (pos_ < size_) {
      op_pos_ = pos_;
      op_ = data_[pos_++];
      if (op_ == STOP) return stop();
      step();
    }
    doc_.fail("truncated: no STOP opcode before the end of the file at byte ", size_);
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    doc_.fail("byte ", op_pos_, ": ", op_str(op_), ": ", args...);
  }

  void charge(size_t bytes) {
    if (bytes > budget_)
      fail("the value tree would exceed its memory cap (", kBudgetPerFileByte, " bytes per file byte)");
    budget_ -= bytes;
  }

  // ---- reading arguments: every length is checked against what remains ----
  const unsigned char* take(size_t n) {
    if (n > size_ - pos_) fail("truncated: needs ", n, " bytes, ", size_ - pos_, " remain");
    const unsigned char* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  uint32_t read_u32() {
    const unsigned char* p = take(4);
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
           static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
  }
  std::string read_line() {
    const void* nl = std::memchr(data_ + pos_, '\n', size_ - pos_);
    if (!nl) fail("truncated: no end of line in ", size_ - pos_, " remaining bytes");
    const size_t len = static_cast<size_t>(static_cast<const unsigned char*>(nl) - (data_ + pos_));
    std::string line(reinterpret_cast<const char*>(take(len)), len);
    ++pos_;  // the '\n'
    return line;
  }

  // ---- values and the stack ----
  Value* make(Value::Kind kind) {
    charge(sizeof(Value));
    doc_.arena_.push_back(std::make_unique<Value>());
    Value* v = doc_.arena_.back().get();
    v->kind = kind;
    return v;
  }
  void push(Value* v) {
    charge(sizeof(void*));
    stack_.push_back(v);
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  Value* pop() {
    if (stack_.size() <= floor()) fail("stack underflow");
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value* top() const {
    if (stack_.size() <= floor()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<const Value*> pop_to_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    std::vector<const Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()),
                                    stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Value* expect(Value* v, Value::Kind kind, const char* role) const {
    if (v->kind != kind) fail(role, " must be a ", kind_name(kind), ", got a ", kind_name(v->kind));
    return v;
  }
  void push_tuple(std::vector<const Value*> items) {
    Value* t = make(Value::Kind::tuple);
    charge(items.size() * sizeof(void*));
    t->items = std::move(items);
    push(t);
  }
  void push_string(size_t len) {
    const unsigned char* p = take(len);
    Value* s = make(Value::Kind::string);
    charge(len);
    s->text.assign(reinterpret_cast<const char*>(p), len);
    push(s);
  }
  void push_int(int64_t value, Value::Kind kind = Value::Kind::integer) {
    Value* v = make(kind);
    v->integer = value;
    push(v);
  }
  void memo_put(uint32_t key) {
    charge(4 * sizeof(void*));
    memo_[key] = top();
  }
  // Object record of callable(args): nothing is called.
  void push_object(const char* role) {
    Value* args = expect(pop(), Value::Kind::tuple, "the argument");
    Value* callable = expect(pop(), Value::Kind::global, role);
    Value* obj = make(Value::Kind::object);
    obj->callable = callable;
    obj->args = args;
    push(obj);
  }

  const Value* stop() {
    if (!marks_.empty()) fail(marks_.size(), " MARK(s) still open");
    if (stack_.size() != 1) fail("expected one value on the stack, found ", stack_.size());
    if (pos_ != size_) fail(size_ - pos_, " bytes follow the STOP opcode");
    return stack_.back();
  }

  void step() {
    switch (op_) {
      case PROTO: {
        const unsigned version = *take(1);
        if (version != 2) fail("protocol ", version, " (only protocol 2 is supported)");
        return;
      }
      case MARK:
        if (marks_.size() >= kMaxOpenMarks) fail("more than ", kMaxOpenMarks, " nested MARKs");
        charge(sizeof(size_t));
        marks_.push_back(stack_.size());
        return;
      case GLOBAL: {
        const std::string module = read_line();
        const std::string name = read_line();
        const std::string global = module + " " + name;
        for (const char* allowed : kAllowedGlobals) {
          if (global == allowed) {
            Value* g = make(Value::Kind::global);
            charge(global.size());
            g->text = global;
            return push(g);
          }
        }
        fail("global ", quote(global), " is not one of the 6 allowed");
      }
      case REDUCE:
        return push_object("the callable");
      case NEWOBJ:
        return push_object("the class");
      case BUILD: {
        Value* state = pop();
        Value* obj = expect(top(), Value::Kind::object, "the BUILD target");
        if (obj->state) fail("object already has a state");
        obj->state = state;
        return;
      }
      case NONE:
        return push(make(Value::Kind::none));
      case NEWTRUE:
        return push_int(1, Value::Kind::boolean);
      case NEWFALSE:
        return push_int(0, Value::Kind::boolean);
      case BININT:
        return push_int(static_cast<int32_t>(read_u32()));
      case BININT1:
        return push_int(*take(1));
      case BININT2: {
        const unsigned char* p = take(2);
        return push_int(p[0] | p[1] << 8);
      }
      case BINSTRING: {
        const int32_t len = static_cast<int32_t>(read_u32());
        if (len < 0) fail("negative string length ", len);
        return push_string(static_cast<size_t>(len));
      }
      case SHORT_BINSTRING:
        return push_string(*take(1));
      case EMPTY_LIST:
        return push(make(Value::Kind::list));
      case EMPTY_DICT:
        return push(make(Value::Kind::dict));
      case EMPTY_TUPLE:
        return push_tuple({});
      case TUPLE:
        return push_tuple(pop_to_mark());
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        std::vector<const Value*> items(static_cast<size_t>(op_ - TUPLE1 + 1));
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        return push_tuple(std::move(items));
      }
      case APPEND: {
        const Value* item = pop();
        Value* list = expect(top(), Value::Kind::list, "the APPEND target");
        charge(sizeof(void*));
        list->items.push_back(item);
        return;
      }
      case APPENDS: {
        std::vector<const Value*> items = pop_to_mark();
        Value* list = expect(top(), Value::Kind::list, "the APPENDS target");
        charge(items.size() * sizeof(void*));
        list->items.insert(list->items.end(), items.begin(), items.end());
        return;
      }
      case SETITEM: {  // one key and its value: Python's last batch of a dict when it holds one
        const Value* value = pop();
        const Value* key = pop();
        Value* target = top();
        if (target->kind != Value::Kind::dict && !target->is_object_of(kDefaultdict))
          fail("the SETITEM target must be a dict or a defaultdict, got a ", kind_name(target->kind));
        charge(2 * sizeof(void*));
        target->entries.emplace_back(key, value);
        return;
      }
      case SETITEMS: {
        std::vector<const Value*> items = pop_to_mark();
        if (items.size() % 2) fail("odd number of items (", items.size(), ")");
        Value* target = top();
        if (target->kind != Value::Kind::dict && !target->is_object_of(kDefaultdict))
          fail("the SETITEMS target must be a dict or a defaultdict, got a ", kind_name(target->kind));
        charge(items.size() * sizeof(void*));
        for (size_t i = 0; i < items.size(); i += 2) target->entries.emplace_back(items[i], items[i + 1]);
        return;
      }
      case BINPUT:
        return memo_put(*take(1));
      case LONG_BINPUT:
        return memo_put(read_u32());
      case BINGET: {
        const unsigned key = *take(1);
        const auto it = memo_.find(key);
        if (it == memo_.end()) fail("memo key ", key, " was never stored");
        return push(it->second);
      }
      default:
        fail("not one of the 29 allowed opcodes");
    }
  }

  Document& doc_;
  const unsigned char* data_;
  size_t size_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  uint8_t op_ = 0;
  size_t budget_;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint32_t, Value*> memo_;
};

Document Document::parse(const std::string& bytes, std::string name) {
  Document doc;
  doc.name_ = std::move(name);
  doc.file_size_ = bytes.size();
  if (bytes.empty()) doc.fail("empty file");
  doc.root_ = Parser(doc, bytes).run();
  return doc;
}

Document Document::load(const std::string& path) { return parse(io::read_regular_file(path), path); }

// ---- converters -------------------------------------------------------------------------------

namespace {

// The items of a tuple of exactly (or, with exact=false, at least) n elements.
const std::vector<const Value*>& tuple_items(const Document& doc, const Value* v, size_t n, const char* what,
                                             bool exact = true) {
  if (!v || v->kind != Value::Kind::tuple || (exact ? v->items.size() != n : v->items.size() < n))
    doc.fail(what, " must be a tuple of ", n, " items, got ",
             v ? detail::concat("a ", kind_name(v->kind), " of ", v->items.size()) : std::string("nothing"));
  return v->items;
}

int64_t int_value(const Document& doc, const Value* v, const char* what) {
  if (!v || (v->kind != Value::Kind::integer && v->kind != Value::Kind::boolean))
    doc.fail(what, " must be an int, got ", v ? kind_name(v->kind) : "nothing");
  return v->integer;
}

const std::string& string_value(const Document& doc, const Value* v, const char* what) {
  if (!v || v->kind != Value::Kind::string)
    doc.fail(what, " must be a string, got ", v ? kind_name(v->kind) : "nothing");
  return v->text;
}

// The value of the last entry with string key `key` (Python: later keys overwrite), or null.
const Value* dict_get(const Value& dict, const char* key) {
  const Value* found = nullptr;
  for (const auto& [k, v] : dict.entries)
    if (k->kind == Value::Kind::string && k->text == key) found = v;
  return found;
}

// A checked view of an ndarray's state.
struct ArrayView {
  Shape shape;
  int64_t numel = 0;
  char type = 'f';       // 'i' or 'f'
  size_t itemsize = 4;   // 4 or 8
  bool swap = false;     // big-endian data
  bool fortran = false;  // column-major data
  const std::string* bytes = nullptr;
};

ArrayView view_ndarray(const Document& doc, const Value& v, const char* what) {
  if (!v.is_object_of(kReconstruct))
    doc.fail(what, " must be a numpy ndarray (", kReconstruct, "), got a ", kind_name(v.kind),
             v.callable ? " of " + v.callable->text : std::string());
  const auto& args = tuple_items(doc, v.args, 3, "the ndarray's _reconstruct arguments");
  if (!args[0]->is_global(kNdarray)) doc.fail(what, ": _reconstruct must build a ", kNdarray);
  // State: (version, shape, dtype, is_fortran, data) or, in old pickles, without the version.
  if (!v.state || v.state->kind != Value::Kind::tuple || v.state->items.size() < 4 ||
      v.state->items.size() > 5)
    doc.fail(what, ": the ndarray state must be a tuple of 4 or 5 items");
  const auto& st = v.state->items;
  const size_t o = st.size() - 4;
  ArrayView a;
  const Value* shape = st[o];
  if (shape->kind != Value::Kind::tuple) doc.fail(what, ": the ndarray shape must be a tuple");
  const Value* dtype = st[o + 1];
  if (!dtype->is_object_of(kDtype)) doc.fail(what, ": the ndarray dtype must be a ", kDtype);
  a.fortran = int_value(doc, st[o + 2], "the ndarray's is_fortran flag") != 0;
  if (st[o + 3]->kind != Value::Kind::string)
    doc.fail(what, ": the ndarray data must be a byte string, got a ", kind_name(st[o + 3]->kind));
  a.bytes = &st[o + 3]->text;

  const std::string& typestr = string_value(
      doc, tuple_items(doc, dtype->args, 1, "the dtype arguments", false)[0], "the dtype type string");
  if (typestr == "i4" || typestr == "i8" || typestr == "f4" || typestr == "f8") {
    a.type = typestr[0];
    a.itemsize = static_cast<size_t>(typestr[1] - '0');
  } else {
    doc.fail(what, ": unsupported dtype ", quote(typestr), " (supported: i4, i8, f4, f8)");
  }
  const std::string& order = string_value(doc, tuple_items(doc, dtype->state, 2, "the dtype state", false)[1],
                                          "the dtype byte order");
  if (order == ">")
    a.swap = true;
  else if (order != "<" && order != "=" && order != "|")
    doc.fail(what, ": unsupported dtype byte order ", quote(order));

  // numel * itemsize must equal the data length. The product is only formed while it stays
  // within the data length, so it cannot overflow; a zero dimension makes it 0 whatever the rest.
  const int64_t limit = static_cast<int64_t>(a.bytes->size());
  bool too_large = false, has_zero = false;
  a.numel = 1;
  for (const Value* d : shape->items) {
    const int64_t dim = int_value(doc, d, "an ndarray dimension");
    if (dim < 0) doc.fail(what, ": negative ndarray dimension ", dim);
    a.shape.push_back(dim);
    if (dim == 0)
      has_zero = true;
    else if (a.numel > limit / dim)
      too_large = true;
    else
      a.numel *= dim;
  }
  if (has_zero)
    a.numel = 0;
  else if (too_large)
    doc.fail(what, ": ndarray shape ", shape_str(a.shape), " needs more than the ", limit, " data bytes");
  if (static_cast<size_t>(a.numel) * a.itemsize != a.bytes->size())
    doc.fail(what, ": ndarray shape ", shape_str(a.shape), " of ", typestr, " needs ",
             static_cast<size_t>(a.numel) * a.itemsize, " bytes, the data has ", a.bytes->size());
  return a;
}

// Element of a at storage position k, as T.
template <class T>
T element(const ArrayView& a, size_t k) {
  unsigned char raw[8];
  std::memcpy(raw, a.bytes->data() + k * a.itemsize, a.itemsize);
  if (a.swap) std::reverse(raw, raw + a.itemsize);
  if (a.type == 'i') {
    if (a.itemsize == 4) {
      int32_t v;
      std::memcpy(&v, raw, 4);
      return static_cast<T>(v);
    }
    int64_t v;
    std::memcpy(&v, raw, 8);
    return static_cast<T>(v);
  }
  if (a.itemsize == 4) {
    float v;
    std::memcpy(&v, raw, 4);
    return static_cast<T>(v);
  }
  double v;
  std::memcpy(&v, raw, 8);
  return static_cast<T>(v);
}

// The elements in row-major order, read through T (int64_t for integer arrays, double otherwise).
template <class T>
std::vector<T> elements(const ArrayView& a) {
  std::vector<T> out(static_cast<size_t>(a.numel));
  if (!a.fortran || a.shape.size() < 2) {
    for (size_t k = 0; k < out.size(); ++k) out[k] = element<T>(a, k);
    return out;
  }
  // Column-major storage: the row-major multi-index (i0, ..., id) sits at sum(i_j * stride_j)
  // with stride_0 = 1, stride_j = stride_{j-1} * shape_{j-1}.
  const size_t d = a.shape.size();
  std::vector<int64_t> stride(d, 1), index(d, 0);
  for (size_t j = 1; j < d; ++j) stride[j] = stride[j - 1] * a.shape[j - 1];
  size_t pos = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = element<T>(a, pos);
    for (size_t j = d; j-- > 0;) {  // increment the multi-index, last axis fastest
      pos += static_cast<size_t>(stride[j]);
      if (++index[j] < a.shape[j]) break;
      pos -= static_cast<size_t>(stride[j] * a.shape[j]);
      index[j] = 0;
    }
  }
  return out;
}

std::vector<int64_t> int_elements(const Document& doc, const Value& v, const char* what, size_t dims) {
  const ArrayView a = view_ndarray(doc, v, what);
  if (a.type != 'i') doc.fail(what, " must be an integer array");
  if (a.shape.size() != dims) doc.fail(what, " must have ", dims, " dimension(s), got ", shape_str(a.shape));
  return elements<int64_t>(a);
}

}  // namespace

Tensor ndarray_to_tensor(const Document& doc, const Value& array, DType dtype) {
  const ArrayView a = view_ndarray(doc, array, "the array");
  Tensor out = Tensor::empty(a.shape, dtype, Device::cpu, "pickle ndarray");
  if (dtype == DType::i32) {
    if (a.type != 'i') doc.fail("an i32 tensor needs an integer array, got a float array");
    const std::vector<int64_t> v = elements<int64_t>(a);
    int32_t* dst = out.data<int32_t>();
    for (size_t k = 0; k < v.size(); ++k) {
      if (v[k] < std::numeric_limits<int32_t>::min() || v[k] > std::numeric_limits<int32_t>::max())
        doc.fail("array element ", k, " = ", v[k], " does not fit in i32");
      dst[k] = static_cast<int32_t>(v[k]);
    }
    return out;
  }
  const std::vector<double> v = elements<double>(a);
  dispatch_float(dtype, "pickle::ndarray_to_tensor", [&](auto zero) {
    using T = decltype(zero);
    T* dst = out.data<T>();
    for (size_t k = 0; k < v.size(); ++k) dst[k] = static_cast<T>(v[k]);
  });
  return out;
}

Tensor csr_to_dense(const Document& doc, const Value& matrix) {
  if (!matrix.is_object_of(kCsrMatrix))
    doc.fail("expected a ", kCsrMatrix, ", got a ", kind_name(matrix.kind));
  if (!matrix.state || matrix.state->kind != Value::Kind::dict)
    doc.fail("the csr_matrix state must be a dict");
  const Value& st = *matrix.state;
  const Value* shape_v = dict_get(st, "_shape");
  if (!shape_v) shape_v = dict_get(st, "shape");
  const auto& shape = tuple_items(doc, shape_v, 2, "the csr_matrix _shape");
  const int64_t rows = int_value(doc, shape[0], "the row count"),
                cols = int_value(doc, shape[1], "the column count");
  if (rows < 0 || cols < 0) doc.fail("negative csr_matrix shape (", rows, ", ", cols, ")");
  const int64_t limit = static_cast<int64_t>(std::min<size_t>(
      static_cast<size_t>(kMaxDenseElements), doc.file_size() * kDenseCellsPerFileByte + (size_t{1} << 20)));
  if (cols != 0 && rows > limit / cols)
    doc.fail("csr_matrix shape (", rows, ", ", cols, ") exceeds the dense limit of ", limit, " cells for a ",
             doc.file_size(), "-byte file");
  for (const char* key : {"indptr", "indices", "data"})
    if (!dict_get(st, key)) doc.fail("the csr_matrix state has no '", key, "'");
  const std::vector<int64_t> indptr = int_elements(doc, *dict_get(st, "indptr"), "indptr", 1);
  const std::vector<int64_t> indices = int_elements(doc, *dict_get(st, "indices"), "indices", 1);
  const ArrayView data_view = view_ndarray(doc, *dict_get(st, "data"), "data");
  if (data_view.shape.size() != 1) doc.fail("data must have 1 dimension, got ", shape_str(data_view.shape));
  const std::vector<double> data = elements<double>(data_view);

  if (static_cast<int64_t>(indptr.size()) != rows + 1)
    doc.fail("indptr has ", indptr.size(), " entries for ", rows, " rows (needs ", rows + 1, ")");
  if (indices.size() != data.size())
    doc.fail("indices has ", indices.size(), " entries but data has ", data.size());
  if (indptr[0] != 0) doc.fail("indptr[0] is ", indptr[0], ", expected 0");
  for (int64_t r = 0; r < rows; ++r)
    if (indptr[r + 1] < indptr[r])
      doc.fail("indptr decreases at row ", r, " (", indptr[r], " then ", indptr[r + 1], ")");
  if (indptr[rows] != static_cast<int64_t>(indices.size()))
    doc.fail("indptr[", rows, "] is ", indptr[rows], " but there are ", indices.size(), " stored entries");

  Tensor out = Tensor::zeros({rows, cols}, DType::f32);
  float* dst = out.data<float>();  // (rows, cols)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = indptr[r]; k < indptr[r + 1]; ++k) {
      const int64_t c = indices[k];
      if (c < 0 || c >= cols)
        doc.fail("entry ", k, " (row ", r, ") has column ", c, " outside [0, ", cols, ")");
      dst[r * cols + c] += static_cast<float>(data[k]);
    }
  }
  return out;
}

Tensor to_dense(const Document& doc) {
  const Value& root = doc.root();
  Tensor t =
      root.is_object_of(kCsrMatrix) ? csr_to_dense(doc, root) : ndarray_to_tensor(doc, root, DType::f32);
  if (t.dim() != 2) doc.fail("expected a 2-D array, got shape ", shape_str(t.shape()));
  // A NaN or infinity in the file, a double beyond the largest float, or repeated csr entries
  // whose sum passes it: named here, not as a NaN loss many epochs later.
  const float* p = t.data<float>();  // (rows, cols)
  const auto bad = std::find_if(p, p + t.numel(), [](float v) { return !std::isfinite(v); });
  if (bad != p + t.numel())
    doc.fail("element (", (bad - p) / t.size(1), ", ", (bad - p) % t.size(1), ") is ", *bad,
             " as a float: features must be finite");
  return t;
}

std::map<int64_t, std::vector<int64_t>> to_adjacency(const Document& doc) {
  const Value& root = doc.root();
  if (root.is_object_of(kDefaultdict)) {
    const auto& args = tuple_items(doc, root.args, 1, "the defaultdict arguments");
    if (!args[0]->is_global(kList)) doc.fail("expected defaultdict(list)");
  } else if (root.kind != Value::Kind::dict) {
    doc.fail("expected a defaultdict(list) of adjacency lists, got a ", kind_name(root.kind));
  }
  // A list is stated once but may be referenced many times through the memo (BINGET), and every
  // reference becomes a copy here: the copies are counted against what the file can state.
  const size_t max_entries = doc.file_size() / kFileBytesPerNeighbour;
  size_t entries = 0;
  std::map<int64_t, std::vector<int64_t>> adjacency;
  for (const auto& [key, value] : root.entries) {
    const int64_t node = int_value(doc, key, "an adjacency key");
    if (value->kind != Value::Kind::list)
      doc.fail("the adjacency list of node ", node, " must be a list, got a ", kind_name(value->kind));
    entries += value->items.size();
    if (entries > max_entries)
      doc.fail("the adjacency lists hold more than ", max_entries, " neighbour ids in all, more than a ",
               doc.file_size(), "-byte file states (", kFileBytesPerNeighbour,
               " bytes per id); lists referenced repeatedly through the memo?");
    std::vector<int64_t>& out = adjacency[node];
    out.clear();  // a repeated key replaces the earlier list, as in Python
    out.reserve(value->items.size());
    for (const Value* item : value->items) out.push_back(int_value(doc, item, "a neighbour id"));
  }
  return adjacency;
}

}  // namespace gat::pickle
