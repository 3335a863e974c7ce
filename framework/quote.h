// Quoting input in error messages, bounded: no file, metadata value or environment variable can
// make a message huge (an 80 MB message for a 20 MB line of a CSV file, before this).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gat {

// `text` in single quotes, at most kQuoteBytes of it: a longer text is cut (at a UTF-8 character
// boundary) and says its length, "'1,2,3,...' (20971520 bytes)". Every message that quotes input
// quotes it through this.
inline constexpr size_t kQuoteBytes = 60;
std::string quote(std::string_view text);

namespace detail {
// detail::fail (framework/check.h) keeps the first kMaxMessageBytes of a longer message, the
// backstop for a message that quotes input without quote().
inline constexpr size_t kMaxMessageBytes = 16384;
}  // namespace detail

}  // namespace gat
