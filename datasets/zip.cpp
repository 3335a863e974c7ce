#include "gat/datasets/zip.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>

#include "gat/datasets/text.h"
#include "gat/framework/check.h"
#include "gat/framework/quote.h"

namespace gat {

namespace {

// Signatures and fixed sizes of APPNOTE's records.
constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndOfDirectorySignature = 0x06054b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kDataDescriptorSignature = 0x08074b50;
constexpr size_t kLocalHeaderBytes = 30;
constexpr size_t kCentralHeaderBytes = 46;
constexpr size_t kEndOfDirectoryBytes = 22;
constexpr size_t kZip64LocatorBytes = 20;
constexpr size_t kMaxCommentBytes = 0xffff;
// General-purpose flag bits.
constexpr uint16_t kEncrypted = 1 << 0;
constexpr uint16_t kDataDescriptor = 1 << 3;
constexpr uint16_t kStrongEncryption = 1 << 6;

uint16_t le16(std::string_view b, size_t at) {
  return static_cast<uint16_t>(static_cast<unsigned char>(b[at]) | static_cast<unsigned char>(b[at + 1])
                                                                       << 8);
}
uint32_t le32(std::string_view b, size_t at) {
  return static_cast<uint32_t>(le16(b, at)) | static_cast<uint32_t>(le16(b, at + 2)) << 16;
}

// Why `name` may not be written under a folder, or "" when it may.
std::string unsafe_name(std::string_view name) {
  if (name.empty()) return "an empty name";
  if (name.find('\0') != std::string_view::npos) return "a NUL byte in its name";
  if (name.find('\\') != std::string_view::npos) return "a backslash in its name";
  if (name.front() == '/' || (name.size() >= 2 && name[1] == ':')) return "an absolute name";
  for (size_t start = 0; start <= name.size();) {
    const size_t slash = std::min(name.find('/', start), name.size());
    if (name.substr(start, slash - start) == "..") return "a '..' component in its name";
    start = slash + 1;
  }
  return "";
}

// The CRC-32 of `bytes` (zlib's, as zip stores it).
uint32_t crc32_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < bytes.size();) {
    const auto chunk =
        static_cast<uInt>(std::min<size_t>(bytes.size() - done, std::numeric_limits<uInt>::max()));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), chunk);
    done += chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

}  // namespace

