#include "gat/datasets/npy.h"

#include <cstring>
#include <limits>
#include <string_view>

#include "gat/framework/check.h"
#include "gat/framework/io.h"
#include "gat/framework/quote.h"

namespace gat {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

// The itemsize of a supported descr ("<f4" ...), or 0.
int64_t itemsize_of(const std::string& descr) {
  static const char* const kKnown[] = {"<f4", "<f8", "<i1", "|i1", "<i2", "<i4", "<i8",
                                       "|u1", "<u1", "<u2", "<u4", "<u8", "|b1"};
  for (const char* known : kKnown)
    if (descr == known) return descr[2] - '0';
  return 0;
}

// The text of the value of `key` in the header dict, up to the next ',' at depth 0 or the end.
std::string_view dict_value(std::string_view header, std::string_view key, const std::string& name) {
  const std::string quoted = "'" + std::string(key) + "'";
  const size_t at = header.find(quoted);
  GAT_CHECK(at != std::string_view::npos, name, ": the .npy header has no ", quoted, " (", quote(header),
            ")");
  size_t pos = header.find(':', at + quoted.size());
  GAT_CHECK(pos != std::string_view::npos, name, ": the .npy header's ", quoted, " has no value");
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  size_t end = pos;
  int depth = 0;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' && depth == 0) || c == '}' || depth < 0) break;
  }
  GAT_CHECK(depth == 0, name, ": the .npy header's ", quoted, " is not closed (", quote(header), ")");
  if (end < header.size() && header[end] == ')') ++end;
  return header.substr(pos, end - pos);
}

// "(3, 4)", "(3,)", "()" -> the dimensions.
Shape parse_shape(std::string_view text, const std::string& name) {
  GAT_CHECK(text.size() >= 2 && text.front() == '(' && text.back() == ')', name, ": the .npy shape ",
            quote(text), " is not a tuple");
  Shape shape;
  std::string_view inner = text.substr(1, text.size() - 2);
  int64_t numel = 1;
  while (!inner.empty()) {
    const size_t comma = inner.find(',');
    std::string_view item = inner.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty() && comma == std::string_view::npos) break;  // "(3, )": the tuple's end
    int64_t dim = 0;
    GAT_CHECK(!item.empty(), name, ": the .npy shape ", quote(text), " has an empty dimension");
    for (char c : item) {
      GAT_CHECK(c >= '0' && c <= '9', name, ": the .npy shape ", quote(text), " has a dimension ",
                quote(item), " that is not a non-negative integer");
      GAT_CHECK(dim <= (std::numeric_limits<int64_t>::max() - 9) / 10, name, ": the .npy shape ", quote(text),
                " overflows");
      dim = dim * 10 + (c - '0');
    }
    GAT_CHECK(dim == 0 || numel <= std::numeric_limits<int64_t>::max() / 16 / dim, name, ": the .npy shape ",
              quote(text), " has too many elements");
    numel *= dim;
    shape.push_back(dim);
    if (comma == std::string_view::npos) break;
    inner.remove_prefix(comma + 1);
  }
  return shape;
}

}  // namespace

bool NpyArray::is_float() const { return descr[1] == 'f'; }
bool NpyArray::is_integer() const { return !is_float(); }
int64_t NpyArray::numel() const { return shape_numel(shape); }

std::vector<double> NpyArray::values() const {
  const int64_t n = numel(), size = itemsize_of(descr);
  std::vector<double> out(static_cast<size_t>(n));
  const char kind = descr[1];
  for (int64_t k = 0; k < n; ++k) {
    const char* p = bytes.data() + k * size;
    double v = 0;
    auto read = [&](auto zero) {
      decltype(zero) x;
      std::memcpy(&x, p, sizeof x);
      v = static_cast<double>(x);
    };
    if (kind == 'f') size == 4 ? read(float{}) : read(double{});
    if (kind == 'i')
      size == 1   ? read(int8_t{})
      : size == 2 ? read(int16_t{})
      : size == 4 ? read(int32_t{})
                  : read(int64_t{});
    if (kind == 'u' || kind == 'b')
      size == 1   ? read(uint8_t{})
      : size == 2 ? read(uint16_t{})
      : size == 4 ? read(uint32_t{})
                  : read(uint64_t{});
    out[static_cast<size_t>(k)] = v;
  }
  return out;
}

