#include "gat/datasets/text.h"

#include <zlib.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "gat/framework/check.h"

namespace gat::text {

std::string read_file(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  GAT_CHECK(file != nullptr, path, ": cannot open the file");
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(file, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      const std::string message = gzerror(file, &code);
      gzclose(file);
      GAT_FAIL(path, ": read error after ", text.size(), " bytes: ", message);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  // A truncated gzip stream reads as a short file without an error from gzread; gzclose_r
  // reports it.
  const int closed = gzclose(file);
  GAT_CHECK(closed == Z_OK, path, ": read error (truncated or corrupt gzip stream, zlib code ", closed, ")");
  return text;
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

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

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
    const auto [ptr, ec] = std::from_chars(first, last, value);
    GAT_CHECK(!field.empty() && ec == std::errc() && ptr == last, where, ": field ", out.size() + 1, " '",
              field, "' is not ", kind, ec == std::errc::result_out_of_range ? " (out of range)" : "");
    if constexpr (std::is_floating_point_v<T>)
      GAT_CHECK(std::isfinite(value), where, ": field ", out.size() + 1, " '", field, "' is not finite");
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
