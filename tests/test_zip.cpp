// The zip reader (datasets/zip.h): members written here (tests/zip_testing.h) and by Python's
// zipfile come back byte for byte; every malformed archive is refused naming the archive and the
// member.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gat/datasets/zip.h"
#include "gat/framework/io.h"
#include "gat_testing.h"
#include "zip_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

// Every byte value, in an order deflate cannot shorten much.
std::string noise(size_t n) {
  std::mt19937 rng(7);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

const std::string kText = "source,target\n0,1\n1,2\n2,0\n" + std::string(300, 'x');

}  // namespace

TEST(Zip, ReadsStoredAndDeflatedMembersAsWritten) {
  const std::string binary = noise(70000) + std::string(70000, '\0');  // past one 64 KiB window
  const Zip zip = make_zip({{"ppi/", ""},
                            {"ppi/a.json", kText, true},
                            {"ppi/b.npy", binary, false},
                            {"c.bin", binary, true, true},
                            {"empty", "", true},
                            {"empty_stored", ""}},
                           "a comment");
  const ZipArchive archive(zip.bytes, "t.zip");
  ASSERT_EQ(archive.members().size(), 6u);
  EXPECT_EQ(archive.members()[1].name, "ppi/a.json");
  EXPECT_EQ(archive.members()[1].method, 8);
  EXPECT_LT(archive.members()[1].compressed_size, kText.size());
  EXPECT_EQ(archive.members()[2].method, 0);
  EXPECT_EQ(archive.extract(*archive.find("ppi/a.json")), kText);
  EXPECT_EQ(archive.extract(*archive.find("ppi/b.npy")), binary);
  EXPECT_EQ(archive.extract(*archive.find("c.bin")), binary);
  EXPECT_EQ(archive.extract(*archive.find("empty")), "");
  EXPECT_EQ(archive.extract(*archive.find("empty_stored")), "");
  EXPECT_EQ(archive.extract(*archive.find("ppi/")), "");
  EXPECT_EQ(archive.find("a.json"), nullptr);
  EXPECT_EQ(archive.find("ppi/a.jso"), nullptr);
}