NpyArray parse_npy(const std::string& bytes, const std::string& name) {
  GAT_CHECK(bytes.size() >= 10 && std::string_view(bytes).substr(0, kMagic.size()) == kMagic, name,
            ": not a .npy file (it does not start with \\x93NUMPY)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  GAT_CHECK(major >= 1 && major <= 3, name, ": .npy format version ", static_cast<int>(major),
            " (versions 1 to 3 are read)");
  const size_t length_bytes = major == 1 ? 2 : 4;
  GAT_CHECK(bytes.size() >= 8 + length_bytes, name, ": the .npy file ends inside its header");
  uint64_t header_len = 0;
  for (size_t k = 0; k < length_bytes; ++k)
    header_len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[8 + k])) << (8 * k);
  const size_t start = 8 + length_bytes;
  GAT_CHECK(header_len <= bytes.size() - start, name, ": the .npy header of ", header_len,
            " bytes runs past the file's end (", bytes.size(), " bytes)");
  const std::string_view header = std::string_view(bytes).substr(start, header_len);
  NpyArray array;
  const std::string_view descr = dict_value(header, "descr", name);
  GAT_CHECK(descr.size() == 5 && descr.front() == '\'' && descr.back() == '\'', name, ": the .npy dtype ",
            quote(descr), " is not a simple dtype string");
  array.descr = std::string(descr.substr(1, 3));
  if (array.descr[0] == '=') array.descr[0] = '<';
  GAT_CHECK(itemsize_of(array.descr) > 0, name, ": the .npy dtype ", quote(array.descr),
            " is not read (little-endian <f4 <f8 <i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1)");
  const std::string_view order = dict_value(header, "fortran_order", name);
  GAT_CHECK(order == "False" || order == "True", name, ": the .npy fortran_order ", quote(order),
            " is neither True nor False");
  GAT_CHECK(order == "False", name,
            ": the .npy array is in Fortran order, which is not read (save it in C order: "
            "numpy.ascontiguousarray)");
  array.shape = parse_shape(dict_value(header, "shape", name), name);
  const auto want = static_cast<uint64_t>(array.numel()) * static_cast<uint64_t>(itemsize_of(array.descr));
  const uint64_t have = bytes.size() - start - header_len;
  GAT_CHECK(have == want, name, ": the .npy data is ", have, " bytes, its shape ", shape_str(array.shape),
            " of ", array.descr, " needs ", want,
            have < want ? " (the file is truncated)" : " (bytes after the array)");
  array.bytes = bytes.substr(start + header_len);
  return array;
}

NpyArray read_npy(const std::string& path) { return parse_npy(io::read_regular_file(path), path); }

std::string npy_bytes(const std::string& descr, const Shape& shape, const std::vector<double>& values) {
  GAT_CHECK(itemsize_of(descr) > 0, "npy_bytes: dtype ", quote(descr), " is not written");
  GAT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "npy_bytes: ", values.size(),
            " values for shape ", shape_str(shape));
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const char kind = descr[1];
  const int64_t size = itemsize_of(descr);
  for (double v : values) {
    char buffer[8];
    auto put = [&](auto x) { std::memcpy(buffer, &x, sizeof x); };
    if (kind == 'f') size == 4 ? put(static_cast<float>(v)) : put(v);
    if (kind == 'i')
      size == 1   ? put(static_cast<int8_t>(v))
      : size == 2 ? put(static_cast<int16_t>(v))
      : size == 4 ? put(static_cast<int32_t>(v))
                  : put(static_cast<int64_t>(v));
    if (kind == 'u' || kind == 'b')
      size == 1   ? put(static_cast<uint8_t>(v))
      : size == 2 ? put(static_cast<uint16_t>(v))
      : size == 4 ? put(static_cast<uint32_t>(v))
                  : put(static_cast<uint64_t>(v));
    out.append(buffer, static_cast<size_t>(size));
  }
  return out;
}

}  // namespace gat
