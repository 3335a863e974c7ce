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
// The backstops for a message that echoes input without quote() (a path, a flag's value), both
// applied by detail::fail (framework/check.h) to every message. A word (a run of bytes without a
// space) of more than kMaxWordBytes keeps its first and last kMaxWordBytes / 2 bytes around
// "...(N bytes)...", so a path's file name still shows (a 5 KB --data-dir made a 5 KB message);
// then a message keeps its first kMaxMessageBytes.
inline constexpr size_t kMaxWordBytes = 256;
inline constexpr size_t kMaxMessageBytes = 16384;
}  // namespace detail

// `text` with its control bytes (but newline and tab) written \xNN, and every word longer than
// detail::kMaxWordBytes cut so (never inside a UTF-8 character). The programs pass what other
// libraries throw (std::filesystem's errors name paths, CLI11's quote flag values) through it
// too, and progress lines (a download's URL).
std::string cut_long_words(std::string_view text);

}  // namespace gat
