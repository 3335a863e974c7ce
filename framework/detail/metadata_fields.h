// A struct's numeric fields as checkpoint metadata (io::Metadata): each field's key, its member
// and the range its value must lie in. GATConfig (models/gat.cpp) and CheckpointInfo
// (train/checkpoint.cpp) list theirs in a table of AnyMetadataField and walk it to write, read
// and check them.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>

#include "gat/framework/check.h"
#include "gat/framework/io.h"

namespace gat::detail {

template <class S, class T>
struct MetadataField {
  const char* key;
  T S::*member;
  Range<T> range;
  bool later = false;  // checkpoints written before the key was added lack it
};

template <class S>
using AnyMetadataField =
    std::variant<MetadataField<S, int64_t>, MetadataField<S, uint64_t>, MetadataField<S, double>>;

// Calls f(field) for each field of the table, in its order.
template <class S, size_t N, class F>
void for_each_field(const AnyMetadataField<S> (&fields)[N], F&& f) {
  for (const AnyMetadataField<S>& any : fields) std::visit(f, any);
}

template <class S, class T>
void write_field(const MetadataField<S, T>& field, const S& s, io::Metadata& metadata) {
  metadata[field.key] = io::metadata_number(s.*field.member);
}

// The field's value from `read` (MetadataReader's integer, unsigned_integer or number, by type).
template <class S, class T>
void read_field(const MetadataField<S, T>& field, const io::MetadataReader& read, S& s) {
  if constexpr (std::is_same_v<T, int64_t>)
    s.*field.member = read.integer(field.key);
  else if constexpr (std::is_same_v<T, uint64_t>)
    s.*field.member = read.unsigned_integer(field.key);
  else
    s.*field.member = read.number(field.key);
}

// check_in_range(prefix + key, value, range).
template <class S, class T>
void check_field(const MetadataField<S, T>& field, const std::string& prefix, const S& s) {
  check_in_range(prefix + field.key, s.*field.member, field.range);
}

}  // namespace gat::detail
