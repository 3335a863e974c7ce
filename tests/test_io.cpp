// Safetensors checkpoints: round trips, a file built byte by byte here, and every way a file can
// be broken (each refused with a message naming the file and the tensor).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gat/framework/io.h"
#include "gat/framework/module.h"
#include "gat_testing.h"

using namespace gat;
using gat::testing::expect_error;
using gat::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

template <class T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// A file with the given JSON header text and data bytes.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// Loading `bytes` must throw a gat::Error whose message contains the file name and `expected`.
void expect_refused(const TempDir& dir, const std::string& bytes, const std::string& expected) {
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  expect_error([&] { io::load_safetensors(path); }, {path, expected});
}

struct TwoParams : Module {
  Tensor weight, bias;
  TwoParams(int64_t rows, DType bias_dtype) {
    weight = register_parameter("weight", Tensor::zeros({rows, 3}, DType::f32));
    bias = register_parameter("bias", Tensor::zeros({3}, bias_dtype));
  }
};

struct Nested : Module {
  std::shared_ptr<TwoParams> inner;
  Tensor scale;
  Nested() {
    inner = register_module("inner", std::make_shared<TwoParams>(2, DType::f32));
    scale = register_parameter("scale", Tensor::full({1}, 2.0));
  }
};

}  // namespace

TEST(Safetensors, RoundTripKeepsValuesShapesDtypesAndMetadata) {
  TempDir dir("gat_test_io");
  const std::string path = dir.file("ckpt.safetensors");
  io::TensorMap tensors{
      {"zeta", Tensor::from_vector<float>({1.5f, -2.25f, 3.0f, 1e-30f, 7.0f, -0.0f}, {2, 3})},
      {"alpha", Tensor::from_vector<double>({3.141592653589793, -1e300}, {2})},
      {"mid", Tensor::from_vector<int32_t>({-7, 0, 2147483647}, {3, 1})},
      {"scalar", Tensor::scalar(0.5, DType::f64)},
      {"empty", Tensor::zeros({0, 4}, DType::f32)},
  };
  io::save_safetensors(path, tensors, {{"dataset", "cora"}, {"epoch", "12"}});
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  io::Safetensors back = io::load_safetensors(path);
  EXPECT_EQ(back.metadata, (io::Metadata{{"dataset", "cora"}, {"epoch", "12"}}));
  ASSERT_EQ(back.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_EQ(back.tensors.count(name), 1u) << name;
    const Tensor& b = back.tensors.at(name);
    EXPECT_EQ(b.shape(), t.shape()) << name;
    EXPECT_EQ(b.dtype(), t.dtype()) << name;
    if (t.nbytes() > 0) {
      EXPECT_EQ(std::memcmp(b.raw_data(), t.raw_data(), t.nbytes()), 0) << name;
    }
  }

  // The layout on disk: little-endian length, an 8-byte aligned JSON header, tensors back to
  // back in name order.
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t{static_cast<unsigned char>(bytes[static_cast<size_t>(i)])} << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["zeta"]["dtype"], "F32");
  EXPECT_EQ(header["alpha"]["dtype"], "F64");
  EXPECT_EQ(header["mid"]["dtype"], "I32");
  EXPECT_EQ(header["mid"]["shape"], nlohmann::json({3, 1}));
  EXPECT_EQ(header["alpha"]["data_offsets"], nlohmann::json({0, 16}));  // first by name
  EXPECT_EQ(header["empty"]["data_offsets"], nlohmann::json({16, 16}));
  EXPECT_EQ(header["mid"]["data_offsets"], nlohmann::json({16, 28}));
  EXPECT_EQ(header["scalar"]["data_offsets"], nlohmann::json({28, 36}));
  EXPECT_EQ(header["zeta"]["data_offsets"], nlohmann::json({36, 60}));
  EXPECT_EQ(bytes.size(), 8 + n + 60);
}

