// The inductive datasets: the .npy reader (datasets/npy.h), PPI's raw files as PyG reads them
// (datasets/ppi.h) on folders written here, malformed ones refused, the multi-graph generator
// (datasets/multigraph.h) and the names that load them (datasets/registry.h).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gat/datasets/download.h"
#include "gat/datasets/npy.h"
#include "gat/datasets/ppi.h"
#include "gat/datasets/registry.h"
#include "gat/framework/io.h"
#include "gat_testing.h"
#include "gat_train_testing.h"
#include "zip_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::set<std::pair<int32_t, int32_t>> edge_set(const Graph& g) {
  const std::vector<int32_t> s = g.sources(), d = g.destinations();
  std::set<std::pair<int32_t, int32_t>> out;
  for (size_t e = 0; e < s.size(); ++e) out.emplace(s[e], d[e]);
  return out;
}

// One split of a PPI folder: `graph_ids` per row, node-link links, features value 10 row + col
// and labels (row + col) % 2, in the raw files' dtypes (<f4, <i8 ids; labels as `label_descr`).
struct Split {
  Split(std::vector<double> ids, std::vector<std::pair<int, int>> l, std::string extra = "")
      : graph_ids(std::move(ids)), links(std::move(l)), json_extra(std::move(extra)) {}
  std::vector<double> graph_ids;
  std::vector<std::pair<int, int>> links;
  std::string json_extra;  // more keys of the JSON object, e.g. "\"directed\": true, "
  std::string label_descr = "<i8";
  int64_t features = 3, labels = 2;
};

void write_split(const TempDir& dir, const std::string& name, const Split& s) {
  const auto n = static_cast<int64_t>(s.graph_ids.size());
  std::vector<double> x, y;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t f = 0; f < s.features; ++f) x.push_back(static_cast<double>(10 * i + f));
    for (int64_t c = 0; c < s.labels; ++c) y.push_back(static_cast<double>((i + c) % 2));
  }
  write_bytes(dir.file(name + "_feats.npy"), npy_bytes("<f4", {n, s.features}, x));
  write_bytes(dir.file(name + "_labels.npy"), npy_bytes(s.label_descr, {n, s.labels}, y));
  write_bytes(dir.file(name + "_graph_id.npy"), npy_bytes("<i8", {n}, s.graph_ids));
  std::string json = "{" + s.json_extra + "\"multigraph\": false, \"graph\": {}, \"nodes\": [";
  for (int64_t i = 0; i < n; ++i)
    json += (i ? ", " : "") + std::string("{\"id\": ") + std::to_string(i) + "}";
  json += "], \"links\": [";
  for (size_t k = 0; k < s.links.size(); ++k)
    json += (k ? ", " : "") + std::string("{\"source\": ") + std::to_string(s.links[k].first) +
            ", \"target\": " + std::to_string(s.links[k].second) + "}";
  write_bytes(dir.file(name + "_graph.json"), json + "]}");
}

// train: graph 1 (rows 0-2) with a duplicate link, a self loop and its node 0 without edges,
// graph 2 (rows 3-4); valid and test: one graph of 2 nodes each (PPI's ids start at 1 too).
void write_ppi(const TempDir& dir) {
  write_split(dir, "train", {{1, 1, 1, 2, 2}, {{1, 2}, {2, 1}, {2, 2}, {3, 4}}});
  write_split(dir, "valid", {{21, 21}, {{0, 1}}});
  write_split(dir, "test", {{23, 23}, {{1, 0}}});
}

}  // namespace

// ---- .npy ------------------------------------------------------------------------------------

