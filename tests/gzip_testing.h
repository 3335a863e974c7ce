// gzip and raw deflate in memory (best compression), for tests and fuzzers that write .gz inputs
// or zip members (zip_testing.h).
#pragma once

#include <zlib.h>

#include <string>

namespace gat::testing {

// `text` deflated in one stream; `window_bits` as deflateInit2 takes them: 16 + MAX_WBITS for one
// gzip member, -MAX_WBITS for raw deflate (no header or trailer, as zip stores it).
inline std::string deflate_bytes(const std::string& text, int window_bits) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline std::string gzip(const std::string& text) { return deflate_bytes(text, 16 + MAX_WBITS); }

}  // namespace gat::testing
