#include "gat/framework/check.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "gat/framework/quote.h"

namespace gat {
namespace detail {

void fail(const char* file, int line, const std::string& raw) {
  const std::string message = cut_long_words(raw);  // control bytes escaped there
  const size_t kept = std::min(message.size(), kMaxMessageBytes);
  std::string text = message.substr(0, kept);
  if (kept < message.size()) text += concat("... (a message of ", message.size(), " bytes, cut)");
  const char* base = std::strrchr(file, '/');
  throw Error(concat(text, " [", base ? base + 1 : file, ":", line, "]"));
}

}  // namespace detail

namespace {

// `text` with its control bytes but newline and tab written \xNN: a name or value that holds
// ESC or CR cannot move the cursor or rewrite the terminal that shows the message.
std::string escape_controls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte >= 0x20 && byte != 0x7f) || c == '\n' || c == '\t') {
      out += c;
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    }
  }
  return out;
}

}  // namespace

std::string cut_long_words(std::string_view raw) {
  auto inside_character = [](char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; };
  const std::string escaped = escape_controls(raw);
  const std::string_view text = escaped;
  std::string out;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find(' ', at), text.size());
    const std::string_view word = text.substr(at, end - at);
    if (word.size() <= detail::kMaxWordBytes) {
      out += word;
    } else {
      size_t head = detail::kMaxWordBytes / 2, tail = word.size() - detail::kMaxWordBytes / 2;
      while (head > 0 && inside_character(word[head])) --head;
      while (tail < word.size() && inside_character(word[tail])) ++tail;
      out += detail::concat(word.substr(0, head), "...(", word.size(), " bytes)...", word.substr(tail));
    }
    if (end < text.size()) out += ' ';
    at = end + 1;
  }
  return out;
}

std::string quote(std::string_view text) {
  if (text.size() <= kQuoteBytes) return detail::concat("'", text, "'");
  size_t cut = kQuoteBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;  // not inside a character
  return detail::concat("'", text.substr(0, cut), "...' (", text.size(), " bytes)");
}

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) GAT_FAIL(what, ": ", a, " x ", b, " overflows");
  return product;
}

}  // namespace gat