TEST(Npy, ReadsEveryDtypeAndShapeNumpyWrites) {
  const std::vector<double> v = {0, 1, 2, 3, 4, 5};
  for (const char* descr : {"<f4", "<f8", "<i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8"}) {
    const NpyArray a = parse_npy(npy_bytes(descr, {2, 3}, v), "a.npy");
    EXPECT_EQ(a.descr, descr);
    EXPECT_EQ(a.shape, (Shape{2, 3}));
    EXPECT_EQ(a.values(), v) << descr;
    EXPECT_EQ(a.is_float(), descr[1] == 'f');
  }
  EXPECT_EQ(parse_npy(npy_bytes("<i8", {3}, {-5, 0, 7}), "a").values(), (std::vector<double>{-5, 0, 7}));
  EXPECT_EQ(parse_npy(npy_bytes("<f8", {}, {2.5}), "a").shape, Shape{});
  EXPECT_EQ(parse_npy(npy_bytes("<f8", {0, 4}, {}), "a").shape, (Shape{0, 4}));
  // numpy's own bytes: version 1.0 of (2,) |b1 True, False; version 2.0 (4-byte length), '=' order.
  std::string header = "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }";
  header.resize(117, ' ');
  header += '\n';
  EXPECT_EQ(parse_npy(std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header + std::string("\x01\x00", 2), "b")
                .values(),
            (std::vector<double>{1, 0}));
  std::string header2 = "{'descr': '=i4', 'fortran_order': False, 'shape': (1, 1)}\n";
  EXPECT_EQ(
      parse_npy(std::string("\x93NUMPY\x02\x00", 8) + std::string(1, static_cast<char>(header2.size())) +
                    std::string(3, '\0') + header2 + std::string("\x07\x00\x00\x00", 4),
                "c")
          .values(),
      (std::vector<double>{7}));
}

TEST(Npy, RefusesMalformedFilesNamingThem) {
  const std::string good = npy_bytes("<f4", {2, 3}, {0, 1, 2, 3, 4, 5});
  expect_error([&] { parse_npy(good.substr(0, good.size() - 1), "t.npy"); },
               {"t.npy", "23 bytes", "needs 24", "truncated"});
  expect_error([&] { parse_npy(good + "x", "t.npy"); }, {"t.npy", "25 bytes", "after the array"});
  expect_error([&] { parse_npy("PK\x03\x04 not numpy", "t.npy"); }, {"t.npy", "not a .npy file"});
  expect_error([&] { parse_npy(good.substr(0, 9), "t.npy"); }, {"t.npy", "not a .npy file"});
  expect_error([&] { parse_npy(good.substr(0, 40), "t.npy"); }, {"t.npy", "header", "past the file's end"});
  auto with = [&](const std::string& from, const std::string& to) {
    std::string bytes = good;
    bytes.replace(bytes.find(from), from.size(), to);
    return bytes;
  };
  expect_error([&] { parse_npy(with("False,", "True, "), "t.npy"); }, {"t.npy", "Fortran order"});
  expect_error([&] { parse_npy(with("<f4", ">f4"), "t.npy"); }, {"t.npy", "dtype '>f4'", "not read"});
  expect_error([&] { parse_npy(with("<f4", "<c8"), "t.npy"); }, {"t.npy", "dtype '<c8'"});
  expect_error([&] { parse_npy(with("(2, 3)", "(2,-3)"), "t.npy"); }, {"t.npy", "'-3'", "non-negative"});
  expect_error([&] { parse_npy(with("'shape'", "'shope'"), "t.npy"); }, {"t.npy", "no 'shape'"});
  expect_error([&] { parse_npy(with("(2, 3)", "(99999999999999999999, 1)"), "t.npy"); },
               {"t.npy", "overflows"});
  std::string v9 = good;
  v9[6] = 9;
  expect_error([&] { parse_npy(v9, "t.npy"); }, {"t.npy", "version 9"});
  expect_error([] { read_npy("/nonexistent/x.npy"); }, {"/nonexistent/x.npy"});
}

// ---- PPI's raw files -----------------------------------------------------------------------------