TEST(Safetensors, SavingOverAnExistingFileReplacesItWhole) {
  TempDir dir("gat_test_io");
  const std::string path = dir.file("ckpt.safetensors");
  io::save_safetensors(path, {{"a", Tensor::full({100}, 1.0)}});
  io::save_safetensors(path, {{"b", Tensor::full({2}, 2.0)}});
  io::Safetensors back = io::load_safetensors(path);
  ASSERT_EQ(back.tensors.size(), 1u);
  EXPECT_EQ(back.tensors.at("b").to_vector<float>(), (std::vector<float>{2.0f, 2.0f}));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(Safetensors, SaveIntoAMissingDirectoryThrowsNamingTheFile) {
  TempDir dir("gat_test_io");
  const std::string path = dir.file("no/such/dir/ckpt.safetensors");
  expect_error(
      [&] {
        io::save_safetensors(path, {{"a", Tensor::full({1}, 1.0)}});
      },
      {path, "No such file or directory"});
}

// Only a regular file or a new path is written: anything else at PATH is refused before a byte
// is written, and left as it was.
TEST(Safetensors, SaveRefusesLinksDirectoriesAndFifos) {
  TempDir dir("gat_test_io");
  const io::TensorMap tensors = {{"a", Tensor::full({2}, 1.0)}};
  std::ofstream(dir.file("victim")) << "precious";
  fs::create_symlink(dir.file("victim"), dir.file("link"));
  fs::create_directory(dir.file("folder"));
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0644), 0);
  const std::pair<std::string, const char*> cases[] = {
      {dir.file("link"), " is a symbolic link"},
      {dir.file("folder"), " is a directory"},
      {dir.file("fifo"), " is a FIFO"},
      {"", "the path is empty"},
  };
  for (const auto& [path, why] : cases)
    expect_error([&, path = path] { io::save_safetensors(path, tensors); }, {path + why});
  EXPECT_TRUE(fs::is_symlink(dir.file("link")));
  EXPECT_TRUE(fs::is_fifo(dir.file("fifo")));
  std::ifstream in(dir.file("victim"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 4);
}

// A write that fails (here: the file size limit) leaves neither the temporary file nor a partial
// checkpoint, and an old checkpoint at PATH stays whole.
TEST(Safetensors, AFailedWriteLeavesNoTemporaryFile) {
  TempDir dir("gat_test_io");
  const std::string path = dir.file("ckpt.safetensors");
  io::save_safetensors(path, {{"old", Tensor::full({1}, 1.0)}});
  const auto before = fs::file_size(path);
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // a failed write, not a killed process
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    io::save_safetensors(path, {{"big", Tensor::full({100000}, 2.0)}});
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  EXPECT_EQ(fs::file_size(path), before);
  EXPECT_EQ(io::load_safetensors(path).tensors.count("old"), 1u);
}

// Reading takes regular files only: a device such as /dev/zero would never end.
TEST(Safetensors, LoadRefusesDevicesAndDirectories) {
  TempDir dir("gat_test_io");
  for (const auto& [path, why] : {std::pair<std::string, const char*>{"/dev/zero", " is a character device"},
                                  {dir.path().string(), " is a directory"}})
    expect_error([&, path = path] { io::load_safetensors(path); }, {path + why + ", not a regular file"});
}

// bf16 tensors are stored as safetensors' BF16 (2 bytes each, as PyTorch writes them), bit for bit.
TEST(Safetensors, Bf16TensorsRoundTripAsBF16) {
  TempDir dir("gat_test_io");
  const std::string path = dir.file("bf16.safetensors");
  const Tensor h =
      Tensor::from_vector<bf16>({bf16{0x3F80}, bf16{0xC020}, bf16{0x7F80}}, {3});  // 1, -2.5, inf
  io::save_safetensors(path, {{"h", h}});
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t{static_cast<unsigned char>(bytes[static_cast<size_t>(i)])} << (8 * i);
  EXPECT_EQ(nlohmann::json::parse(bytes.substr(8, n))["h"]["dtype"], "BF16");
  EXPECT_EQ(bytes.size(), 8 + n + 6);
  const Tensor back = io::load_safetensors(path).tensors.at("h");
  EXPECT_EQ(back.dtype(), DType::bf16);
  EXPECT_EQ(std::memcmp(back.raw_data(), h.raw_data(), h.nbytes()), 0);
}

