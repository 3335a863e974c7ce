// Zip archives in memory for the tests of the zip reader (datasets/zip.h) and of fetch_ppi: members
// stored or deflated (zlib), with or without a data descriptor, and the offsets of every record so
// that a test can spoil one field.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gzip_testing.h"

namespace gat::testing {

// Offsets of a central directory entry's fields (APPNOTE 4.3.12).
inline constexpr size_t kZipFlags = 8, kZipMethod = 10, kZipCrc = 16, kZipCompressedSize = 20, kZipSize = 24;
// Of the end record's (APPNOTE 4.3.16).
inline constexpr size_t kZipEntriesHere = 8, kZipEntries = 10, kZipDirectoryBytes = 12;

struct ZipMember {
  std::string name;
  std::string data;
  bool deflate = false;
  bool descriptor = false;  // flag bit 3: zeros in the local header, a signed descriptor after the data
  int64_t local_at = -1;    // >= 0: no local header of its own; the directory points at this offset
};

struct Zip {
  std::string bytes;
  std::vector<size_t> local;    // each member's local header (its local_at when given)
  std::vector<size_t> central;  // each member's central directory entry
  size_t end = 0;               // the end-of-central-directory record

  void put16(size_t at, uint16_t v) {
    bytes[at] = static_cast<char>(v & 0xff);
    bytes[at + 1] = static_cast<char>(v >> 8);
  }
  void put32(size_t at, uint32_t v) {
    put16(at, static_cast<uint16_t>(v & 0xffff));
    put16(at + 2, static_cast<uint16_t>(v >> 16));
  }
  // A field of member k in both its local header and its directory entry (offsets in the
  // central entry; the local header's are 2 smaller, from flags to the uncompressed size).
  void put_both16(size_t k, size_t central_field, uint16_t v) {
    put16(local[k] + central_field - 2, v);
    put16(central[k] + central_field, v);
  }
  void put_both32(size_t k, size_t central_field, uint32_t v) {
    put32(local[k] + central_field - 2, v);
    put32(central[k] + central_field, v);
  }
  // The end record's two counts of entries.
  void set_entries(uint16_t n) {
    put16(end + kZipEntriesHere, n);
    put16(end + kZipEntries, n);
  }
};

inline std::string raw_deflate(const std::string& data) { return deflate_bytes(data, -MAX_WBITS); }

inline Zip make_zip(const std::vector<ZipMember>& members, const std::string& comment = "") {
  Zip zip;
  const auto le16 = [](std::string& s, uint32_t v) {
    s += static_cast<char>(v & 0xff);
    s += static_cast<char>((v >> 8) & 0xff);
  };
  const auto le32 = [&](std::string& s, uint32_t v) {
    le16(s, v & 0xffff);
    le16(s, v >> 16);
  };
  std::string directory;
  std::vector<std::string> entries;
  for (const ZipMember& m : members) {
    const std::string packed = m.deflate ? raw_deflate(m.data) : m.data;
    const auto crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(m.data.data()), static_cast<uInt>(m.data.size())));
    const uint16_t flags = m.descriptor ? 8 : 0, method = m.deflate ? 8 : 0;
    const auto csize = static_cast<uint32_t>(packed.size()), size = static_cast<uint32_t>(m.data.size());
    size_t local = zip.bytes.size();
    if (m.local_at >= 0) {
      local = static_cast<size_t>(m.local_at);
    } else {
      std::string& s = zip.bytes;
      le32(s, 0x04034b50);
      le16(s, 20);
      le16(s, flags);
      le16(s, method);
      le32(s, 0);  // time and date
      le32(s, m.descriptor ? 0 : crc);
      le32(s, m.descriptor ? 0 : csize);
      le32(s, m.descriptor ? 0 : size);
      le16(s, static_cast<uint32_t>(m.name.size()));
      le16(s, 0);
      s += m.name + packed;
      if (m.descriptor) {
        le32(s, 0x08074b50);
        le32(s, crc);
        le32(s, csize);
        le32(s, size);
      }
    }
    zip.local.push_back(local);
    std::string e;
    le32(e, 0x02014b50);
    le16(e, 20);  // made by
    le16(e, 20);  // needed
    le16(e, flags);
    le16(e, method);
    le32(e, 0);
    le32(e, crc);
    le32(e, csize);
    le32(e, size);
    le16(e, static_cast<uint32_t>(m.name.size()));
    le32(e, 0);  // extra and comment lengths
    le32(e, 0);  // start disk and internal attributes
    le32(e, 0);  // external attributes
    le32(e, static_cast<uint32_t>(local));
    entries.push_back(e + m.name);
  }
  const size_t directory_offset = zip.bytes.size();
  for (const std::string& e : entries) {
    zip.central.push_back(zip.bytes.size());
    zip.bytes += e;
  }
  zip.end = zip.bytes.size();
  std::string& s = zip.bytes;
  le32(s, 0x06054b50);
  le32(s, 0);  // this disk, the directory's disk
  le16(s, static_cast<uint32_t>(members.size()));
  le16(s, static_cast<uint32_t>(members.size()));
  le32(s, static_cast<uint32_t>(zip.end - directory_offset));
  le32(s, static_cast<uint32_t>(directory_offset));
  le16(s, static_cast<uint32_t>(comment.size()));
  s += comment;
  return zip;
}

}  // namespace gat::testing