// Another writer than ours: Python's zipfile, seekable (sizes in the local headers) and through a
// pipe (data descriptors, as a streaming writer makes them).
TEST(Zip, ReadsWhatPythonsZipfileWrites) {
  if (std::system("python3 -c 'import zipfile, zlib' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  TempDir dir("gat_zip_python");
  const std::string script =
      "import sys, zipfile\n"
      "out = open(sys.argv[1], 'wb') if sys.argv[1] != '-' else sys.stdout.buffer\n"
      "with zipfile.ZipFile(out, 'w') as z:\n"
      "    z.writestr('ppi/', b'')\n"
      "    z.writestr(zipfile.ZipInfo('ppi/a.json'), b'{\"nodes\": []}' * 100, zipfile.ZIP_DEFLATED)\n"
      "    z.writestr('ppi/b.npy', bytes(range(256)) * 10, zipfile.ZIP_STORED)\n";
  std::ofstream(dir.file("w.py")) << script;
  const std::string py = "python3 '" + dir.file("w.py") + "' ";
  ASSERT_EQ(std::system((py + "'" + dir.file("seekable.zip") + "'").c_str()), 0);
  ASSERT_EQ(std::system((py + "- | cat > '" + dir.file("piped.zip") + "'").c_str()), 0);
  std::string bytes256;
  for (int i = 0; i < 256; ++i) bytes256 += static_cast<char>(i);
  std::string b, json;
  for (int i = 0; i < 10; ++i) b += bytes256;
  for (int i = 0; i < 100; ++i) json += "{\"nodes\": []}";
  for (const char* file : {"seekable.zip", "piped.zip"}) {
    SCOPED_TRACE(file);
    const std::string bytes = io::read_regular_file(dir.file(file));
    // Through the pipe, the members' CRCs and sizes come after their data (flag bit 3).
    EXPECT_EQ((bytes.at(6) & 8) != 0, std::string(file) == "piped.zip");
    const ZipArchive archive(bytes, file);
    ASSERT_EQ(archive.members().size(), 3u);
    EXPECT_EQ(archive.extract(*archive.find("ppi/a.json")), json);
    EXPECT_EQ(archive.extract(*archive.find("ppi/b.npy")), b);
  }
}

TEST(Zip, RefusesMalformedArchivesNamingTheMember) {
  const std::vector<ZipMember> good = {{"ppi/a.json", kText, true}, {"ppi/b.npy", noise(500)}};
  const auto spoiled = [&](const std::function<void(Zip&)>& spoil) {
    Zip zip = make_zip(good);
    spoil(zip);
    return zip.bytes;
  };
  struct Case {
    const char* what;
    std::string bytes;
    std::vector<std::string> parts;
  };
  const Zip base = make_zip(good);
  const std::string inner = make_zip({{"x", "inner"}}).bytes.substr(0, 30 + 1 + 5);  // local header + data
  Zip outer = make_zip({{"a", inner}, {"x", "inner", false, false, 30 + 1}});
  const ScopedEnv default_ratio("GAT_MAX_GZIP_RATIO", std::nullopt);
  const std::vector<Case> cases = {
      {"not a zip",
       "PK not really a zip archive, just text that is long enough",
       {"t.zip", "not a zip archive"}},
      {"empty", "", {"t.zip", "0 bytes", "not a zip archive, or truncated"}},
      {"truncated at its end", base.bytes.substr(0, base.bytes.size() - 1), {"t.zip", "truncated"}},
      {"truncated before its directory", base.bytes.substr(0, base.central[0]), {"t.zip", "truncated"}},
      {"a directory past its end record",
       spoiled([](Zip& z) { z.put32(z.end + kZipDirectoryBytes, 5000); }),
       {"t.zip", "central directory", "runs past its end record"}},
      {"zip64 (entries)", spoiled([](Zip& z) { z.put16(z.end + kZipEntries, 0xffff); }), {"t.zip", "zip64"}},
      {"zip64 (a member's size)",
       spoiled([](Zip& z) { z.put32(z.central[1] + kZipSize, 0xffffffff); }),
       {"t.zip: member 'ppi/b.npy' is zip64"}},
      {"split", spoiled([](Zip& z) { z.put16(z.end + kZipEntriesHere, 1); }), {"t.zip", "split"}},
      {"encrypted",
       spoiled([](Zip& z) { z.put_both16(0, kZipFlags, 1); }),
       {"member 'ppi/a.json' is encrypted"}},
      {"bzip2",
       spoiled([](Zip& z) { z.put_both16(1, kZipMethod, 12); }),
       {"member 'ppi/b.npy'", "compression method 12"}},
      {"a '..' name",
       make_zip({{"ppi/../../etc/passwd", "x"}}).bytes,
       {"member 'ppi/../../etc/passwd'", "'..' component"}},
      {"a '..' name alone", make_zip({{"..", "x"}}).bytes, {"member '..'", "'..' component"}},
      {"an absolute name", make_zip({{"/etc/passwd", "x"}}).bytes, {"member '/etc/passwd'", "absolute"}},
      {"a drive letter", make_zip({{"C:x", "x"}}).bytes, {"member 'C:x'", "absolute"}},
      {"a backslash", make_zip({{"ppi\\..\\x", "x"}}).bytes, {"backslash"}},
      {"a NUL byte", make_zip({{std::string("a\0b", 3), "x"}}).bytes, {"NUL byte"}},
      {"an empty name", make_zip({{"", "x"}}).bytes, {"an empty name"}},
      {"a name twice", make_zip({{"a", "x"}, {"a", "y"}}).bytes, {"member 'a' is in the archive twice"}},
      {"stored sizes that differ",
       spoiled([](Zip& z) { z.put_both32(1, kZipSize, 499); }),
       {"member 'ppi/b.npy' is stored but its sizes differ"}},
      {"a zip bomb",
       make_zip({{"bomb", std::string(size_t{3} << 20, '\0'), true}}).bytes,
       {"member 'bomb' says it inflates to 3145728 bytes", "GAT_MAX_GZIP_RATIO"}},
      {"no local header",
       spoiled([](Zip& z) { z.put32(z.local[1], 0); }),
       {"member 'ppi/b.npy': no local header"}},
      {"a local header of another name",
       spoiled([](Zip& z) { z.bytes[z.local[1] + 30] = 'q'; }),
       {"member 'ppi/b.npy'", "disagrees", "name, flags or method"}},
      {"a local CRC that differs",
       spoiled([](Zip& z) { z.put32(z.local[0] + kZipCrc - 2, 1); }),
       {"member 'ppi/a.json'", "disagrees", "CRC-32 or sizes"}},
      {"a data descriptor that differs",
       [] {
         Zip z = make_zip({{"d", kText, true, true}});
         z.put32(z.central[0] - 4, 1);  // the descriptor's uncompressed size
         return z.bytes;
       }(),
       {"member 'd': its data descriptor", "disagrees"}},
      {"a data descriptor missing",
       [] {
         Zip z = make_zip({{"d", kText, true}});
         z.put_both16(0, kZipFlags, 8);
         return z.bytes;
       }(),
       {"member 'd': its data descriptor", "missing"}},
      {"data that run into the directory",
       spoiled([](Zip& z) {
         z.put_both32(1, kZipCompressedSize, 5000);
         z.put_both32(1, kZipSize, 5000);
       }),
       {"member 'ppi/b.npy'", "run into the central directory"}},
      {"overlapping members", outer.bytes, {"members 'a' and 'x' overlap"}},
      {"a directory entry missing",
       spoiled([](Zip& z) { z.set_entries(3); }),
       {"central directory entry 2 of 3 is missing"}},
      {"bytes after the directory's entries",
       spoiled([](Zip& z) { z.set_entries(1); }),
       {"bytes follow the central directory's 1 entries"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_error([&] { ZipArchive(c.bytes, "t.zip"); }, c.parts);
  }
}

TEST(Zip, RefusesMembersWhoseDataDisagreeWithTheDirectory) {
  struct Case {
    const char* what;
    size_t member;  // 0: 'm', deflated; 1: 's', stored
    std::function<void(Zip&)> spoil;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"a CRC that differs",
       0,
       [](Zip& z) { z.put_both32(0, kZipCrc, 0x12345678); },
       {"t.zip: member 'm'", "CRC-32 0x", "archive says 0x12345678", "corrupt"}},
      {"a stored member's CRC", 1, [](Zip& z) { z.put_both32(1, kZipCrc, 0); }, {"member 's'", "CRC-32"}},
      {"more bytes than it says",
       0,
       [](Zip& z) { z.put_both32(0, kZipSize, 100); },
       {"member 'm' inflates to more than the 100 bytes it says"}},
      {"fewer bytes than it says",
       0,
       [](Zip& z) { z.put_both32(0, kZipSize, 5000); },
       {"member 'm' inflates to", "not the 5000 it says"}},
      {"a truncated deflate stream",
       0,
       [](Zip& z) { z.put_both32(0, kZipCompressedSize, 10); },
       {"member 'm': truncated deflate stream"}},
      // The stream's first block: final, of the reserved type 3.
      {"a corrupt deflate stream",
       0,
       [](Zip& z) { z.bytes[z.local[0] + 30 + 1] = '\x07'; },
       {"member 'm': corrupt deflate stream (invalid block type) after 0 bytes"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Zip zip = make_zip({{"m", kText, true}, {"s", "stored"}});
    c.spoil(zip);
    const ZipArchive archive(zip.bytes, "t.zip");
    expect_error([&] { archive.extract(archive.members()[c.member]); }, c.parts);
  }
  // Bytes after the end of a deflate stream, inside the member's compressed size.
  std::string packed = raw_deflate(kText) + "junk";
  Zip zip = make_zip({{"m", packed}});  // stored, then relabelled as deflated with the right CRC and size
  zip.put_both16(0, kZipMethod, 8);
  zip.put_both32(0, kZipSize, static_cast<uint32_t>(kText.size()));
  zip.put_both32(0, kZipCrc,
                 static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(kText.data()),
                                             static_cast<uInt>(kText.size()))));
  const ZipArchive archive(zip.bytes, "t.zip");
  expect_error([&] { archive.extract(archive.members()[0]); }, {"member 'm': 4 bytes follow the end"});
}
