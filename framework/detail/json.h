// JSON parsing shared by the readers of JSON files (the safetensors header, PPI's node-link
// graphs): a key given twice in one object is refused by each reader the same way.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace gat::detail {

// The deepest nesting of arrays and objects parse_json_unique_keys takes. The readers' documents
// need a few levels; nlohmann's dump() and comparisons recurse, so a value nested 100,000 deep
// (a few hundred kilobytes of brackets) overflowed the stack when an error message quoted it.
inline constexpr int kMaxJsonDepth = 64;

// Thrown by parse_json_unique_keys for a document nested deeper than kMaxJsonDepth, with
// nlohmann's exceptions for malformed JSON: what() says so and where.
struct JsonTooDeep : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses `text` (nlohmann's exceptions on malformed JSON, JsonTooDeep past kMaxJsonDepth). The
// first key given twice in one object is set in `duplicate` (left empty when there is none): such
// a document would leave one of the values unused, and readers differ in which one they keep.
nlohmann::json parse_json_unique_keys(const std::string& text, std::string& duplicate);

}  // namespace gat::detail