TEST(PpiFiles, ReadAsPygReadsThem) {
  TempDir dir("gat_ppi");
  write_ppi(dir);
  const MultiGraphDataset data = load_ppi(dir.path().string());
  EXPECT_EQ(data.num_features, 3);
  EXPECT_EQ(data.num_labels, 2);
  ASSERT_EQ(data.train.size(), 2u);
  ASSERT_EQ(data.val.size(), 1u);
  ASSERT_EQ(data.test.size(), 1u);
  // Graph 1: links 1-2 (twice) and the loop 2-2 -> 1 -> 2 and 2 -> 1; node 0 keeps its row, no edge.
  const GraphData& g1 = data.train[0];
  EXPECT_EQ(g1.num_nodes(), 3);
  EXPECT_EQ(edge_set(g1.graph), (std::set<std::pair<int32_t, int32_t>>{{1, 2}, {2, 1}}));
  EXPECT_EQ(g1.graph.num_edges(), 2);
  EXPECT_EQ(g1.x.dtype(), DType::f32);
  EXPECT_EQ(host_f64(g1.x), (std::vector<double>{0, 1, 2, 10, 11, 12, 20, 21, 22}));
  EXPECT_EQ(host_f64(g1.y), (std::vector<double>{0, 1, 1, 0, 0, 1}));
  // Graph 2: rows 3 and 4, renumbered 0 and 1.
  const GraphData& g2 = data.train[1];
  EXPECT_EQ(edge_set(g2.graph), (std::set<std::pair<int32_t, int32_t>>{{0, 1}, {1, 0}}));
  EXPECT_EQ(host_f64(g2.x), (std::vector<double>{30, 31, 32, 40, 41, 42}));
  EXPECT_EQ(host_f64(g2.y), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(edge_set(data.test[0].graph), (std::set<std::pair<int32_t, int32_t>>{{0, 1}, {1, 0}}));
  // "directed": true keeps the links as given; labels of another integer or float dtype read alike.
  Split directed{{21, 21}, {{1, 0}}, "\"directed\": true, "};
  directed.label_descr = "<f8";
  write_split(dir, "valid", directed);
  const MultiGraphDataset again = load_ppi(dir.path().string());
  EXPECT_EQ(edge_set(again.val[0].graph), (std::set<std::pair<int32_t, int32_t>>{{1, 0}}));
  EXPECT_EQ(host_f64(again.val[0].y), (std::vector<double>{0, 1, 1, 0}));
  // By name: a folder holding train_graph.json, or ppi with its folder.
  EXPECT_TRUE(is_multigraph_dataset(dir.path().string()));
  EXPECT_EQ(load_multigraph_dataset(dir.path().string()).train.size(), 2u);
  EXPECT_EQ(load_multigraph_dataset("PPI", dir.path().string()).name, "ppi");
  expect_error([&] { load_dataset(dir.path().string()); },
               {"multi-graph dataset", "load_multigraph_dataset"});
}

TEST(PpiFiles, RefusesMalformedFolders) {
  struct Case {
    const char* what;
    std::function<void(const TempDir&)> spoil;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"truncated features",
       [](const TempDir& d) {
         const std::string bytes = npy_bytes("<f4", {5, 3}, std::vector<double>(15, 1.0));
         write_bytes(d.file("train_feats.npy"), bytes.substr(0, bytes.size() - 4));
       },
       {"train_feats.npy", "truncated"}},
      {"labels of another row count",
       [](const TempDir& d) {
         write_bytes(d.file("train_labels.npy"), npy_bytes("<i8", {4, 2}, std::vector<double>(8, 0)));
       },
       {"train_labels.npy", "4 rows", "has 5"}},
      {"labels of another width than training's",
       [](const TempDir& d) {
         write_bytes(d.file("test_labels.npy"), npy_bytes("<i8", {2, 3}, std::vector<double>(6, 0)));
       },
       {"test_labels.npy", "3 columns", "training split's have 2"}},
      {"a 1-D feature file",
       [](const TempDir& d) {
         write_bytes(d.file("valid_feats.npy"), npy_bytes("<f4", {6}, std::vector<double>(6, 0)));
       },
       {"valid_feats.npy", "(6,)", "not (N, 3)"}},
      {"a label 2",
       [](const TempDir& d) {
         write_bytes(d.file("test_labels.npy"), npy_bytes("<i8", {2, 2}, {0, 1, 2, 0}));
       },
       {"test_labels.npy", "label [1, 0] = 2"}},
      {"a NaN feature",
       [](const TempDir& d) {
         write_bytes(d.file("test_feats.npy"), npy_bytes("<f8", {2, 3}, {0, 1, 2, 3, std::nan(""), 5}));
       },
       {"test_feats.npy", "[1, 1]", "not a finite"}},
      {"graph ids out of order",
       [](const TempDir& d) {
         write_split(d, "train", {{1, 2, 1, 2, 2}, {}});
       },
       {"train_graph_id.npy", "row 2", "graph id 1 after 2"}},
      {"a graph id skipped",
       [](const TempDir& d) {
         write_split(d, "train", {{1, 1, 3, 3, 3}, {}});
       },
       {"train_graph_id.npy", "row 2", "graph id 3 after 1"}},
      {"float graph ids",
       [](const TempDir& d) {
         write_bytes(d.file("test_graph_id.npy"), npy_bytes("<f4", {2}, {1, 1}));
       },
       {"test_graph_id.npy", "<f4", "integers"}},
      {"a link out of range",
       [](const TempDir& d) {
         write_split(d, "valid", {{5, 5}, {{0, 2}}});
       },
       {"valid_graph.json", "link 0 (0 -> 2)", "outside [0, 2)"}},
      {"a link between graphs",
       [](const TempDir& d) {
         write_split(d, "train", {{1, 1, 1, 2, 2}, {{0, 1}, {2, 3}}});
       },
       {"train_graph.json", "link 1 (2 -> 3)", "joins graph ids 1 and 2"}},
      {"bad JSON",
       [](const TempDir& d) { write_bytes(d.file("test_graph.json"), "{\"nodes\": [{\"id\": 0}"); },
       {"test_graph.json", "not valid JSON"}},
      {"no links",
       [](const TempDir& d) { write_bytes(d.file("test_graph.json"), "{\"nodes\": []}"); },
       {"test_graph.json", "no \"links\""}},
      {"a node id twice",
       [](const TempDir& d) {
         write_bytes(d.file("test_graph.json"), "{\"nodes\": [{\"id\": 0}, {\"id\": 0}], \"links\": []}");
       },
       {"test_graph.json", "node 1 has id 0, given twice"}},
      {"a string source",
       [](const TempDir& d) {
         write_bytes(
             d.file("test_graph.json"),
             "{\"nodes\": [{\"id\": 0}, {\"id\": 1}], \"links\": [{\"source\": \"0\", \"target\": 1}]}");
       },
       {"test_graph.json", "link 0", "\"source\"", "not an integer"}},
      {"a key given twice (a reader keeping the last would see 1 node)",
       [](const TempDir& d) {
         write_bytes(d.file("test_graph.json"),
                     "{\"nodes\": [{\"id\": 0}, {\"id\": 1}], \"nodes\": [{\"id\": 0}], \"links\": []}");
       },
       {"test_graph.json", "nodes", "given twice in one object"}},
      {"an id past INT64_MAX (read as -1 before)",
       [](const TempDir& d) {
         write_bytes(d.file("test_graph.json"),
                     "{\"nodes\": [{\"id\": 18446744073709551615}, {\"id\": 1}], \"links\": []}");
       },
       {"test_graph.json", "node 0's \"id\" is 18446744073709551615, beyond a 64-bit integer"}},
      {"an id nested 100,000 deep (its message overflowed the stack)",
       [](const TempDir& d) {
         write_bytes(d.file("test_graph.json"), "{\"nodes\": [{\"id\": " + std::string(100000, '[') +
                                                    std::string(100000, ']') +
                                                    "}, {\"id\": 1}], \"links\": []}");
       },
       {"test_graph.json", "nested more than 64 deep"}},
      {"graph ids 2^53 and 2^53 + 1 (one graph to a double)",
       [](const TempDir& d) {
         std::string bytes = npy_bytes("<i8", {2}, {0, 0});
         const int64_t ids[2] = {int64_t{1} << 53, (int64_t{1} << 53) + 1};
         std::memcpy(&bytes[bytes.size() - sizeof ids], ids, sizeof ids);
         write_bytes(d.file("test_graph_id.npy"), bytes);
       },
       {"test_graph_id.npy",
        "row 0 has graph id 9007199254740992, beyond the ids (below 2^53 in magnitude)"}},
      {"a graph saved as UTF-16 (its byte order mark was quoted raw)",
       [](const TempDir& d) { write_bytes(d.file("valid_graph.json"), std::string("\xff\xfe{\0}\0", 6)); },
       {"valid_graph.json: UTF-16 text (it starts with the byte order mark FF FE); save it as UTF-8"}},
      {"nodes and rows differ",
       [](const TempDir& d) {
         write_bytes(d.file("test_graph.json"), "{\"nodes\": [{\"id\": 0}], \"links\": []}");
       },
       {"test_graph.json", "1 nodes", "2 rows"}},
      {"a missing file",
       [](const TempDir& d) { std::filesystem::remove(d.file("valid_graph_id.npy")); },
       {"valid_graph_id.npy"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir("gat_ppi_bad");
    write_ppi(dir);
    c.spoil(dir);
    expect_error([&] { load_ppi(dir.path().string()); }, c.parts);
  }
  expect_error([] { load_ppi("/nonexistent/ppi"); }, {"/nonexistent/ppi", "not a directory", "ppi.zip"});
}

// ---- fetch_ppi: PPI's files from its zip -------------------------------------------------------------

namespace {

// The twelve files of a PPI folder as one archive, as DGL's could be: every other one under
// "ppi/", deflated and stored alike, with the folder's own entry and a member fetch_ppi does not
// read.
std::string ppi_zip(const TempDir& folder) {
  std::vector<ZipMember> members = {{"ppi/", ""}, {"README", "not PPI"}};
  const std::vector<std::string> files = ppi_raw_files();
  for (size_t k = 0; k < files.size(); ++k)
    members.push_back(
        {(k % 2 ? "ppi/" : "") + files[k], io::read_regular_file(folder.file(files[k])), k % 3 != 0});
  return make_zip(members).bytes;
}

// What the tests expect of an archive: its own size and digest.
struct Pinned {
  explicit Pinned(const std::string& bytes)
      : sha256(sha256_hex(bytes)), bytes(static_cast<int64_t>(bytes.size())) {}
  std::string sha256;
  int64_t bytes;
  ExpectedArchive expected() const { return {bytes, sha256.c_str()}; }
};

// Options that fetch nothing unless a test points ppi_url at its server.
DownloadOptions offline() {
  DownloadOptions options;
  options.ppi_url = "http://127.0.0.1:1/ppi.zip";
  return options;
}

std::vector<std::string> listing(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::exists(dir)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> ppi_files_and_zip() {
  std::vector<std::string> names = ppi_raw_files();
  names.emplace_back("ppi.zip");
  std::sort(names.begin(), names.end());
  return names;
}

// tests/planetoid_server.py serving `folder` in `mode` on a free loopback port; killed at the end
// of the scope.
class Server {
 public:
  Server(const std::string& folder, const std::string& mode) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    const std::string script = std::string(GAT_SOURCE_DIR) + "/tests/planetoid_server.py";
    std::vector<std::string> args = {"python3", script, folder, mode};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawnp(&pid_, "python3", &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    std::string port;
    for (char c; ::read(out[0], &c, 1) == 1 && c != '\n';) port += c;
    ::close(out[0]);
    url_ = "http://127.0.0.1:" + port + "/ppi.zip";
  }
  ~Server() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  const std::string& url() const { return url_; }

 private:
  pid_t pid_ = 0;
  std::string url_;
};

bool have_python3() { return std::system("python3 -c '' >/dev/null 2>&1") == 0; }

// Whether this build has the downloader and its digests (GAT_DOWNLOAD, not OFF).
bool downloader_built() {
  try {
    sha256_hex("");
    return true;
  } catch (const Error&) {
    return false;
  }
}

#define SKIP_WITHOUT_DOWNLOADER() \
  if (!downloader_built()) GTEST_SKIP() << "a build without the downloader: nothing verifies ppi.zip"

}  // namespace

TEST(PpiFetch, ExtractsTheMissingFilesOfAKeptArchiveAsTheyWere) {
  SKIP_WITHOUT_DOWNLOADER();
  TempDir source("gat_ppi_source"), dir("gat_ppi_fetch");
  write_ppi(source);
  const std::string zip = ppi_zip(source);
  const Pinned pinned(zip);
  write_bytes(dir.file("ppi.zip"), zip);
  fetch_ppi(dir.path().string(), offline(), pinned.expected());
  EXPECT_EQ(listing(dir.path()), ppi_files_and_zip());  // no temporary file left, nothing else extracted
  for (const std::string& file : ppi_raw_files())
    EXPECT_EQ(io::read_regular_file(dir.file(file)), io::read_regular_file(source.file(file))) << file;
  EXPECT_EQ(dataset_summary(load_ppi(dir.path().string())),
            dataset_summary(load_ppi(source.path().string())));
  // Only what is missing is extracted: a file there is the file, even one that differs.
  std::filesystem::remove(dir.file("valid_feats.npy"));
  write_bytes(dir.file("test_labels.npy"), "mine");
  fetch_ppi(dir.path().string(), offline(), pinned.expected());
  EXPECT_EQ(io::read_regular_file(dir.file("valid_feats.npy")),
            io::read_regular_file(source.file("valid_feats.npy")));
  EXPECT_EQ(io::read_regular_file(dir.file("test_labels.npy")), "mine");
  // With every file there, the archive is not read (nor looked for).
  std::filesystem::remove(dir.file("ppi.zip"));
  write_bytes(dir.file("test_labels.npy"), io::read_regular_file(source.file("test_labels.npy")));
  fetch_ppi(dir.path().string(), offline(), pinned.expected());
  EXPECT_EQ(load_ppi(dir.path().string()).train.size(), 2u);
}

TEST(PpiFetch, RefusesAKeptArchiveThatIsNotTheExpectedOneAndKeepsIt) {
  SKIP_WITHOUT_DOWNLOADER();
  TempDir source("gat_ppi_source"), dir("gat_ppi_fetch");
  write_ppi(source);
  const std::string zip = ppi_zip(source);
  write_bytes(dir.file("ppi.zip"), zip);
  const std::string path = dir.file("ppi.zip");
  const Pinned pinned(zip);
  const std::string remove = "Remove it to download it again (rm '" + path + "')";
  expect_error(
      [&] {
        fetch_ppi(dir.path().string(), offline(), {pinned.bytes + 1, pinned.sha256.c_str()});
      },
      {path, "is not DGL's ppi.zip", std::to_string(pinned.bytes) + " bytes, not", remove});
  const std::string other(64, '0');
  expect_error(
      [&] {
        fetch_ppi(dir.path().string(), offline(), {pinned.bytes, other.c_str()});
      },
      {path, "is not DGL's ppi.zip: its SHA-256 is " + pinned.sha256 + ", expected " + other, remove});
  EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"ppi.zip"});
  EXPECT_EQ(io::read_regular_file(path), zip);
}

TEST(PpiFetch, RefusesAnArchiveWithoutPpisFilesWritingNothing) {
  SKIP_WITHOUT_DOWNLOADER();
  TempDir source("gat_ppi_source");
  write_ppi(source);
  const auto member = [&](const std::string& name, const std::string& file) {
    return ZipMember{name, io::read_regular_file(source.file(file)), true};
  };
  std::vector<ZipMember> all;
  for (const std::string& file : ppi_raw_files()) all.push_back(member("ppi/" + file, file));
  std::vector<ZipMember> without = all, twice = all;
  without.pop_back();
  twice.push_back(member("train_feats.npy", "train_feats.npy"));
  Zip corrupt = make_zip(all);
  corrupt.put_both32(3, kZipCrc, 0);
  Zip elsewhere = make_zip({member("data/train_graph.json", "train_graph.json")});
  struct Case {
    const char* what;
    std::string zip;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"a file missing",
       make_zip(without).bytes,
       {"ppi.zip: has no member ppi/test_graph_id.npy or test_graph_id.npy"}},
      {"a file twice", make_zip(twice).bytes, {"ppi.zip: has both ppi/train_feats.npy and train_feats.npy"}},
      {"a file in another folder",
       elsewhere.bytes,
       {"has no member ppi/train_graph.json or train_graph.json"}},
      {"a corrupt member", corrupt.bytes, {"ppi.zip: member 'ppi/train_graph_id.npy': CRC-32"}},
      {"not a zip", "PK but not a zip archive at all", {"ppi.zip: not a zip archive"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir("gat_ppi_fetch");
    write_bytes(dir.file("ppi.zip"), c.zip);
    const Pinned pinned(c.zip);
    expect_error([&] { fetch_ppi(dir.path().string(), offline(), pinned.expected()); }, c.parts);
    EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"ppi.zip"});
  }
}