ZipArchive::ZipArchive(std::string bytes, std::string name)
    : bytes_(std::move(bytes)), name_(std::move(name)) {
  const std::string_view b = bytes_;
  // The end-of-central-directory record: the last one whose comment ends the file.
  size_t end = std::string_view::npos;
  if (b.size() >= kEndOfDirectoryBytes) {
    const size_t lowest =
        b.size() - kEndOfDirectoryBytes - std::min(b.size() - kEndOfDirectoryBytes, kMaxCommentBytes);
    for (size_t at = b.size() - kEndOfDirectoryBytes + 1; at-- > lowest;)
      if (le32(b, at) == kEndOfDirectorySignature &&
          at + kEndOfDirectoryBytes + le16(b, at + 20) == b.size()) {
        end = at;
        break;
      }
  }
  GAT_CHECK(end != std::string_view::npos, name_, ": not a zip archive, or truncated (", b.size(),
            " bytes, and no end-of-central-directory record ends them)");
  const uint16_t disk = le16(b, end + 4), directory_disk = le16(b, end + 6);
  const uint16_t entries_here = le16(b, end + 8), entries = le16(b, end + 10);
  const uint32_t directory_bytes = le32(b, end + 12), directory_offset = le32(b, end + 16);
  GAT_CHECK(!(end >= kZip64LocatorBytes && le32(b, end - kZip64LocatorBytes) == kZip64LocatorSignature) &&
                entries != 0xffff && directory_bytes != 0xffffffff && directory_offset != 0xffffffff,
            name_, ": a zip64 archive (not read: no archive this reads needs it)");
  GAT_CHECK(disk == 0 && directory_disk == 0 && entries_here == entries, name_,
            ": a split (multi-disk) archive, which is not read");
  GAT_CHECK(uint64_t{directory_offset} + directory_bytes <= end, name_, ": its central directory (",
            directory_bytes, " bytes at offset ", directory_offset, ") runs past its end record at offset ",
            end, ": truncated or corrupt");
  const std::string_view directory = b.substr(directory_offset, directory_bytes);
  std::set<std::string_view> names;
  struct Extent {  // of a member's local header, data and descriptor
    uint64_t begin, end;
    size_t member;
    bool operator<(const Extent& o) const { return begin < o.begin; }
  };
  std::vector<Extent> extents;
  size_t at = 0;
  for (uint16_t k = 0; k < entries; ++k) {
    GAT_CHECK(at + kCentralHeaderBytes <= directory.size() && le32(directory, at) == kCentralHeaderSignature,
              name_, ": central directory entry ", k, " of ", entries, " is missing or corrupt (at offset ",
              directory_offset + at, ")");
    Member m;
    const uint16_t flags = le16(directory, at + 8);
    m.method = le16(directory, at + 10);
    m.crc32 = le32(directory, at + 16);
    m.compressed_size = le32(directory, at + 20);
    m.size = le32(directory, at + 24);
    const size_t name_bytes = le16(directory, at + 28);
    const size_t record_bytes =
        kCentralHeaderBytes + name_bytes + le16(directory, at + 30) + le16(directory, at + 32);
    const uint16_t start_disk = le16(directory, at + 34);
    const uint32_t local_offset = le32(directory, at + 42);
    GAT_CHECK(at + record_bytes <= directory.size(), name_, ": central directory entry ", k,
              " runs past the directory's ", directory.size(), " bytes");
    m.name = std::string(directory.substr(at + kCentralHeaderBytes, name_bytes));
    at += record_bytes;
    const std::string member = detail::concat(name_, ": member ", quote(m.name));
    GAT_CHECK(m.compressed_size != 0xffffffff && m.size != 0xffffffff && local_offset != 0xffffffff &&
                  start_disk != 0xffff,
              member, " is zip64 (not read: no archive this reads needs it)");
    GAT_CHECK(start_disk == 0, member, " starts on disk ", start_disk,
              " of a split archive, which is not read");
    GAT_CHECK(!(flags & (kEncrypted | kStrongEncryption)), member, " is encrypted");
    GAT_CHECK(m.method == 0 || m.method == 8, member, ": compression method ", m.method,
              " is not read (only 0, stored, and 8, deflated)");
    const std::string why = unsafe_name(m.name);
    GAT_CHECK(why.empty(), member, " has ", why, ", which no extracted file may have");
    GAT_CHECK(names.insert(directory.substr(at - record_bytes + kCentralHeaderBytes, name_bytes)).second,
              member, " is in the archive twice");
    GAT_CHECK(m.method != 0 || m.compressed_size == m.size, member, " is stored but its sizes differ (",
              m.compressed_size, " bytes in the archive, ", m.size, " extracted)");
    GAT_CHECK(m.size <= text::max_inflated_bytes(m.compressed_size), member, " says it inflates to ", m.size,
              " bytes: ", text::inflated_beyond(m.compressed_size));
    // Its local header: the same name, method and flags, and (without a data descriptor) the same
    // CRC and sizes.
    GAT_CHECK(uint64_t{local_offset} + kLocalHeaderBytes <= directory_offset &&
                  le32(b, local_offset) == kLocalHeaderSignature,
              member, ": no local header at offset ", local_offset, " (truncated or corrupt)");
    const size_t local_name_bytes = le16(b, local_offset + 26);
    m.data_offset =
        uint64_t{local_offset} + kLocalHeaderBytes + local_name_bytes + le16(b, local_offset + 28);
    GAT_CHECK(m.data_offset + m.compressed_size <= directory_offset, member, ": its ", m.compressed_size,
              " bytes at offset ", m.data_offset, " run into the central directory at offset ",
              directory_offset, " (truncated or corrupt)");
    GAT_CHECK(b.substr(local_offset + kLocalHeaderBytes, local_name_bytes) == m.name &&
                  le16(b, local_offset + 6) == flags && le16(b, local_offset + 8) == m.method,
              member, ": its local header at offset ", local_offset,
              " disagrees with the central directory (name, flags or method)");
    uint64_t data_end = m.data_offset + m.compressed_size;
    if (!(flags & kDataDescriptor)) {
      GAT_CHECK(le32(b, local_offset + 14) == m.crc32 && le32(b, local_offset + 18) == m.compressed_size &&
                    le32(b, local_offset + 22) == m.size,
                member, ": its local header at offset ", local_offset,
                " disagrees with the central directory (CRC-32 or sizes)");
    } else {
      // The descriptor after the data: an optional signature, the CRC-32 and both sizes.
      const bool signed_descriptor =
          data_end + 4 <= directory_offset && le32(b, data_end) == kDataDescriptorSignature;
      const uint64_t descriptor = data_end + (signed_descriptor ? 4 : 0);
      GAT_CHECK(descriptor + 12 <= directory_offset && le32(b, descriptor) == m.crc32 &&
                    le32(b, descriptor + 4) == m.compressed_size && le32(b, descriptor + 8) == m.size,
                member, ": its data descriptor at offset ", data_end,
                " is missing or disagrees with the central directory (CRC-32 or sizes)");
      data_end = descriptor + 12;
    }
    extents.push_back({local_offset, data_end, members_.size()});
    members_.push_back(std::move(m));
  }
  GAT_CHECK(at == directory.size(), name_, ": ", directory.size() - at,
            " bytes follow the central directory's ", entries, " entries");
  // No two members share bytes (one deflate stream named many times would multiply what a small
  // archive inflates to).
  std::sort(extents.begin(), extents.end());
  for (size_t k = 1; k < extents.size(); ++k)
    GAT_CHECK(extents[k - 1].end <= extents[k].begin, name_, ": members ",
              quote(members_[extents[k - 1].member].name), " and ", quote(members_[extents[k].member].name),
              " overlap (bytes ", extents[k].begin, " to ", std::min(extents[k - 1].end, extents[k].end),
              ")");
}