TEST(Safetensors, FileWrittenByHandLoads) {
  TempDir dir("gat_test_io");
  const std::string path = dir.file("hand.safetensors");
  // Tensors listed out of order in the header and stored in the other order in the data.
  const std::string header = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[12,28]},)"
                             R"("idx":{"data_offsets":[0,12],"shape":[3],"dtype":"I32"},)"
                             R"("__metadata__":{"format":"pt"}}   )";  // trailing spaces are allowed padding
  const std::string data = raw<int32_t>({4, -5, 6}) + raw<float>({0.5f, 1.5f, -2.0f, 8.0f});
  write_bytes(path, safetensors_bytes(header, data));

  io::Safetensors st = io::load_safetensors(path);
  EXPECT_EQ(st.metadata, (io::Metadata{{"format", "pt"}}));
  ASSERT_EQ(st.tensors.size(), 2u);
  EXPECT_EQ(st.tensors.at("idx").dtype(), DType::i32);
  EXPECT_EQ(st.tensors.at("idx").to_vector<int32_t>(), (std::vector<int32_t>{4, -5, 6}));
  EXPECT_EQ(st.tensors.at("w").shape(), (Shape{2, 2}));
  EXPECT_EQ(st.tensors.at("w").to_vector<float>(), (std::vector<float>{0.5f, 1.5f, -2.0f, 8.0f}));
}

TEST(Safetensors, EveryTruncationIsRefused) {
  TempDir dir("gat_test_io");
  const std::string good = dir.file("good.safetensors");
  io::save_safetensors(good, {{"a", Tensor::full({3}, 1.0, DType::f64)}, {"b", Tensor::full({2, 2}, 2.0)}},
                       {{"k", "v"}});
  const std::string bytes = read_bytes(good);
  ASSERT_GT(bytes.size(), 8u);
  const std::string path = dir.file("cut.safetensors");
  for (size_t len = 0; len < bytes.size(); ++len) {
    write_bytes(path, bytes.substr(0, len));
    try {
      io::load_safetensors(path);
      ADD_FAILURE() << "a prefix of " << len << " of " << bytes.size() << " bytes loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(io::load_safetensors(good));
}

TEST(Safetensors, BadFilesAreRefusedWithClearMessages) {
  TempDir dir("gat_test_io");
  const std::string f32x2 = raw<float>({1.0f, 2.0f});
  auto one = [](const std::string& entry) { return R"({"t":)" + entry + "}"; };

  expect_refused(dir, le64(1000) + "{}", "header length 1000 exceeds");
  expect_refused(dir, safetensors_bytes("{\"t\": [", f32x2), "bad JSON header");
  expect_refused(dir, safetensors_bytes("[1, 2]", ""), "not a JSON object");
  // A dtype nested 100,000 deep: the message quoting it overflowed the stack (nlohmann's dump()).
  expect_refused(dir,
                 safetensors_bytes(one(R"({"dtype":)" + std::string(100000, '[') + std::string(100000, ']') +
                                       R"(,"shape":[2],"data_offsets":[0,8]})"),
                                   f32x2),
                 "bad JSON header: arrays and objects nested more than 64 deep");
  expect_refused(
      dir, safetensors_bytes(one(R"({"dtype":"F16","shape":[2],"data_offsets":[0,4]})"), raw<float>({1.0f})),
      "tensor 't': unsupported dtype \"F16\"");
  // Headers over the data bytes of an F32 (2,) tensor, and what the refusal says.
  const std::pair<std::string, const char*> refused_headers[] = {
      {one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), "tensor 't': shape [-2]"},
      {one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,9]})"), "tensor 't': data_offsets [0,8,9]"},
      {one(R"({"dtype":"F32","shape":[2]})"), "tensor 't': no 'data_offsets'"},
      {one(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"),
       "tensor 't': data_offsets [0, 16] run past the 8 data bytes"},
      {one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), "are reversed"},
      {one(R"({"dtype":"F64","shape":[2],"data_offsets":[0,8]})"),
       "tensor 't': data_offsets [0, 8] hold 8 bytes but F64 (2,) needs 16"},
      {one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"),
       "4 trailing data bytes belong to no tensor"},
      {one(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"),
       "bytes 0..4 before tensor 't' belong to no tensor"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "tensor 'b' (bytes 4..8) overlaps tensor 'a'"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("__metadata__":{"epoch":3}})",
       "metadata 'epoch' is not a string"},
      {one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
       "is larger than the file"},
      // A key twice in one object: which value a reader keeps differs (this one kept the last).
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("__metadata__":{"hidden":"4","hidden":"8"}})",
       "the header holds the key 'hidden' twice in one object"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "the header holds the key 't' twice"},
      {one(R"({"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]})"),
       "the header holds the key 'dtype' twice"},
  };
  for (const auto& [header, expected] : refused_headers)
    expect_refused(dir, safetensors_bytes(header, f32x2), expected);

  const std::string missing = dir.file("absent.safetensors");
  expect_error([&] { io::load_safetensors(missing); }, {missing + ": cannot open"});
}

