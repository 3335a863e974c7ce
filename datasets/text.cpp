#include "gat/datasets/text.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

#include "gat/framework/check.h"
#include "gat/framework/io.h"
#include "gat/framework/quote.h"

namespace gat::text {

namespace {
constexpr size_t kInflateChunkBytes = size_t{1} << 16;  // what one inflate() call may produce
}  // namespace

void check_not_utf16(const std::string& bytes, const std::string& path) {
  // UTF-16 (as Windows tools save "Unicode" text): every other byte is 0, and the first field
  // was quoted with its raw byte order mark, FF FE, as "is not a number".
  const bool le = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0xff &&
                  static_cast<unsigned char>(bytes[1]) == 0xfe;
  const bool be = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0xfe &&
                  static_cast<unsigned char>(bytes[1]) == 0xff;
  GAT_CHECK(!le && !be, path, ": UTF-16 text (it starts with the byte order mark ", le ? "FF FE" : "FE FF",
            "); save it as UTF-8 or ASCII");
}

std::string read_file(const std::string& path) {
  std::string text = decode(io::read_regular_file(path), path);
  check_not_utf16(text, path);
  return text;
}

uint64_t max_gzip_ratio() {
  const char* env = std::getenv("GAT_MAX_GZIP_RATIO");
  if (!env || !*env) return kDefaultMaxGzipRatio;
  uint64_t ratio = 0;
  const char* end = env + std::strlen(env);
  const auto [ptr, ec] = std::from_chars(env, end, ratio);
  GAT_CHECK(ec == std::errc() && ptr == end && ratio > 0, "GAT_MAX_GZIP_RATIO=", quote(env),
            " is not a positive integer");
  return ratio;
}

uint64_t max_inflated_bytes(uint64_t compressed_bytes) {
  const uint64_t ratio = max_gzip_ratio();
  return compressed_bytes > (std::numeric_limits<uint64_t>::max() - kGzipSlackBytes) / ratio
             ? std::numeric_limits<uint64_t>::max()
             : compressed_bytes * ratio + kGzipSlackBytes;
}

std::string inflated_beyond(uint64_t compressed_bytes) {
  return detail::concat("more than ", max_inflated_bytes(compressed_bytes), " bytes (", max_gzip_ratio(),
                        " times its ", compressed_bytes, " bytes + ", kGzipSlackBytes >> 20,
                        " MiB); if the file is genuine, raise the ratio with GAT_MAX_GZIP_RATIO");
}

std::string decode(std::string bytes, const std::string& name) {
  if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0x1f ||
      static_cast<unsigned char>(bytes[1]) != 0x8b)
    return bytes;
  const uint64_t limit = max_inflated_bytes(bytes.size());
  z_stream z{};
  GAT_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, name, ": cannot start zlib");
  Bytef* const in = reinterpret_cast<Bytef*>(bytes.data());
  size_t fed = 0;  // input bytes handed to zlib so far (in windows of at most 4 GiB)
  std::string text, error;
  // On the heap: 64 KiB on the stack overflowed a 64 KiB stack (ulimit -s 64).
  std::vector<char> buffer(kInflateChunkBytes);
  for (;;) {
    if (z.avail_in == 0 && fed < bytes.size()) {
      z.next_in = in + fed;
      z.avail_in = static_cast<uInt>(std::min<size_t>(bytes.size() - fed, std::numeric_limits<uInt>::max()));
      fed += z.avail_in;
    }
    z.next_out = reinterpret_cast<Bytef*>(buffer.data());
    z.avail_out = static_cast<uInt>(buffer.size());
    const int status = inflate(&z, Z_NO_FLUSH);
    const size_t produced = buffer.size() - z.avail_out;
    if (text.size() + produced > limit) {
      error = "decompresses to " + inflated_beyond(bytes.size());
      break;
    }
    text.append(buffer.data(), produced);
    const bool input_left = z.avail_in > 0 || fed < bytes.size();
    if (status == Z_STREAM_END) {
      if (!input_left) break;
      inflateReset(&z);  // another gzip member follows
    } else if (status != Z_OK && !(status == Z_BUF_ERROR && input_left)) {
      error = status == Z_BUF_ERROR
                  ? std::string("truncated gzip stream")
                  : detail::concat("corrupt gzip stream (", z.msg ? z.msg : "zlib error", ")");
      error += detail::concat(" after ", text.size(), " decompressed bytes");
      break;
    }
  }
  inflateEnd(&z);
  GAT_CHECK(error.empty(), name, ": ", error);
  return text;
}

Lines::Lines(const std::string& text) : text_(text) {
  constexpr std::string_view kByteOrderMark = "\xef\xbb\xbf";
  if (text_.substr(0, kByteOrderMark.size()) == kByteOrderMark) pos_ = kByteOrderMark.size();
}

bool Lines::next(std::string_view& line) {
  if (pos_ >= text_.size()) return false;
  size_t end = text_.find('\n', pos_);
  if (end == std::string_view::npos) end = text_.size();
  line = text_.substr(pos_, end - pos_);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  pos_ = end + 1;
  ++number_;
  return true;
}

bool blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

namespace {

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

template <class T>
std::vector<T> parse_fields(std::string_view line, const std::string& where, const char* kind) {
  std::vector<T> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    const std::string_view field =
        trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    T value{};
    const char* first = field.data();
    const char* last = field.data() + field.size();
    if (!field.empty() && *first == '+') ++first;  // from_chars takes no leading '+'
    auto [ptr, ec] = std::from_chars(first, last, value);
    if constexpr (std::is_floating_point_v<T>) {
      // from_chars refuses a number below the smallest float; strtof reads it as the nearest float
      // (a subnormal, or 0) and returns infinity only for an overflow, which stays an error.
      if (ec == std::errc::result_out_of_range && ptr == last) {
        value = std::strtof(std::string(first, last).c_str(), nullptr);
        if (!std::isinf(value)) ec = std::errc();
      }
    }
    GAT_CHECK(!field.empty() && ec == std::errc() && ptr == last, where, ": field ", out.size() + 1, " ",
              quote(field), " is not ", kind, ec == std::errc::result_out_of_range ? " (out of range)" : "");
    if constexpr (std::is_floating_point_v<T>)
      GAT_CHECK(std::isfinite(value), where, ": field ", out.size() + 1, " ", quote(field), " is not finite");
    out.push_back(value);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<int64_t> parse_ints(std::string_view line, const std::string& where) {
  return parse_fields<int64_t>(line, where, "an integer");
}

std::vector<float> parse_floats(std::string_view line, const std::string& where) {
  return parse_fields<float>(line, where, "a number");
}

}  // namespace gat::text
