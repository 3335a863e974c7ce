// Text input shared by the dataset loaders: whole files (plain or gzip, read through zlib) split
// into lines, and comma-separated numbers parsed with errors that name "file:line".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gat::text {

// The whole of a regular file (io::read_regular_file), decompressed when it is gzip (it starts
// with the gzip magic bytes; concatenated members are read one after the other). Throws a
// gat::Error naming the path when it cannot be opened, read or decompressed, or when it is UTF-16
// text (check_not_utf16).
std::string read_file(const std::string& path);

// Throws a gat::Error naming `path` when `bytes` start with a UTF-16 byte order mark (as Windows
// tools save "Unicode" text), saying to save the file as UTF-8: every reader of text or JSON
// otherwise quoted the mark's raw bytes in its first error.
void check_not_utf16(const std::string& bytes, const std::string& path);

// `bytes` decompressed when they start with the gzip magic bytes, else unchanged. A gzip stream
// may decompress to at most max_gzip_ratio() times its size plus kGzipSlackBytes: deflate can
// reach about 1032:1, which no real CSV file needs, so a small file cannot make a huge
// allocation (a "zip bomb"). `name` starts every error message.
std::string decode(std::string bytes, const std::string& name);
inline constexpr uint64_t kDefaultMaxGzipRatio = 200;
inline constexpr uint64_t kGzipSlackBytes = uint64_t{1} << 20;
// $GAT_MAX_GZIP_RATIO when set (a positive integer), else kDefaultMaxGzipRatio.
uint64_t max_gzip_ratio();
// The most bytes that `compressed_bytes` of gzip or deflate data may decompress to: max_gzip_ratio()
// times as many plus kGzipSlackBytes (at most 2^64 - 1). decode() and the zip reader (zip.h) bound
// every inflate by it.
uint64_t max_inflated_bytes(uint64_t compressed_bytes);
// What an error says of data that would decompress beyond that bound: the bound, how it is made,
// and how to raise it.
std::string inflated_beyond(uint64_t compressed_bytes);

// Splits text into lines ('\n', an optional '\r' before it is dropped; a last line without
// '\n' counts). Line numbers are 1-based. A UTF-8 byte order mark at the start (spreadsheets
// write one) is skipped.
class Lines {
 public:
  explicit Lines(const std::string& text);
  // The next line into `line`; false at the end.
  bool next(std::string_view& line);
  size_t number() const { return number_; }  // of the line last returned

 private:
  std::string_view text_;
  size_t pos_ = 0;
  size_t number_ = 0;
};

// True for a line that is empty or only blanks.
bool blank(std::string_view line);
// Comma-separated fields of one line (surrounding blanks allowed) as integers / floats. `where`
// ("file:line") starts every error message, which quotes the field (bounded: quote()). A float
// must be finite: a number beyond the largest float is refused as out of range, one below the
// smallest reads as the nearest float (a subnormal, or 0), as strtof reads it.
std::vector<int64_t> parse_ints(std::string_view line, const std::string& where);
std::vector<float> parse_floats(std::string_view line, const std::string& where);

}  // namespace gat::text