TEST(Safetensors, ModuleRoundTripWithNestedNames) {
  TempDir dir("gat_test_io");
  const std::string path = dir.file("m.safetensors");
  Nested a;
  a.inner->weight.copy_(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  a.inner->bias.copy_(Tensor::from_vector<float>({-1, -2, -3}, {3}));
  io::save(a, path, {{"model", "nested"}});
  EXPECT_EQ(io::load_safetensors(path).tensors.count("inner.weight"), 1u);

  Nested b;
  Tensor handle = b.inner->weight;  // parameters are loaded in place: handles stay valid
  EXPECT_EQ(io::load_into(b, path), (io::Metadata{{"model", "nested"}}));
  EXPECT_EQ(handle.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.inner->bias.to_vector<float>(), (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(b.scale.to_vector<float>(), (std::vector<float>{2}));
}

TEST(Safetensors, LoadIntoNamesTheMismatch) {
  TempDir dir("gat_test_io");
  auto expect_mismatch = [&](Module& module, const io::TensorMap& file, const std::string& expected) {
    const std::string path = dir.file("mm.safetensors");
    io::save_safetensors(path, file);
    try {
      io::load_into(module, path);
      ADD_FAILURE() << "loaded a mismatched checkpoint; expected '" << expected << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << "expected '" << expected << "' in: " << e.what();
    }
  };
  TwoParams m(2, DType::f32);
  const Tensor w = Tensor::full({2, 3}, 1.0), b = Tensor::full({3}, 1.0);
  expect_mismatch(m, {{"weight", w}}, "missing tensor 'bias'");
  expect_mismatch(m, {{"weight", w}, {"bias", b}, {"extra", b}}, "unexpected tensor 'extra'");
  expect_mismatch(m, {{"weight", Tensor::full({3, 2}, 1.0)}, {"bias", b}},
                  "tensor 'weight' has shape (3, 2) in the file vs (2, 3) in the module");
  expect_mismatch(m, {{"weight", w}, {"bias", Tensor::full({3}, 1.0, DType::f64)}},
                  "tensor 'bias' has dtype f64 in the file vs f32 in the module");
  // Parameters are f32 master weights in bf16 precision too: a bf16 copy is not loaded into them.
  expect_mismatch(m, {{"weight", w}, {"bias", Tensor::full({3}, 1.0, DType::bf16)}},
                  "tensor 'bias' has dtype bf16 in the file vs f32 in the module");
  // Nothing was copied by the failed loads.
  EXPECT_EQ(m.weight.to_vector<float>(), std::vector<float>(6, 0.0f));
}

// ---- reliability round 3 ------------------------------------------------------------------------------

TEST(Files, APathExistsEvenAsADanglingLinkAndAnUnreadableOneSaysWhy) {
  TempDir tmp("gat_test_io");
  const fs::path link = tmp.path() / "link";
  fs::create_symlink(tmp.path() / "gone", link);
  EXPECT_TRUE(io::path_exists(link.string()));  // something is there: not taken for an absent file
  EXPECT_FALSE(io::path_exists((tmp.path() / "absent").string()));
  EXPECT_FALSE(io::path_exists((link / "below").string()));  // ENOENT through the dangling link
  std::ofstream(tmp.path() / "file") << "x";
  EXPECT_FALSE(io::path_exists((tmp.path() / "file" / "below").string()));  // ENOTDIR
  expect_error([&] { io::read_regular_file(link.string()); },
               {link.string() + ": cannot open: a symbolic link to " + (tmp.path() / "gone").string() +
                ", which does not exist"});
  expect_error([&] { io::read_regular_file((tmp.path() / "absent").string()); },
               {"absent: cannot open: No such file or directory"});
  if (::geteuid() == 0) GTEST_SKIP() << "as root every file is readable";
  fs::create_directories(tmp.path() / "locked");
  std::ofstream(tmp.path() / "locked" / "f") << "x";
  fs::permissions(tmp.path() / "locked" / "f", fs::perms::none);
  expect_error([&] { io::read_regular_file((tmp.path() / "locked" / "f").string()); },
               {"f: cannot open: Permission denied"});
  fs::permissions(tmp.path() / "locked", fs::perms::owner_read);  // not searchable
  expect_error([&] { io::path_exists((tmp.path() / "locked" / "f").string()); },
               {"locked/f: Permission denied"});
  fs::permissions(tmp.path() / "locked", fs::perms::owner_all);
}

// Misuses a consumer may make of the file helpers: a pseudo-file whose size says 0 (read as empty,
// without a word), an OutputFile committed twice (a rename error naming the vanished temporary),
// empty paths to same_file and inside_folder (a raw filesystem_error).
TEST(Files, PseudoFilesDoubleCommitsAndEmptyPathsAreClear) {
  expect_error([] { io::read_regular_file("/proc/self/status"); },
               {"/proc/self/status: has more bytes than its size, 0, says"});
  TempDir tmp("gat_test_io");
  const std::string path = (tmp.path() / "out.txt").string();
  io::OutputFile out(path, "test");
  out.write("a");
  out.commit();
  expect_error([&] { out.commit(); }, {"test: ", "out.txt is already written (commit() was called before)"});
  EXPECT_EQ(io::read_regular_file(path), "a");
  // While an OutputFile lives it holds its file: another OutputFile for the path is refused (a
  // second run given a running one's --log replaced it); once it is gone, the path is free.
  {
    const std::string log = (tmp.path() / "log.jsonl").string();
    io::OutputFile first(log, "--log");
    first.write("line 1\n");
    first.commit();
    expect_error([&] { io::OutputFile second(log, "--log"); },
                 {"--log: ", "log.jsonl is being written by another running process"});
    expect_error([&] { io::check_save_path(log, "--log"); }, {"being written by another running process"});
    first.write("line 2\n");
  }
  io::OutputFile again((tmp.path() / "log.jsonl").string(), "--log");
  EXPECT_EQ(io::read_regular_file((tmp.path() / "log.jsonl").string()), "line 1\nline 2\n");
  EXPECT_FALSE(io::same_file("", ""));
  EXPECT_FALSE(io::same_file("", path));
  EXPECT_FALSE(io::inside_folder("", tmp.path().string()));
}

TEST(Safetensors, MetadataThatIsNotUtf8IsWrittenReplacedAndNamesAreRefused) {
  TempDir tmp("gat_test_io");
  const std::string path = (tmp.path() / "m.safetensors").string();
  const io::TensorMap tensors = {{"t", Tensor::from_vector(std::vector<float>{1, 2}, {2})}};
  io::save_safetensors(path, tensors, {{"dataset", "/data/caf\xe9"}});  // a Latin-1 folder name
  EXPECT_EQ(io::load_safetensors(path).metadata.at("dataset"), "/data/caf\xef\xbf\xbd");  // U+FFFD
  expect_error(
      [&] {
        io::save_safetensors(path, {{"t\xff", tensors.at("t")}});
      },
      {"tensor name 't\xff' is not valid UTF-8"});
  expect_error(
      [&] {
        io::save_safetensors(path, tensors, {{"k\xff", "v"}});
      },
      {"metadata key 'k\xff' is not valid UTF-8"});
  EXPECT_EQ(io::load_safetensors(path).metadata.at("dataset"),
            "/data/caf\xef\xbf\xbd");  // the refusals wrote nothing
}

TEST(Safetensors, AHugeMetadataValueIsQuotedInBoundedSpace) {
  const io::Metadata metadata = {{"epoch", std::string(10 << 20, '7') + "x"}};
  try {
    io::MetadataReader(metadata, "ckpt").integer("epoch");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u);
    EXPECT_NE(std::string(e.what()).find("ckpt: metadata 'epoch' = '777"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("...' (10485761 bytes) is not a number"), std::string::npos)
        << e.what();
  }
}
