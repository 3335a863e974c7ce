// JSON parsing shared by the readers of JSON files (the safetensors header, PPI's node-link
// graphs): a key given twice in one object is refused by each reader the same way.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gat::detail {

// Parses `text` (nlohmann's exceptions on malformed JSON). The first key given twice in one
// object is set in `duplicate` (left empty when there is none): such a document would leave one
// of the values unused, and readers differ in which one they keep.
nlohmann::json parse_json_unique_keys(const std::string& text, std::string& duplicate);

}  // namespace gat::detail