TEST(PpiFetch, DownloadsVerifiesAndKeepsTheArchive) {
  SKIP_WITHOUT_DOWNLOADER();
  if (!have_python3()) GTEST_SKIP() << "no python3 to serve the archive";
  TempDir source("gat_ppi_source"), served("gat_ppi_served"), top("gat_ppi_fetch");
  write_ppi(source);
  const std::string zip = ppi_zip(source);
  write_bytes(served.file("ppi.zip"), zip);
  const Pinned pinned(zip);
  const std::string dir = top.file("new/ppi");  // made by the download
  {
    const Server server(served.path().string(), "good");
    DownloadOptions options = offline();
    options.ppi_url = server.url();
    fetch_ppi(dir, options, pinned.expected());
    EXPECT_EQ(listing(dir), ppi_files_and_zip());
    EXPECT_EQ(io::read_regular_file(dir + "/ppi.zip"), zip);
    for (const std::string& file : ppi_raw_files())
      EXPECT_EQ(io::read_regular_file(dir + "/" + file), io::read_regular_file(source.file(file))) << file;
    // An archive of another size is refused before its digest is looked at.
    std::filesystem::remove_all(top.file("new"));
    expect_error(
        [&] {
          fetch_ppi(dir, options, {pinned.bytes + 1, pinned.sha256.c_str()});
        },
        {"cannot download ppi.zip from " + server.url(), std::to_string(pinned.bytes) + " bytes, expected",
         "nothing was written"});
    expect_error(
        [&] {
          fetch_ppi(dir, options, {pinned.bytes - 1, pinned.sha256.c_str()});
        },
        {"cannot download ppi.zip from " + server.url()});
    EXPECT_FALSE(std::filesystem::exists(top.file("new"))) << "a refused download left a folder";
  }
  struct Case {
    const char* mode;
    long timeout_s, deadline_s;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"corrupt", 30, 600, {"its SHA-256 is", "expected " + pinned.sha256, "corrupted or not DGL's ppi.zip"}},
      {"truncate", 30, 600, {"transfer closed"}},
      {"stall", 1, 600, {"no data for 1 s", "GAT_DOWNLOAD_TIMEOUT"}},
      {"trickle", 30, 1, {"took more than 1 s in all", "GAT_DOWNLOAD_DEADLINE"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode);
    const Server server(served.path().string(), c.mode);
    DownloadOptions options = offline();
    options.ppi_url = server.url();
    options.timeout_s = c.timeout_s;
    options.deadline_s = c.deadline_s;
    std::vector<std::string> parts = c.parts;
    parts.insert(parts.end(), {"cannot download ppi.zip from " + server.url(), dir, "To get PPI by hand"});
    expect_error([&] { fetch_ppi(dir, options, pinned.expected()); }, parts);
    EXPECT_FALSE(std::filesystem::exists(top.file("new"))) << "a refused download left a folder";
  }
  // Offline: what to download, and where to put it.
  expect_error(
      [&] { fetch_ppi(dir, offline(), pinned.expected()); },
      {"cannot download ppi.zip from http://127.0.0.1:1/ppi.zip",
       "train_graph.json and 11 more of PPI's files are missing from " + dir,
       "download http://127.0.0.1:1/ppi.zip into that folder",
       "{train,valid,test}_{graph.json,feats.npy,labels.npy,graph_id.npy}", "--data-dir (or GAT_DATA_DIR)"});
}