const ZipArchive::Member* ZipArchive::find(std::string_view name) const {
  for (const Member& m : members_)
    if (m.name == name) return &m;
  return nullptr;
}

std::string ZipArchive::extract(const Member& m) const {
  const std::string member = detail::concat(name_, ": member ", quote(m.name));
  const std::string_view packed = std::string_view(bytes_).substr(m.data_offset, m.compressed_size);
  std::string out;
  if (m.method == 0) {
    out = std::string(packed);
  } else {
    // Raw deflate (no zlib or gzip header) into the declared size and one byte more: a stream that
    // fills that byte inflates to more than it says. Zip64 is refused, so both sizes fit a uInt.
    out.resize(m.size + 1);
    z_stream z{};
    GAT_CHECK(inflateInit2(&z, -MAX_WBITS) == Z_OK, member, ": cannot start zlib");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
    z.avail_in = static_cast<uInt>(packed.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int status = inflate(&z, Z_FINISH);
    const uint64_t produced = z.total_out;
    const uInt left = z.avail_in;
    const std::string message = z.msg ? z.msg : "zlib error";
    inflateEnd(&z);
    GAT_CHECK(produced <= m.size, member, " inflates to more than the ", m.size, " bytes it says");
    GAT_CHECK(status != Z_DATA_ERROR, member, ": corrupt deflate stream (", message, ") after ", produced,
              " bytes");
    GAT_CHECK(
        status == Z_STREAM_END, member, ": ",
        status == Z_BUF_ERROR ? "truncated deflate stream" : "deflate stream not read (" + message + ")",
        " after ", produced, " of its ", m.size, " bytes");
    GAT_CHECK(produced == m.size, member, " inflates to ", produced, " bytes, not the ", m.size, " it says");
    GAT_CHECK(left == 0, member, ": ", left, " bytes follow the end of its deflate stream");
    out.resize(m.size);
  }
  const uint32_t crc = crc32_of(out);
  GAT_CHECK(crc == m.crc32, member, ": CRC-32 ", hex32(crc), " where the archive says ", hex32(m.crc32),
            " (corrupt)");
  return out;
}

}  // namespace gat
