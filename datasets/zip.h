// A zip archive held in memory, read as PKWARE's APPNOTE describes it: the end-of-central-directory
// record, the central directory, and the members stored (method 0) or deflated (method 8). PPI's
// raw files come as one (datasets/download.h, fetch_ppi).
//
// The constructor checks the whole directory before any member is read, and refuses with a
// gat::Error that names the archive (and the member, quoted and bounded): a file with no
// end-of-central-directory record (not a zip, or truncated), a directory that runs past its
// record, zip64 and split archives, encrypted members, other compression methods, names that are
// empty, absolute ("/x", "C:x"), with a ".." component, a backslash or a NUL byte, a name given
// twice, a local header that is missing or disagrees with the directory (name, method, flags, CRC
// or sizes), a data descriptor that disagrees with it, members whose bytes overlap or run into the
// directory, a stored member whose two sizes differ, and a declared size beyond the inflate guard
// of datasets/text.h (max_inflated_bytes: GAT_MAX_GZIP_RATIO times the compressed bytes plus
// 1 MiB). extract() refuses a member that inflates to more or fewer bytes than it declares, a
// truncated or corrupt deflate stream, bytes after its end, and a CRC-32 that does not match.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gat {

class ZipArchive {
 public:
  struct Member {
    std::string name;     // as stored: '/' separates folders; a folder's entry ends with '/'
    uint16_t method = 0;  // 0 stored, 8 deflated
    uint32_t crc32 = 0;   // of the extracted bytes
    uint64_t compressed_size = 0;
    uint64_t size = 0;         // of the extracted bytes
    uint64_t data_offset = 0;  // of its compressed bytes in the archive
  };

  // `bytes`: the whole archive; `name` (its path) starts every error message.
  ZipArchive(std::string bytes, std::string name);

  const std::vector<Member>& members() const { return members_; }
  // The member called exactly `name`, or null.
  const Member* find(std::string_view name) const;
  // The member's bytes, inflated and checked against its sizes and CRC-32.
  std::string extract(const Member& member) const;

 private:
  std::string bytes_, name_;
  std::vector<Member> members_;
};

}  // namespace gat