// gat_train --dataset ppi with no folder: the per-user cache, the real archive's digest.
TEST(PpiFetch, GatTrainChecksTheArchiveItDownloadsAndReadsAFolderOffline) {
  SKIP_WITHOUT_DOWNLOADER();
  if (!have_python3()) GTEST_SKIP() << "no python3 to serve the archive";
  TempDir source("gat_ppi_source"), served("gat_ppi_served"), home("gat_ppi_home");
  write_ppi(source);
  write_bytes(served.file("ppi.zip"), ppi_zip(source));
  const Server server(served.path().string(), "good");
  const std::string env =
      "env -u GAT_DATA_DIR XDG_CACHE_HOME='" + home.file("cache") + "' GAT_PPI_URL=" + server.url();
  const Outcome refused = run_gat_train("--dataset ppi --info", home.path(), env);
  EXPECT_EQ(refused.status, 1) << refused.err;
  for (const std::string& part :
       {"cannot download ppi.zip from " + server.url(), " bytes, expected " + std::to_string(kPpiZip.bytes),
        std::string("nothing was written"), home.file("cache/gat/ppi")})
    EXPECT_NE(refused.err.find(part), std::string::npos) << part << " not in: " << refused.err;
  EXPECT_EQ(listing(home.file("cache/gat/ppi")), std::vector<std::string>{});
  // A folder that holds the files needs no network: --data-dir, or GAT_DATA_DIR.
  const std::string offline_env = "GAT_PPI_URL=http://127.0.0.1:1/ppi.zip";
  const Outcome given = run_gat_train("--dataset ppi --info --data-dir '" + source.path().string() + "'",
                                      home.path(), offline_env);
  EXPECT_EQ(given.status, 0) << given.err;
  EXPECT_NE(given.out.find("\"graphs\":[2,1,1]"), std::string::npos) << given.out;
  const Outcome from_env = run_gat_train("--dataset ppi --info --quiet", home.path(),
                                         offline_env + " GAT_DATA_DIR='" + source.path().string() + "'");
  EXPECT_EQ(from_env.status, 0) << from_env.err;
  EXPECT_EQ(from_env.out, given.out);
  EXPECT_EQ(from_env.err, "");
}

// ---- the generator --------------------------------------------------------------------------------

TEST(MultiGraphGenerator, SplitsGraphsAsPpiAndRepeatsForASeed) {
  MultiGraphOptions options;
  options.graphs = 24;
  options.nodes = 30;
  options.num_features = 5;
  options.num_labels = 7;
  const MultiGraphDataset a = generate_multigraph(options), b = generate_multigraph(options);
  EXPECT_EQ(a.train.size(), 20u);
  EXPECT_EQ(a.val.size(), 2u);
  EXPECT_EQ(a.test.size(), 2u);
  for (size_t k = 0; k < a.train.size(); ++k) {
    const GraphData& g = a.train[k];
    EXPECT_GE(g.num_nodes(), 15);
    EXPECT_LE(g.num_nodes(), 45);
    EXPECT_EQ(g.x.shape(), (Shape{g.num_nodes(), 5}));
    EXPECT_EQ(g.y.shape(), (Shape{g.num_nodes(), 7}));
    EXPECT_EQ(g.graph.count_self_loops(), 0);
    const auto edges = edge_set(g.graph);
    for (const auto& [s, d] : edges) EXPECT_TRUE(edges.count({d, s})) << "graph " << k << " not symmetric";
    for (double v : host_f64(g.y)) EXPECT_TRUE(v == 0 || v == 1);
    EXPECT_EQ(host_f64(g.x), host_f64(b.train[k].x));
    EXPECT_EQ(edges, edge_set(b.train[k].graph));
  }
  options.seed = 1;
  EXPECT_NE(host_f64(generate_multigraph(options).train[0].y), host_f64(a.train[0].y));
  // The registry's spec, and its errors.
  const MultiGraphDataset small = load_multigraph_dataset("synthetic-ppi:3:10:4:6:2");
  EXPECT_EQ(small.train.size(), 1u);
  EXPECT_EQ(small.num_features, 6);
  EXPECT_EQ(small.num_labels, 2);
  EXPECT_TRUE(is_multigraph_dataset("Synthetic-PPI:3:10:4"));
  expect_error([] { load_multigraph_dataset("synthetic-ppi:2:10:4"); },
               {"synthetic-ppi:2:10:4", "graphs", "2"});
  expect_error([] { load_multigraph_dataset("synthetic-ppi:3:x:4"); },
               {"nodes 'x'", "<graphs>:<nodes>:<seed>"});
  expect_error([] { load_multigraph_dataset("synthetic-ppi:3:10"); }, {"3 fields"});
  expect_error([] { load_dataset("ppi"); }, {"multi-graph dataset"});
}
