// Datasets: the Planetoid loader against the known figures of Cora and CiteSeer, the restricted
// unpickler against hostile files, the custom directory loader, the generator and the registry.
//
// Feature checksums (sum of x in double) were computed independently of this code: Python 3's
// own pickle.Unpickler with stub classes for the six globals (no numpy/scipy needed) loads
// ind.<name>.allx and ind.<name>.tx, and the float32 values of their csr `data` arrays are
// summed with struct.unpack. sum(x) equals that sum: x is a row permutation of allx and tx plus
// all-zero rows. Cora 49216, CiteSeer 105165 (both binary features, so these are nnz counts).
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "gat/datasets/custom.h"
#include "gat/datasets/download.h"
#include "gat/datasets/generator.h"
#include "gat/datasets/pickle.h"
#include "gat/datasets/planetoid.h"
#include "gat/datasets/registry.h"
#include "gat/datasets/text.h"
#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat/framework/quote.h"
#include "gat/train/trainer.h"
#include "gat_testing.h"
#include "gzip_testing.h"

using namespace gat;
using gat::testing::expect_error;
using namespace std::string_literals;
using gat::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string planetoid_dir() { return default_data_dir(); }

bool have_planetoid(const std::string& name) {
  return fs::exists(fs::path(planetoid_dir()) / ("ind." + name + ".x"));
}

#define SKIP_WITHOUT(name)                                                               \
  if (!have_planetoid(name))                                                             \
  GTEST_SKIP() << "Planetoid files for " << name << " not found in '" << planetoid_dir() \
               << "' (set GAT_DATA_DIR to the folder holding ind." << name << ".*)"

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void write_gz(const fs::path& path, const std::string& bytes) {
  gzFile f = gzopen(path.string().c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// A copy of the Cora raw files in a temporary folder, so that one part can be replaced.
struct CoraCopy : TempDir {
  CoraCopy() : TempDir("gat_test_datasets") {
    for (const char* part : {"x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"})
      fs::copy_file(fs::path(planetoid_dir()) / (std::string("ind.cora.") + part),
                    path() / (std::string("ind.cora.") + part));
  }
  std::string file(const char* part) const { return (path() / (std::string("ind.cora.") + part)).string(); }
};

// Every edge's reverse is present, no self loops, no duplicates.
void expect_undirected_simple(const Graph& g) {
  g.validate();
  const std::vector<int32_t> s = g.sources(), d = g.destinations();
  std::set<std::pair<int32_t, int32_t>> edges;
  for (size_t e = 0; e < s.size(); ++e) {
    EXPECT_NE(s[e], d[e]) << "self loop at edge " << e;
    EXPECT_TRUE(edges.emplace(s[e], d[e]).second) << "duplicate edge " << s[e] << " -> " << d[e];
  }
  for (const auto& [a, b] : edges)
    ASSERT_TRUE(edges.count({b, a})) << "edge " << a << " -> " << b << " has no reverse";
}

void expect_split_shape(const Dataset& d) {
  for (const Tensor* t : {&d.train_index, &d.val_index, &d.test_index}) {
    const std::vector<int32_t> v = t->to_vector<int32_t>();
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
    EXPECT_EQ(std::adjacent_find(v.begin(), v.end()), v.end());
    for (int32_t i : v) ASSERT_TRUE(i >= 0 && i < d.num_nodes());
  }
}

// The figures dataset_summary reports of a Planetoid set. Every set has 500 validation and 1000
// test nodes.
struct PlanetoidFigures {
  std::string name;
  int64_t nodes, edges, features, classes, train;
};

// Checks d's summary against `want`, that its graph is undirected and simple and that its splits
// are sorted, distinct node ids; returns the summary for the figures of one set alone.
nlohmann::json expect_planetoid(const Dataset& d, const PlanetoidFigures& want) {
  const nlohmann::json s = nlohmann::json::parse(dataset_summary(d));
  EXPECT_EQ(s["name"], want.name);
  EXPECT_EQ(s["nodes"], want.nodes);
  EXPECT_EQ(s["edges"], want.edges);
  EXPECT_EQ(s["features"], want.features);
  EXPECT_EQ(s["classes"], want.classes);
  EXPECT_EQ(s["train"], want.train);
  EXPECT_EQ(s["val"], 500);
  EXPECT_EQ(s["test"], 1000);
  expect_undirected_simple(d.graph);
  expect_split_shape(d);
  return s;
}

// ---- hand-built pickles ------------------------------------------------------------------------

std::string le32(int32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i)
    s[static_cast<size_t>(i)] = static_cast<char>((static_cast<uint32_t>(v) >> (8 * i)) & 0xff);
  return s;
}

// numpy.ndarray pickle body (no PROTO/STOP) as numpy 1.x writes it under protocol 2.
std::string ndarray_body(const std::vector<int32_t>& shape, const std::string& typestr,
                         const std::string& order, bool fortran, const std::string& raw) {
  std::string s =
      "cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85U\x01"
      "b\x87R"s;
  s += "(K\x01(";
  for (int32_t d : shape) s += "J" + le32(d);
  s += "tcnumpy\ndtype\nU\x02" + typestr + "K\x00K\x01\x87R"s;
  s += "(K\x03U\x01" + order + "NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"s;
  s += fortran ? "\x88" : "\x89";
  s += "T" + le32(static_cast<int32_t>(raw.size())) + raw + "tb";
  return s;
}

std::string pickle_of(const std::string& body) { return "\x80\x02"s + body + "."; }

template <class T>
std::string raw_of(const std::vector<T>& v, bool big_endian = false) {
  std::string s(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  if (big_endian)
    for (size_t i = 0; i < v.size(); ++i)
      std::reverse(s.begin() + i * sizeof(T), s.begin() + (i + 1) * sizeof(T));
  return s;
}

// scipy csr_matrix pickle with the given arrays.
std::string csr_pickle(int32_t rows, int32_t cols, const std::vector<int32_t>& indptr,
                       const std::vector<int32_t>& indices, const std::vector<float>& data) {
  std::string s =
      "cscipy.sparse.csr\ncsr_matrix\n)\x81}(U\x06_shapeJ"s + le32(rows) + "J" + le32(cols) + "\x86";
  s += "U\x06indptr" + ndarray_body({static_cast<int32_t>(indptr.size())}, "i4", "<", false, raw_of(indptr));
  s += "U\x07indices" +
       ndarray_body({static_cast<int32_t>(indices.size())}, "i4", "<", false, raw_of(indices));
  s += "U\x04"
       "data" +
       ndarray_body({static_cast<int32_t>(data.size())}, "f4", "<", false, raw_of(data));
  s += "ub";
  return pickle_of(s);
}

pickle::Document parse(const std::string& bytes, const std::string& name = "test.pkl") {
  return pickle::Document::parse(bytes, name);
}

}  // namespace

// ---- Planetoid -------------------------------------------------------------------------------------

TEST(Planetoid, CoraMatchesThePublishedFigures) {
  SKIP_WITHOUT("cora");
  const Dataset d = load_planetoid("Cora", planetoid_dir());
  const nlohmann::json s = expect_planetoid(d, {"cora", 2708, 10556, 1433, 7, 140});
  EXPECT_EQ(s["label_counts"], (std::vector<int64_t>{351, 217, 418, 818, 426, 298, 180}));
  EXPECT_EQ(s["feature_checksum"].get<double>(), 49216.0);
  EXPECT_EQ(d.x.shape(), (Shape{2708, 1433}));
  EXPECT_EQ(d.y.dtype(), DType::i32);
  // train = 0..139, 20 of each class; val = 140..639; test = 1708..2707
  const std::vector<int32_t> y = d.y.to_vector<int32_t>(), train = d.train_index.to_vector<int32_t>();
  std::vector<int> per_class(7, 0);
  for (size_t i = 0; i < train.size(); ++i) {
    EXPECT_EQ(train[i], static_cast<int32_t>(i));
    ++per_class[static_cast<size_t>(y[static_cast<size_t>(train[i])])];
  }
  EXPECT_EQ(per_class, std::vector<int>(7, 20));
  EXPECT_EQ(d.val_index.to_vector<int32_t>().front(), 140);
  EXPECT_EQ(d.val_index.to_vector<int32_t>().back(), 639);
  EXPECT_EQ(d.test_index.to_vector<int32_t>().front(), 1708);
  EXPECT_EQ(d.test_index.to_vector<int32_t>().back(), 2707);
}

TEST(Planetoid, TestRowsAreReorderedAsInPyG) {
  SKIP_WITHOUT("cora");
  const Dataset d = load_planetoid("cora", planetoid_dir());
  // tx row k belongs to the k-th id of test.index (x[test_index] = x[sorted_test_index]).
  const Tensor tx = pickle::to_dense(pickle::Document::load(planetoid_dir() + "/ind.cora.tx"));
  const Tensor ty = pickle::to_dense(pickle::Document::load(planetoid_dir() + "/ind.cora.ty"));
  const std::string index_text = text::read_file(planetoid_dir() + "/ind.cora.test.index");
  text::Lines lines(index_text);
  std::string_view line;
  std::vector<int64_t> ids;
  while (lines.next(line)) ids.push_back(text::parse_ints(line, "test.index")[0]);
  ASSERT_EQ(ids.size(), 1000u);
  ASSERT_NE(ids[0], 1708) << "the file is not in sorted order, so this test can tell orders apart";
  const float* x = d.x.data<float>();
  const float* t = tx.data<float>();
  const int32_t* y = d.y.data<int32_t>();
  for (size_t k = 0; k < ids.size(); ++k) {
    ASSERT_TRUE(std::equal(t + k * 1433, t + (k + 1) * 1433, x + ids[k] * 1433)) << "test row " << k;
    const float* onehot = ty.data<float>() + k * 7;
    ASSERT_EQ(y[ids[k]], std::max_element(onehot, onehot + 7) - onehot) << "test row " << k;
  }
}

TEST(Planetoid, CiteSeerPadsMissingTestIds) {
  SKIP_WITHOUT("citeseer");
  const Dataset d = load_planetoid("citeseer", planetoid_dir());
  const nlohmann::json s = expect_planetoid(d, {"citeseer", 3327, 9104, 3703, 6, 120});
  // PyG's CiteSeer bincount: the 15 padded nodes count as class 0.
  EXPECT_EQ(s["label_counts"], (std::vector<int64_t>{264, 590, 668, 701, 596, 508}));
  EXPECT_EQ(s["feature_checksum"].get<double>(), 105165.0);
  std::vector<int> per_class(6, 0);
  const std::vector<int32_t> y = d.y.to_vector<int32_t>();
  for (int32_t i : d.train_index.to_vector<int32_t>())
    ++per_class[static_cast<size_t>(y[static_cast<size_t>(i)])];
  EXPECT_EQ(per_class, std::vector<int>(6, 20));
  // The 15 ids in [2312, 3327) missing from test.index: all-zero features, label 0, in no split.
  const std::vector<int32_t> test = d.test_index.to_vector<int32_t>();
  const std::set<int32_t> in_test(test.begin(), test.end());
  int missing = 0;
  for (int32_t i = 2312; i < 3327; ++i) {
    if (in_test.count(i)) continue;
    ++missing;
    const float* row = d.x.data<float>() + static_cast<int64_t>(i) * 3703;
    EXPECT_TRUE(std::all_of(row, row + 3703, [](float v) { return v == 0.0f; })) << "node " << i;
    EXPECT_EQ(y[static_cast<size_t>(i)], 0) << "node " << i;
  }
  EXPECT_EQ(missing, 15);
}

// PubMed's files are not on this machine; these are written in the same formats as the real ones
// (read back with pickletools): x, tx, allx scipy csr_matrix with float32 TF-IDF values; y, ty,
// ally int32 ndarrays of one-hot rows; graph a defaultdict(list); test.index the ids
// 18717..19716 in a shuffled order. 19,717 nodes, 500 features, 3 classes, 60 / 500 / 1000.
namespace {

constexpr int32_t kPubMedNodes = 19717, kPubMedFeatures = 500, kPubMedClasses = 3, kPubMedTrain = 60,
                  kPubMedTest = 1000, kPubMedBase = kPubMedNodes - kPubMedTest;

// Row r of cat(allx, tx): three TF-IDF-like float values (not 0/1) in columns that depend on r.
void pubmed_row(int32_t r, std::vector<int32_t>& cols, std::vector<float>& vals) {
  for (int32_t k = 0; k < 3; ++k) {
    cols.push_back((r * 7 + k * 131) % kPubMedFeatures);
    vals.push_back(0.0125f + static_cast<float>((r * 31 + k) % 97) / 128.0f);
  }
}
int32_t pubmed_class(int32_t r) { return (r * 5 + r / 7) % kPubMedClasses; }

// Rows [first, last) of cat(allx, tx) as a csr_matrix pickle.
std::string pubmed_features(int32_t first, int32_t last) {
  std::vector<int32_t> indptr{0}, indices;
  std::vector<float> data;
  for (int32_t r = first; r < last; ++r) {
    pubmed_row(r, indices, data);
    indptr.push_back(static_cast<int32_t>(indices.size()));
  }
  return csr_pickle(last - first, kPubMedFeatures, indptr, indices, data);
}

// One-hot rows [first, last) as an int32 ndarray pickle.
std::string pubmed_labels(int32_t first, int32_t last) {
  std::vector<int32_t> onehot;
  for (int32_t r = first; r < last; ++r)
    for (int32_t c = 0; c < kPubMedClasses; ++c) onehot.push_back(pubmed_class(r) == c ? 1 : 0);
  return pickle_of(ndarray_body({last - first, kPubMedClasses}, "i4", "<", false, raw_of(onehot)));
}

// The test ids in file order: 18717..19716 shuffled (fixed seed).
std::vector<int32_t> pubmed_test_ids() {
  std::vector<int32_t> ids(kPubMedTest);
  for (int32_t k = 0; k < kPubMedTest; ++k) ids[static_cast<size_t>(k)] = kPubMedBase + k;
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  return ids;
}

void write_pubmed(const fs::path& dir) {
  write_bytes(dir / "ind.pubmed.x", pubmed_features(0, kPubMedTrain));
  write_bytes(dir / "ind.pubmed.allx", pubmed_features(0, kPubMedBase));
  write_bytes(dir / "ind.pubmed.tx", pubmed_features(kPubMedBase, kPubMedNodes));
  write_bytes(dir / "ind.pubmed.y", pubmed_labels(0, kPubMedTrain));
  write_bytes(dir / "ind.pubmed.ally", pubmed_labels(0, kPubMedBase));
  write_bytes(dir / "ind.pubmed.ty", pubmed_labels(kPubMedBase, kPubMedNodes));
  std::string ids;
  for (int32_t id : pubmed_test_ids()) ids += std::to_string(id) + "\n";
  write_bytes(dir / "ind.pubmed.test.index", ids);
  // A ring: node i -> i + 1, as defaultdict(list) {i: [i + 1 mod N]}.
  std::string graph = "ccollections\ndefaultdict\nc__builtin__\nlist\n\x85R("s;
  for (int32_t i = 0; i < kPubMedNodes; ++i)
    graph += "J" + le32(i) + "](J" + le32((i + 1) % kPubMedNodes) + "e";
  write_bytes(dir / "ind.pubmed.graph", pickle_of(graph + "u"));
}

}  // namespace

TEST(Planetoid, PubMedShapedFilesLoadWithTheirFloatFeatures) {
  TempDir dir("gat_test_datasets");
  write_pubmed(dir.path());
  const Dataset d = load_dataset("PubMed", dir.path().string());  // all there: nothing is fetched
  // 2 * kPubMedNodes edges: the ring, made undirected.
  expect_planetoid(d,
                   {"pubmed", kPubMedNodes, 2 * kPubMedNodes, kPubMedFeatures, kPubMedClasses, kPubMedTrain});
  EXPECT_EQ(d.train_index.to_vector<int32_t>().back(), kPubMedTrain - 1);
  EXPECT_EQ(d.val_index.to_vector<int32_t>().front(), kPubMedTrain);
  EXPECT_EQ(d.test_index.to_vector<int32_t>().front(), kPubMedBase);
  // Every row holds its source row's float values exactly; test rows are placed as in PyG
  // (x[test[k]] = row sorted[k] of cat(allx, tx)).
  std::vector<int32_t> source(kPubMedNodes);
  for (int32_t i = 0; i < kPubMedNodes; ++i) source[static_cast<size_t>(i)] = i;
  const std::vector<int32_t> test = pubmed_test_ids();
  std::vector<int32_t> sorted = test;
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < test.size(); ++k) source[static_cast<size_t>(test[k])] = sorted[k];
  const float* x = d.x.data<float>();  // (N, F)
  const std::vector<int32_t> y = d.y.to_vector<int32_t>();
  for (int32_t i = 0; i < kPubMedNodes; ++i) {
    std::vector<float> expected(kPubMedFeatures, 0.0f), vals;
    std::vector<int32_t> cols;
    pubmed_row(source[static_cast<size_t>(i)], cols, vals);
    for (size_t k = 0; k < cols.size(); ++k) expected[static_cast<size_t>(cols[k])] += vals[k];
    ASSERT_TRUE(std::equal(expected.begin(), expected.end(), x + static_cast<int64_t>(i) * kPubMedFeatures))
        << "row " << i;
    ASSERT_EQ(y[static_cast<size_t>(i)], pubmed_class(source[static_cast<size_t>(i)])) << "node " << i;
  }
}

TEST(Planetoid, PubMedTrainsWithThePaperRecipeUnlessFlagsSayOtherwise) {
  EXPECT_EQ(recipe_for("PubMed").output_heads, 8);
  EXPECT_EQ(recipe_for("PubMed").lr, 0.01);
  EXPECT_EQ(recipe_for("PubMed").weight_decay, 0.001);
  EXPECT_EQ(recipe_for("cora").output_heads, 1);
  EXPECT_EQ(recipe_for("cora").lr, 0.005);
  TempDir dir("gat_test_datasets");
  write_pubmed(dir.path());
  // gat_train's last stdout line (its JSON summary) for `flags`.
  auto config_of = [&](const std::string& flags) {
    const std::string out = (dir.path() / "stdout.txt").string();
    const std::string command = std::string("'") + GAT_TRAIN_EXE + "' --dataset pubmed --data-dir '" +
                                dir.path().string() + "' --device cpu --epochs 1 --quiet --json " + flags +
                                " >'" + out + "'";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    const std::string text = read_bytes(out);  // ends with the JSON line and '\n'
    return nlohmann::json::parse(text.substr(text.rfind('\n', text.size() - 2) + 1)).at("config");
  };
  const nlohmann::json paper = config_of("");
  EXPECT_EQ(paper["output_heads"], 8);
  EXPECT_EQ(paper["lr"], 0.01);
  EXPECT_EQ(paper["weight_decay"], 0.001);
  EXPECT_EQ(paper["heads"], 8);
  const nlohmann::json own = config_of("--output-heads 2 --lr 0.02 --weight-decay 0");
  EXPECT_EQ(own["output_heads"], 2);
  EXPECT_EQ(own["lr"], 0.02);
  EXPECT_EQ(own["weight_decay"], 0.0);
}

TEST(Planetoid, NormalizeFeaturesAsPyG) {
  // PyG: x - x.min(), then rows divided by their sum clamped to >= 1.
  const Tensor x = Tensor::from_vector<float>({1, 3, 0, 0, 0, 0, 0.25f, 0.25f, 0}, {3, 3});
  EXPECT_EQ(normalize_features(x).to_vector<float>(),
            (std::vector<float>{0.25f, 0.75f, 0, 0, 0, 0, 0.25f, 0.25f, 0}));  // last row sums to 0.5 < 1
  const Tensor shifted = Tensor::from_vector<float>({-1, 1, -1, -1}, {2, 2});
  EXPECT_EQ(normalize_features(shifted).to_vector<float>(), (std::vector<float>{0, 1, 0, 0}));
  EXPECT_THROW(normalize_features(Tensor::zeros({3})), Error);
  SKIP_WITHOUT("cora");
  const Dataset d = load_planetoid("cora", planetoid_dir());
  const Tensor n = normalize_features(d.x);
  for (int64_t r = 0; r < n.size(0); ++r) {
    double sum = 0;
    for (int64_t c = 0; c < n.size(1); ++c) sum += n.data<float>()[r * n.size(1) + c];
    ASSERT_NEAR(sum, 1.0, 1e-5) << "row " << r;  // every Cora row has a feature
  }
}

// ---- hostile Planetoid files ----------------------------------------------------------------------

TEST(PlanetoidHostile, OutOfRangeAndDuplicateTestIds) {
  SKIP_WITHOUT("cora");
  CoraCopy copy;
  std::string ids = read_bytes(copy.file("test.index"));
  const std::string first = ids.substr(0, ids.find('\n'));
  write_bytes(copy.file("test.index"), "99999\n" + ids.substr(ids.find('\n') + 1));
  expect_error([&] { load_planetoid("cora", copy.path().string()); },
               {copy.file("test.index"), "test id 99999", "2708 nodes"});
  write_bytes(copy.file("test.index"), "2708\n" + ids.substr(ids.find('\n') + 1));
  expect_error([&] { load_planetoid("cora", copy.path().string()); },
               {copy.file("test.index"), "test id 2708"});
  write_bytes(copy.file("test.index"), "-3\n" + ids.substr(ids.find('\n') + 1));
  expect_error([&] { load_planetoid("cora", copy.path().string()); }, {copy.file("test.index") + ":1", "-3"});
  write_bytes(copy.file("test.index"), ids + first + "\n");
  expect_error([&] { load_planetoid("cora", copy.path().string()); }, {copy.file("test.index"), "twice"});
  write_bytes(copy.file("test.index"), ids.substr(0, 20) + "12x\n");
  expect_error([&] { load_planetoid("cora", copy.path().string()); },
               {copy.file("test.index") + ":5", "12x"});
}

TEST(PlanetoidHostile, CiteSeerTestIdSpanIsBounded) {
  SKIP_WITHOUT("citeseer");
  TempDir copy("gat_test_datasets");
  for (const char* part : {"x", "tx", "allx", "y", "ty", "ally", "graph"})
    fs::copy_file(fs::path(planetoid_dir()) / (std::string("ind.citeseer.") + part),
                  copy.path() / (std::string("ind.citeseer.") + part));
  // One id far away would widen tx to ~1e9 rows: refused before allocating.
  std::string ids = read_bytes(planetoid_dir() + "/ind.citeseer.test.index");
  write_bytes(copy.path() / "ind.citeseer.test.index", "999999999\n" + ids.substr(ids.find('\n') + 1));
  expect_error([&] { load_planetoid("citeseer", copy.path().string()); },
               {"ind.citeseer.test.index", "span"});
}

TEST(PlanetoidHostile, GraphNamingNodesBeyondN) {
  SKIP_WITHOUT("cora");
  CoraCopy copy;
  // defaultdict(list) {0: [5000]}
  const std::string body =
      "ccollections\ndefaultdict\nq\x01"
      "c__builtin__\nlist\nq\x02\x85Rq\x03(K\x00]q\x04M\x88\x13"
      "au"s;
  write_bytes(copy.file("graph"), pickle_of(body));
  expect_error([&] { load_planetoid("cora", copy.path().string()); },
               {copy.file("graph"), "node 5000", "[0, 2708)"});
  // {9999: []}: a key beyond N
  write_bytes(copy.file("graph"),
              pickle_of("ccollections\ndefaultdict\nc__builtin__\nlist\n\x85R(M\x0f\x27]u"s));
  expect_error([&] { load_planetoid("cora", copy.path().string()); }, {copy.file("graph"), "node 9999"});
}

TEST(PlanetoidHostile, InconsistentPartsNameTheFiles) {
  SKIP_WITHOUT("cora");
  CoraCopy copy;
  fs::copy_file(fs::path(planetoid_dir()) / "ind.cora.y", copy.file("ty"),
                fs::copy_options::overwrite_existing);
  expect_error([&] { load_planetoid("cora", copy.path().string()); },
               {copy.file("ty"), "140 rows", copy.file("tx")});
  fs::remove(copy.file("allx"));
  expect_error([&] { load_planetoid("cora", copy.path().string()); }, {copy.file("allx"), "cannot open"});
  expect_error([&] { load_planetoid("reddit", copy.path().string()); }, {"unknown dataset 'reddit'"});
}

// ---- the restricted unpickler ---------------------------------------------------------------------

TEST(Pickle, EmptyFile) {
  expect_error([] { parse("", "empty.pkl"); }, {"empty.pkl", "empty file"});
}

TEST(Pickle, EveryTruncationOfARealFileIsAnError) {
  SKIP_WITHOUT("cora");
  for (const char* part : {"y", "x", "graph"}) {
    const std::string path = planetoid_dir() + "/ind.cora." + part;
    const std::string bytes = read_bytes(path);
    ASSERT_FALSE(bytes.empty());
    EXPECT_NO_THROW(parse(bytes, path));
    // Every prefix of y and x; every 61st of the graph file (23,942 values a parse).
    const size_t step = std::string(part) == "graph" ? 61 : 1;
    for (size_t k = 0; k < bytes.size(); k += step) {
      try {
        parse(bytes.substr(0, k), path);
        FAIL() << path << " truncated to " << k << " bytes parsed";
      } catch (const Error& e) {
        ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Pickle, RandomBytesAreRejected) {
  std::mt19937 rng(123);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes(16 + rng() % 512, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    if (trial % 2) bytes.replace(0, 2, "\x80\x02");  // past the PROTO check
    try {
      const pickle::Document doc = parse(bytes, "random.pkl");
      pickle::to_dense(doc);
      FAIL() << "random bytes (trial " << trial << ") gave a dense matrix";
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("random.pkl"), std::string::npos) << e.what();
    }
  }
}

TEST(Pickle, UnknownOpcodeNamesTheByteOffset) {
  // LONG_BINGET ('j') is a real opcode, but not one of the 29.
  expect_error([] { parse("\x80\x02]q\x00j\x00\x00\x00\x00."s, "op.pkl"); }, {"op.pkl", "byte 5", "0x6a"});
  expect_error([] { parse("\x80\x02\xff."s, "op.pkl"); }, {"op.pkl", "byte 2", "0xff"});
  expect_error([] { parse("\x80\x03N."s, "op.pkl"); }, {"op.pkl", "byte 0", "protocol 3"});
}

TEST(Pickle, GlobalsOutsideTheSixAreRefused) {
  expect_error(
      [] {
        parse(
            "\x80\x02"
            "cos\nsystem\n(U\x02lstR."s,
            "evil.pkl");
      },
      {"evil.pkl", "byte 2", "'os system'"});
  expect_error(
      [] {
        parse(
            "\x80\x02"
            "c__builtin__\neval\n."s,
            "evil.pkl");
      },
      {"'__builtin__ eval'"});
  expect_error(
      [] {
        parse(
            "\x80\x02"
            "cnumpy\ndtype"s,
            "evil.pkl");
      },
      {"truncated"});
}

TEST(Pickle, LengthsLargerThanTheFileAreRefusedBeforeAllocating) {
  expect_error(
      [] {
        parse(
            "\x80\x02T\xff\xff\xff\x7f"
            "abc."s,
            "long.pkl");
      },
      {"long.pkl", "byte 2", "needs 2147483647 bytes"});
  expect_error(
      [] {
        parse(
            "\x80\x02T\xff\xff\xff\xff"
            "abc."s,
            "long.pkl");
      },
      {"negative string length"});
  expect_error(
      [] {
        parse(
            "\x80\x02U\x09"
            "abc."s,
            "long.pkl");
      },
      {"needs 9 bytes, 4 remain"});
  // An ndarray whose shape claims more elements than its bytes hold.
  const std::string big =
      pickle_of(ndarray_body({1 << 30, 1 << 30}, "f4", "<", false, raw_of(std::vector<float>{1, 2})));
  expect_error([&] { pickle::to_dense(parse(big, "shape.pkl")); },
               {"shape.pkl", "needs more than the 8 data bytes"});
  // A csr_matrix whose dense form would be huge.
  expect_error(
      [] {
        pickle::to_dense(parse(csr_pickle(1 << 30, 1 << 30, {0, 0}, {}, {}), "huge.pkl"));
      },
      {"huge.pkl", "dense limit"});
}

TEST(Pickle, StackAndMemoMisuse) {
  expect_error([] { parse("\x80\x02t."s, "s.pkl"); }, {"no MARK"});
  expect_error([] { parse("\x80\x02(a."s, "s.pkl"); }, {"stack underflow"});
  expect_error([] { parse("\x80\x02h\x05."s, "s.pkl"); }, {"memo key 5"});
  expect_error([] { parse("\x80\x02NN."s, "s.pkl"); }, {"expected one value on the stack, found 2"});
  expect_error([] { parse("\x80\x02N.N"s, "s.pkl"); }, {"1 bytes follow the STOP"});
  expect_error([] { parse("\x80\x02(N."s, "s.pkl"); }, {"MARK(s) still open"});
  expect_error([] { parse("\x80\x02" + std::string(100, '(') + "N.", "s.pkl"); }, {"nested MARKs"});
  expect_error([] { parse("\x80\x02NNa."s, "s.pkl"); }, {"APPEND target must be a list"});
  expect_error([] { parse("\x80\x02}(K\x01u."s, "s.pkl"); }, {"odd number of items"});
  // A list that contains itself: no crash, no leak (the arena owns every value), and the
  // converters refuse it.
  const pickle::Document cyclic = parse(
      "\x80\x02]q\x00h\x00"
      "a."s,
      "cycle.pkl");
  EXPECT_EQ(cyclic.root().items.size(), 1u);
  EXPECT_EQ(cyclic.root().items[0], &cyclic.root());
  expect_error([&] { pickle::to_adjacency(cyclic); }, {"cycle.pkl", "defaultdict"});
}

TEST(Pickle, NdarrayDtypesOrdersAndLayouts) {
  const std::vector<int64_t> i8 = {1, -2, 3, 4, 5, 6};
  const pickle::Document ints = parse(pickle_of(ndarray_body({2, 3}, "i8", "<", false, raw_of(i8))));
  const Tensor a = pickle::ndarray_to_tensor(ints, ints.root(), DType::i32);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, 4, 5, 6}));
  // Big-endian f8, Fortran order: storage is column-major.
  const std::vector<double> col_major = {1, 4, 2, 5, 3, 6};
  const pickle::Document f = parse(pickle_of(ndarray_body({2, 3}, "f8", ">", true, raw_of(col_major, true))));
  EXPECT_EQ(pickle::to_dense(f).to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Float data cannot become i32; i8 values beyond i32 are refused.
  expect_error([&] { pickle::ndarray_to_tensor(f, f.root(), DType::i32); }, {"integer array"});
  const pickle::Document wide =
      parse(pickle_of(ndarray_body({1}, "i8", "<", false, raw_of(std::vector<int64_t>{1ll << 40}))));
  expect_error([&] { pickle::ndarray_to_tensor(wide, wide.root(), DType::i32); }, {"does not fit in i32"});
  const pickle::Document u2 = parse(pickle_of(ndarray_body({2}, "u2", "<", false, "abcd")));
  expect_error([&] { pickle::ndarray_to_tensor(u2, u2.root(), DType::f32); }, {"unsupported dtype 'u2'"});
}

TEST(Pickle, CsrMatrixToDense) {
  // [[0, 2, 0], [1, 0, 3]], with a duplicate entry in row 1 that adds up (scipy's todense).
  const pickle::Document ok = parse(csr_pickle(2, 3, {0, 1, 4}, {1, 0, 2, 2}, {2, 1, 1, 2}), "m.pkl");
  EXPECT_EQ(pickle::to_dense(ok).to_vector<float>(), (std::vector<float>{0, 2, 0, 1, 0, 3}));
  expect_error(
      [] {
        pickle::to_dense(parse(csr_pickle(2, 3, {0, 1, 4}, {1, 0, 7, 2}, {1, 1, 1, 1}), "m.pkl"));
      },
      {"m.pkl", "column 7"});
  expect_error(
      [] {
        pickle::to_dense(parse(csr_pickle(2, 3, {0, 3, 2}, {1, 0, 2}, {1, 1, 1}), "m.pkl"));
      },
      {"indptr decreases at row 1"});
  expect_error(
      [] {
        pickle::to_dense(parse(csr_pickle(3, 3, {0, 1, 2}, {1, 0}, {1, 1}), "m.pkl"));
      },
      {"indptr has 3 entries for 3 rows"});
  expect_error(
      [] {
        pickle::to_dense(parse(csr_pickle(2, 3, {0, 1, 2}, {1, 0}, {1}), "m.pkl"));
      },
      {"indices has 2 entries but data has 1"});
}

TEST(Pickle, ADictsLastBatchOfOneKeyIsSETITEM) {
  // Python's pickler writes a dict in batches of 1000 keys, a batch of one with SETITEM (not
  // SETITEMS): so a graph of 1001 nodes ends, and {0: [1]} is (python3, protocol 2, as the
  // Planetoid files are written).
  const std::string one =
      "\x80\x02"
      "ccollections\ndefaultdict\nq\x00"
      "c__builtin__\nlist\nq\x01\x85q\x02Rq\x03"
      "K\x00]q\x04K\x01"
      "as."s;
  const auto adjacency = pickle::to_adjacency(parse(one, "one.pkl"));
  ASSERT_EQ(adjacency.size(), 1u);
  EXPECT_EQ(adjacency.at(0), (std::vector<int64_t>{1}));
  // SETITEM on a list is refused, naming it.
  expect_error([] { parse("\x80\x02]K\x00K\x01s."s, "bad.pkl"); }, {"bad.pkl", "SETITEM", "list"});
}

TEST(Pickle, RealFilesGiveTheirKnownShapes) {
  SKIP_WITHOUT("cora");
  const pickle::Document graph = pickle::Document::load(planetoid_dir() + "/ind.cora.graph");
  const auto adjacency = pickle::to_adjacency(graph);
  EXPECT_EQ(adjacency.size(), 2708u);
  EXPECT_EQ(adjacency.at(0), (std::vector<int64_t>{633, 1862, 2582}));
  EXPECT_LE(graph.value_count(), 59847u);  // at most one value per byte
  const Tensor y = pickle::to_dense(pickle::Document::load(planetoid_dir() + "/ind.cora.y"));
  EXPECT_EQ(y.shape(), (Shape{140, 7}));
}

// ---- custom directory loader --------------------------------------------------------------------

namespace {

void write_custom(const fs::path& dir) {
  fs::create_directories(dir / "split");
  write_gz(dir / "edge.csv.gz", "0,1\n1,2\n2,0\n3,4\n1,0\n4,4\n");  // 1,0 duplicates 0,1; 4,4 a loop
  write_bytes(dir / "node-feat.csv", "0.5,1\n-2,3e2\n\n1,1\r\n0,0\n7,+8\n");
  write_bytes(dir / "node-label.csv", "1\n0\n2\n1\n0\n");
  write_bytes(dir / "split" / "train.csv", "3\n0\n");
  write_gz(dir / "split" / "valid.csv.gz", "1\n");
  write_bytes(dir / "split" / "test.csv", "4\n2\n");
}

// A change to one of write_custom's files and what loading the folder then says.
struct Corruption {
  std::string file;  // under the folder; a .gz name is written gzipped
  std::string bytes;
  std::vector<std::string> expected;
};

// Each corruption on a fresh copy of write_custom's files in `dir`.
void expect_each_refused(const fs::path& dir, const std::vector<Corruption>& corruptions) {
  for (const Corruption& c : corruptions) {
    write_custom(dir);
    const fs::path path = dir / c.file;
    if (path.extension() == ".gz")
      write_gz(path, c.bytes);
    else
      write_bytes(path, c.bytes);
    expect_error([&] { load_custom(dir.string()); }, c.expected);
  }
}

}  // namespace

TEST(Custom, RoundTrip) {
  TempDir tmp("gat_test_datasets");
  write_custom(tmp.path());
  const Dataset d = load_custom(tmp.path().string());
  EXPECT_EQ(d.x.shape(), (Shape{5, 2}));
  EXPECT_EQ(d.x.to_vector<float>(), (std::vector<float>{0.5f, 1, -2, 300, 1, 1, 0, 0, 7, 8}));
  EXPECT_EQ(d.y.to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 2, 1, 0}));
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_EQ(d.train_index.to_vector<int32_t>(), (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(d.val_index.to_vector<int32_t>(), (std::vector<int32_t>{1}));
  EXPECT_EQ(d.test_index.to_vector<int32_t>(), (std::vector<int32_t>{2, 4}));
  expect_undirected_simple(d.graph);
  EXPECT_EQ(d.graph.num_edges(), 8);  // {0-1, 1-2, 2-0, 3-4} both ways
  EXPECT_EQ(load_dataset(tmp.path().string()).graph.num_edges(), 8);
}

TEST(Custom, ErrorsNameFileAndLine) {
  TempDir tmp("gat_test_datasets");
  expect_each_refused(
      tmp.path(), {{"node-feat.csv", "1,2\n3,4\n5\n", {"node-feat.csv:3", "1 features, the first row has 2"}},
                   {"node-feat.csv", "1,2\n3,x\n", {"node-feat.csv:2", "field 2 'x'"}},
                   {"node-feat.csv", "1,2\n3,nan\n", {"node-feat.csv:2", "not finite"}},
                   {"edge.csv.gz", "0,1\n1,9\n", {"edge.csv.gz:2", "node id 9", "[0, 5)"}},
                   {"edge.csv.gz", "0,1,2\n", {"edge.csv.gz:1", "expected 'src,dst'"}},
                   {"node-label.csv", "1\n0\n2\n", {"node-label.csv", "3 labels for the 5 nodes"}},
                   {"node-label.csv", "1\n0\n2\n1\n-1\n", {"node-label.csv:5", "label -1"}},
                   {"split/test.csv", "4\n4\n", {"test.csv", "node id 4 appears twice"}},
                   {"split/test.csv", "4\n5\n", {"test.csv:2", "node id 5"}}});
  auto load = [&] { load_custom(tmp.path().string()); };
  fs::remove(tmp.path() / "split" / "test.csv");
  expect_error(load, {"test.csv", "not found"});
  // A truncated gzip stream.
  write_custom(tmp.path());
  std::string gz = read_bytes((tmp.path() / "edge.csv.gz").string());
  write_bytes(tmp.path() / "edge.csv.gz", gz.substr(0, gz.size() / 2));
  expect_error(load, {"edge.csv.gz"});
}

// edge-feat.csv: one line per line of edge.csv. edge.csv lists 0,1 and 1,0 (lines 1 and 5) and
// the loop 4,4 (line 6): 0 -> 1 and 1 -> 0 both get lines 1 + 5, the reverses the line of their
// edge, and the loop's features go with it.
TEST(Custom, EdgeFeaturesFollowTheGraphsEdgeOrder) {
  TempDir tmp("gat_test_datasets");
  write_custom(tmp.path());
  EXPECT_FALSE(load_custom(tmp.path().string()).edge_attr.defined());
  write_gz(tmp.path() / "edge-feat.csv.gz", "1,10\n2,20\n\n3,30\n4,40\n5,50\n6,60\n");
  const Dataset d = load_custom(tmp.path().string());
  ASSERT_EQ(d.graph.sources(), (std::vector<int32_t>{1, 2, 0, 2, 0, 1, 4, 3}));
  ASSERT_EQ(d.graph.destinations(), (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 4}));
  EXPECT_EQ(d.num_edge_features(), 2);
  EXPECT_EQ(d.edge_attr.to_vector<float>(),
            (std::vector<float>{6, 60, 3, 30, 6, 60, 2, 20, 3, 30, 2, 20, 4, 40, 4, 40}));
}

TEST(Custom, MalformedEdgeFeaturesNameFileAndLine) {
  TempDir tmp("gat_test_datasets");
  std::vector<Corruption> corruptions{
      {"edge-feat.csv", "1\n2\n3\n4\n5\n", {"edge-feat.csv has 5 lines for the 6 edges of", "edge.csv.gz"}},
      {"edge-feat.csv",
       "1\n2\n3\n4\n5\n6\n7\n",
       {"edge-feat.csv:7", "more lines than the 6 edges of", "edge.csv.gz"}},
      {"edge-feat.csv",
       "1,2\n2,3\n3\n4,5\n5,6\n6,7\n",
       {"edge-feat.csv:3", "1 edge features, the first row has 2"}},
      {"edge-feat.csv", "1\n2\n3\nx\n5\n6\n", {"edge-feat.csv:4", "field 1 'x' is not a number"}}};
  for (const char* bad : {"nan", "inf", "-inf", "1e39"})
    corruptions.push_back(
        {"edge-feat.csv", std::string("1\n2\n3\n4\n5\n") + bad + "\n", {"edge-feat.csv:6", "field 1"}});
  expect_each_refused(tmp.path(), corruptions);
}

TEST(Custom, LabelsBeyondTheNodeCountAndOverlappingOrEmptySplitsAreRefused) {
  TempDir tmp("gat_test_datasets");
  expect_each_refused(
      tmp.path(),
      {// One bad label used to set the class count (a 1,000,001-class model for 5 nodes).
       {"node-label.csv", "1\n0\n1000000\n1\n0\n", {"node-label.csv:3", "label 1000000 is outside [0, 5)"}},
       {"split/train.csv",
        "3\n0\n1\n",
        {"valid.csv.gz: validation node 1 is also a training node", "train.csv"}},
       {"split/test.csv", "\n", {"test.csv: the test split is empty"}}});
}

TEST(Text, GzipIsDecodedWithinARatioOfItsSize) {
  const std::string plain = "0,1\n" + std::string(4 << 20, '\n');  // 4 MiB of blank lines
  const std::string gz = gat::testing::gzip(plain);
  ASSERT_GT(plain.size(), gz.size() * text::kDefaultMaxGzipRatio + text::kGzipSlackBytes);
  ::unsetenv("GAT_MAX_GZIP_RATIO");
  expect_error([&] { text::decode(gz, "bomb.gz"); },
               {"bomb.gz: decompresses to more than", "GAT_MAX_GZIP_RATIO"});
  ::setenv("GAT_MAX_GZIP_RATIO", "100000", 1);
  EXPECT_EQ(text::decode(gz, "bomb.gz"), plain);
  EXPECT_EQ(text::decode(gz + gz, "two.gz"), plain + plain);  // concatenated members
  expect_error([&] { text::decode(gz.substr(0, gz.size() - 4), "cut.gz"); },
               {"cut.gz: truncated gzip stream"});
  ::setenv("GAT_MAX_GZIP_RATIO", "0", 1);
  expect_error([&] { text::decode(gz, "bomb.gz"); }, {"GAT_MAX_GZIP_RATIO='0' is not a positive integer"});
  ::unsetenv("GAT_MAX_GZIP_RATIO");
  EXPECT_EQ(text::decode("1,2\n", "plain.csv"), "1,2\n");  // plain text passes unchanged
}

// A list stated once and referenced through the memo for every key used to be copied for every
// key (7.5 GB from a 450 KB file): the copies count against what the file can state.
TEST(Pickle, MemoReferencesCountAgainstTheOutput) {
  auto graph = [](int keys, int items) {
    std::string p =
        "\x80\x02"
        "ccollections\ndefaultdict\nc__builtin__\nlist\n\x85R(K"s +
        '\0' + "]q\x01(";
    for (int i = 0; i < items; ++i) p += "K"s + static_cast<char>(i % 250);
    p += "e";
    for (int k = 1; k < keys; ++k)
      p += "M"s + static_cast<char>(k & 0xff) + static_cast<char>(k >> 8) + "h\x01";
    return p + "u.";
  };
  const pickle::Document small = pickle::Document::parse(graph(3, 4), "small.graph");
  const auto adjacency = pickle::to_adjacency(small);
  ASSERT_EQ(adjacency.size(), 3u);
  EXPECT_EQ(adjacency.at(2), (std::vector<int64_t>{0, 1, 2, 3}));
  const pickle::Document bomb = pickle::Document::parse(graph(3000, 3000), "bomb.graph");
  expect_error([&] { pickle::to_adjacency(bomb); },
               {"bomb.graph: the adjacency lists hold more than", "memo"});
}

// ---- generator --------------------------------------------------------------------------------------

// FNV-1a over the bytes of every array of a generated dataset: the graph, x, y and the splits.
uint64_t dataset_fingerprint(const Dataset& d) {
  uint64_t hash = 14695981039346656037ull;
  for (const Tensor* t :
       {&d.graph.row_ptr(), &d.graph.edge_src(), &d.x, &d.y, &d.train_index, &d.val_index, &d.test_index}) {
    const auto* bytes = static_cast<const unsigned char*>(t->raw_data());
    for (size_t i = 0; i < t->nbytes(); ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  }
  return hash;
}

// 70,000 nodes: every stage runs in parallel (the split, the class tables and the scans start at
// 65,536 items).
TEST(Generator, DeterministicForASeedWhateverTheThreadCount) {
  GeneratorOptions o{70000, 10, 42};  // num_nodes, avg_degree, seed
  o.test_size = o.num_nodes;          // the rest
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Dataset one = generate_sbm(o);
  omp_set_num_threads(std::max(2, threads));
  const Dataset many = generate_sbm(o);
  omp_set_num_threads(threads);
  EXPECT_EQ(one.graph.sources(), many.graph.sources());
  EXPECT_EQ(one.graph.destinations(), many.graph.destinations());
  EXPECT_EQ(one.x.to_vector<float>(), many.x.to_vector<float>());
  EXPECT_EQ(one.y.to_vector<int32_t>(), many.y.to_vector<int32_t>());
  for (const auto split : {&Dataset::train_index, &Dataset::val_index, &Dataset::test_index})
    EXPECT_EQ((one.*split).to_vector<int32_t>(), (many.*split).to_vector<int32_t>());
  EXPECT_EQ(dataset_fingerprint(one), dataset_fingerprint(many));
  o.seed = 43;
  const Dataset other = generate_sbm(o);
  EXPECT_NE(one.graph.sources(), other.graph.sources());
  EXPECT_NE(one.y.to_vector<int32_t>(), other.y.to_vector<int32_t>());
  EXPECT_NE(one.x.to_vector<float>(), other.x.to_vector<float>());
}

// A seed's dataset is fixed: benchmarks and documents quote its numbers. These fingerprints were
// taken before the generator became lean for 100M nodes (f9ab7f5), which kept every draw.
TEST(Generator, TheDatasetOfASeedStaysTheSame) {
  GeneratorOptions o{70000, 10, 42};  // num_nodes, avg_degree, seed
  o.test_size = o.num_nodes;
  EXPECT_EQ(dataset_fingerprint(generate_sbm(o)), 3754352722795169687ull);
  GeneratorOptions small{3000, 16, 9};  // below every parallel threshold
  small.num_classes = 5;
  small.signal = 0.2;
  small.intra_fraction = 0.4;
  EXPECT_EQ(dataset_fingerprint(generate_sbm(small)), 2227507713344002937ull);
}

TEST(Generator, SkewedDegreesHomophilyAndInformativeFeatures) {
  const GeneratorOptions o{50000, 16, 7};  // num_nodes, avg_degree, seed
  const Dataset d = generate_sbm(o);
  expect_undirected_simple(d.graph);
  const double mean_degree = static_cast<double>(d.graph.num_edges()) / static_cast<double>(o.num_nodes);
  EXPECT_GT(mean_degree, 0.8 * o.avg_degree);
  EXPECT_LE(mean_degree, o.avg_degree);
  EXPECT_GT(static_cast<double>(d.graph.max_in_degree()), 20 * mean_degree);  // power-law tail
  const std::vector<int32_t> y = d.y.to_vector<int32_t>(), s = d.graph.sources(), t = d.graph.destinations();
  size_t same = 0;
  for (size_t e = 0; e < s.size(); ++e) same += y[static_cast<size_t>(s[e])] == y[static_cast<size_t>(t[e])];
  EXPECT_GT(static_cast<double>(same) / static_cast<double>(s.size()), 0.7);  // chance: 1/8
  // Nearest class mean classifies most nodes (chance 1/8).
  const int64_t c = o.num_classes, f = o.num_features;
  std::vector<double> mean(static_cast<size_t>(c * f), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(c), 0);
  const float* x = d.x.data<float>();
  for (int64_t i = 0; i < o.num_nodes; ++i) {
    ++count[static_cast<size_t>(y[i])];
    for (int64_t j = 0; j < f; ++j) mean[static_cast<size_t>(y[i] * f + j)] += x[i * f + j];
  }
  int64_t right = 0;
  for (int64_t i = 0; i < o.num_nodes; ++i) {
    int64_t best = 0;
    double best_score = -1e300;
    for (int64_t k = 0; k < c; ++k) {
      double score = 0;
      for (int64_t j = 0; j < f; ++j)
        score += x[i * f + j] * mean[static_cast<size_t>(k * f + j)] / count[static_cast<size_t>(k)];
      if (score > best_score) best_score = score, best = k;
    }
    right += best == y[i];
  }
  EXPECT_GT(static_cast<double>(right) / static_cast<double>(o.num_nodes), 0.5);
  // Split: 20 per class, 500, 1000; disjoint.
  EXPECT_EQ(d.train_index.numel(), 20 * c);
  EXPECT_EQ(d.val_index.numel(), 500);
  EXPECT_EQ(d.test_index.numel(), 1000);
  expect_split_shape(d);
}

TEST(Generator, RejectsBadOptions) {
  GeneratorOptions o;
  o.num_nodes = 0;
  expect_error([&] { generate_sbm(o); }, {"num_nodes 0"});
  o.num_nodes = 10;
  o.pareto_alpha = 1.0;
  expect_error([&] { generate_sbm(o); }, {"pareto_alpha"});
  o.pareto_alpha = 2.5;
  o.signal = std::nan("");  // otherwise NaN in every feature
  expect_error([&] { generate_sbm(o); }, {"signal nan must be a finite number"});
  o.signal = 0.5;
  // Past 2^31 edges the graph has i64 offsets; past 2^32 - 1 the graph build cannot sort them:
  // refused before any work.
  o.num_nodes = 2147483647;
  o.avg_degree = 2.5;
  expect_error([&] { generate_sbm(o); }, {"gives too many edges", "at most 2^32 - 1"});
  o.num_nodes = 10;
  o.avg_degree = 9.5;  // more than 10 nodes' 9 neighbours
  expect_error([&] { generate_sbm(o); }, {"avg_degree 9.5 exceeds what 10 nodes allow", "(9)"});
  // 10 nodes of 8 classes, 20 training nodes a class: nothing left to validate or test on.
  o.avg_degree = 4;
  expect_error([&] { generate_sbm(o); }, {"10 nodes are too few for the splits: at least 661 are needed"});
  o.train_per_class = 1;  // a node of each class present, the rest for validation, none for the test
  expect_error([&] { generate_sbm(o); }, {"at least 509 are needed (8 classes x 1 training nodes + 500"});
  o.val_size = 1;
  o.test_size = 0;  // no test asked for: the split check says so
  expect_error([&] { generate_sbm(o); },
               {"(test: the 0 nodes after the validation ones, of 10)", "the test split is empty"});
  o.test_size = 1000;
  const Dataset d = generate_sbm(o);
  EXPECT_EQ(d.val_index.numel(), 1);
  EXPECT_GE(d.test_index.numel(), 1);
  EXPECT_EQ(d.train_index.numel() + d.val_index.numel() + d.test_index.numel(), 10);
}

// ---- registry -----------------------------------------------------------------------------------------

TEST(Registry, SyntheticSpecsAndErrors) {
  const Dataset d = load_dataset("synthetic:2000:8:5");
  EXPECT_EQ(d.num_nodes(), 2000);
  EXPECT_EQ(d.name, "synthetic:2000:8:5");
  const nlohmann::json s = nlohmann::json::parse(dataset_summary(d));
  for (const char* key :
       {"nodes", "edges", "features", "classes", "train", "val", "test", "label_counts", "feature_checksum"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_EQ(s["edges"], d.graph.num_edges());
  expect_error([] { load_dataset("synthetic:2000:8"); }, {"synthetic:2000:8", "3 fields"});
  expect_error([] { load_dataset("synthetic:abc:8:1"); }, {"nodes 'abc'"});
  expect_error([] { load_dataset("no-such-dataset"); }, {"unknown dataset 'no-such-dataset'"});
  EXPECT_FALSE(d.edge_attr.defined());
  EXPECT_EQ(s["edge_features"], 0);
  const Dataset with_edges = load_dataset("synthetic:2000:8:5:3");
  EXPECT_EQ(with_edges.edge_attr.shape(), (Shape{with_edges.graph.num_edges(), 3}));
  EXPECT_TRUE(
      gat::testing::bitwise_equal(with_edges.x, d.x));  // the edge features draw from streams of their own
  expect_error([] { load_dataset("synthetic:2000:8:5:x"); }, {"edge_dim 'x'", "[:<edge_dim>]"});
  expect_error([] { load_dataset("synthetic:2000:8:5:-1"); }, {"num_edge_features -1"});
  expect_error([] { load_dataset("synthetic:2000:8:5:1:2"); }, {"6 fields"});
}

// Both directions of an edge get the same row; its sign says whether the ends share a class.
TEST(Generator, EdgeFeaturesAreSymmetricAndSayWhetherTheEndsShareAClass) {
  GeneratorOptions o{3000, 16, 9};  // num_nodes, avg_degree, seed
  o.num_edge_features = 4;
  const Dataset d = generate_sbm(o);
  const std::vector<int32_t> src = d.graph.sources(), dst = d.graph.destinations(),
                             y = d.y.to_vector<int32_t>();
  const std::vector<float> a = d.edge_attr.to_vector<float>();
  const int64_t E = d.graph.num_edges(), D = 4;
  ASSERT_EQ(d.edge_attr.shape(), (Shape{E, D}));
  std::map<std::pair<int32_t, int32_t>, int64_t> id;
  for (int64_t e = 0; e < E; ++e) id[{src[e], dst[e]}] = e;
  double same_class = 0, other_class = 0;
  int64_t same_count = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r = id.at({dst[e], src[e]});
    for (int64_t k = 0; k < D; ++k) {
      EXPECT_EQ(a[e * D + k], a[r * D + k]);
      EXPECT_LE(std::abs(a[e * D + k]), 1.0f + static_cast<float>(o.signal));
      (y[src[e]] == y[dst[e]] ? same_class : other_class) += a[e * D + k];
    }
    same_count += y[src[e]] == y[dst[e]];
  }
  EXPECT_GT(same_class / static_cast<double>(same_count * D), 0.4);
  EXPECT_LT(other_class / static_cast<double>((E - same_count) * D), -0.4);
}

TEST(Registry, DataDirFromTheEnvironment) {
  {
    const gat::testing::ScopedEnv elsewhere("GAT_DATA_DIR", "/some/where");
    EXPECT_EQ(default_data_dir(), "/some/where");
    // Not there: fetched from GAT_DATASET_URL (a closed port in the tests), which fails naming the
    // file, the folder and what to do.
    expect_error([] { load_dataset("cora"); }, {"ind.cora.x is missing from /some/where", "by hand"});
  }
  SKIP_WITHOUT("cora");
  EXPECT_EQ(load_dataset("CORA").num_nodes(), 2708);
}

// ---- reliability round 3: bounded messages, number edge cases, missing vs unreadable files ------------

TEST(Text, AnErrorQuotesAFieldInBoundedSpace) {
  const std::string field(20 << 20, '9');  // a 20 MB field: the old message quoted all of it
  try {
    text::parse_floats("1," + field, "f.csv:1");
    ADD_FAILURE() << "a 20 MB number parsed";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), 200u) << message.substr(0, 300);
    EXPECT_NE(message.find("f.csv:1: field 2 '" + std::string(kQuoteBytes, '9') + "...' (20971520 bytes)"),
              std::string::npos)
        << message;
  }
  // At the bound a field is quoted whole; a byte more and it is cut, never inside a character.
  EXPECT_EQ(quote(std::string(kQuoteBytes, 'x')), "'" + std::string(kQuoteBytes, 'x') + "'");
  EXPECT_EQ(quote(std::string(kQuoteBytes + 1, 'x')),
            "'" + std::string(kQuoteBytes, 'x') + "...' (61 bytes)");
  const std::string accents = std::string(kQuoteBytes - 1, 'x') + "\xc3\xa9\xc3\xa9";  // 'é' across the cut
  EXPECT_EQ(quote(accents), "'" + std::string(kQuoteBytes - 1, 'x') + "...' (63 bytes)");
}

TEST(Text, AnyMessageIsCutAfterItsBound) {
  std::string words;  // 1 MiB of short words: each passes, the message does not
  while (words.size() < (1 << 20)) words += "yyy ";
  try {
    GAT_FAIL("head ", words);
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), detail::kMaxMessageBytes + 100);
    EXPECT_EQ(message.rfind("head yyy", 0), 0u);
    EXPECT_NE(message.find("... (a message of 1048581 bytes, cut) [test_datasets.cpp:"), std::string::npos);
  }
}

TEST(Text, AnyLongWordOfAMessageKeepsItsEnds) {
  const std::string path = "/" + std::string(5000, 'a') + "/edge.csv";  // a 5 KB --data-dir, echoed unquoted
  try {
    GAT_FAIL("load_custom: ", path, " not found");
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), detail::kMaxWordBytes + 100) << message.substr(0, 400);
    EXPECT_EQ(message.rfind("load_custom: /" + std::string(127, 'a') + "...(5010 bytes)..." +
                                std::string(119, 'a') + "/edge.csv not found [test_datasets.cpp:",
                            0),
              0u)
        << message;
  }
  // At the bound a word stays whole; the cut never falls inside a character.
  const std::string whole(detail::kMaxWordBytes, 'x');
  EXPECT_EQ(cut_long_words("a " + whole + " b"), "a " + whole + " b");
  const std::string accents =
      std::string(127, 'x') + "\xc3\xa9" + std::string(200, 'z');  // 'é' across the head's cut
  EXPECT_EQ(cut_long_words(accents), std::string(127, 'x') + "...(329 bytes)..." + std::string(128, 'z'));
}

TEST(Text, NumbersBelowTheSmallestFloatReadAsTheNearestOne) {
  const float smallest = std::numeric_limits<float>::denorm_min();  // 1.4e-45
  EXPECT_EQ(text::parse_floats("1e-40, -1e-40", "f")[0], 1e-40f);
  EXPECT_EQ(text::parse_floats("1.4e-45", "f")[0], smallest);
  EXPECT_EQ(text::parse_floats("1e-50", "f")[0], 0.0f);  // underflow: 0, as strtof reads it
  EXPECT_EQ(text::parse_floats("-1e-50", "f")[0], 0.0f);
  EXPECT_TRUE(std::signbit(text::parse_floats("-1e-50", "f")[0]));
  EXPECT_EQ(text::parse_floats("1e-400", "f")[0], 0.0f);  // below double's range too
  EXPECT_EQ(text::parse_floats("3.4028234e38", "f")[0], std::numeric_limits<float>::max());
  for (const char* big : {"1e39", "-1e39", "1e400"})
    expect_error([&] { text::parse_floats(big, "f.csv:3"); },
                 {"f.csv:3: field 1 '", "is not a number (out of range)"});
  expect_error([] { text::parse_ints("99999999999999999999", "i.csv:1"); }, {"(out of range)"});
}

TEST(Text, AByteOrderMarkBeforeTheFirstLineIsSkipped) {
  const std::string text =
      "\xef\xbb\xbf"
      "1,2\n3,4\n";
  text::Lines lines(text);
  std::string_view line;
  ASSERT_TRUE(lines.next(line));
  EXPECT_EQ(line, "1,2");
  EXPECT_EQ(text::parse_floats(line, "f"), (std::vector<float>{1, 2}));
  // Only at the start: one inside the text is a byte like any other.
  const std::string inner =
      "1\n\xef\xbb\xbf"
      "2\n";
  text::Lines more(inner);
  ASSERT_TRUE(more.next(line));
  ASSERT_TRUE(more.next(line));
  expect_error([&] { text::parse_ints(line, "f:2"); }, {"f:2: field 1"});
  EXPECT_FALSE(text::Lines(std::string("\xef\xbb\xbf")).next(line));  // a BOM alone: no lines
}

TEST(Custom, AnOptionalFileThatIsThereButUnreadableIsAnError) {
  TempDir tmp("gat_test_datasets");
  write_custom(tmp.path());
  auto load = [&] { load_custom(tmp.path().string()); };
  fs::create_symlink(tmp.path() / "nowhere", tmp.path() / "edge-feat.csv");  // dangling
  expect_error(load, {"edge-feat.csv: cannot open: a symbolic link to", "nowhere, which does not exist"});
  fs::remove(tmp.path() / "edge-feat.csv");
  fs::create_directories(tmp.path() / "edge-feat.csv.gz");
  expect_error(load, {"edge-feat.csv.gz is a directory"});
  fs::remove(tmp.path() / "edge-feat.csv.gz");
  EXPECT_EQ(load_custom(tmp.path().string()).num_edge_features(), 0);  // absent: none
  if (::geteuid() == 0) GTEST_SKIP() << "as root every file is readable";
  write_bytes(tmp.path() / "edge-feat.csv", "1\n2\n3\n4\n5\n6\n");
  fs::permissions(tmp.path() / "edge-feat.csv", fs::perms::none);
  expect_error(load, {"edge-feat.csv: cannot open: Permission denied"});
  fs::remove(tmp.path() / "edge-feat.csv");
  fs::permissions(tmp.path() / "split", fs::perms::owner_read);  // listed, not searchable
  expect_error(load, {"split/train.csv: Permission denied"});    // not "not found"
  fs::permissions(tmp.path() / "split", fs::perms::owner_all);
}

// edge.csv lists 0,1 and 1,0 (lines 1 and 5): their features are summed, and may overflow.
TEST(Custom, SummedEdgeFeaturesThatOverflowNameTheEdge) {
  TempDir tmp("gat_test_datasets");
  write_custom(tmp.path());
  write_bytes(tmp.path() / "edge-feat.csv", "1,2e38\n0,0\n0,0\n0,0\n1,2e38\n0,0\n");
  expect_error([&] { load_custom(tmp.path().string()); },
               {"edge-feat.csv: the edge 1 -> 0 is listed more than once", "feature 2 is inf"});
  // 0 - 1 gets lines 1 + 5 (2e38), 2 - 0 line 3 (2e38): each fits, and node 0's self loop gets their
  // sum (add), or the mean of a sum that passes the largest float; their max fits.
  write_bytes(tmp.path() / "edge-feat.csv", "1,1e38\n0,0\n0,2e38\n0,0\n1,1e38\n0,0\n");
  const Dataset looped = gat::with_self_loops(load_custom(tmp.path().string()));
  for (const char* fill : {"add", "mean"})
    expect_error([&] { check_self_loop_features(looped, ops::SelfLoopFill::parse(fill)); },
                 {looped.name, ": the self loop of node 0 gets edge feature 2 = inf",
                  "by the fill '" + std::string(fill)});
  check_self_loop_features(looped, ops::SelfLoopFill::parse("max"));
  check_self_loop_features(looped, ops::SelfLoopFill::parse("1e38"));
}

// gat_train moves its dataset into with_self_loops: the graph without loops must then be freed,
// not kept beside the looped one through the whole run (a second graph at the memory peak).
TEST(WithSelfLoops, AMovedDatasetKeepsNoCopyOfTheGraphWithoutLoops) {
  GeneratorOptions o;
  o.num_nodes = 1000;
  Dataset data = generate_sbm(o);
  const Graph& g = data.graph;
  const std::vector<std::weak_ptr<TensorImpl>> arrays = {g.row_ptr().impl_ptr(),    g.edge_src().impl_ptr(),
                                                         g.edge_dst().impl_ptr(),   g.t_row_ptr().impl_ptr(),
                                                         g.t_edge_dst().impl_ptr(), g.t_edge_id().impl_ptr()};
  const auto alive = [&] {
    return std::count_if(arrays.begin(), arrays.end(), [](const auto& a) { return !a.expired(); });
  };
  const Dataset copied = gat::with_self_loops(data);  // the caller's copy keeps them
  EXPECT_EQ(alive(), 6);
  const Dataset looped = gat::with_self_loops(std::move(data));
  EXPECT_EQ(alive(), 0);
  EXPECT_TRUE(looped.graph.one_self_loop_per_node());
  EXPECT_EQ(looped.graph.num_edges(), copied.graph.num_edges());
}

TEST(Planetoid, NonFiniteFeaturesAreNamedWhereTheyAppear) {
  // A double beyond the largest float, a NaN, and repeated csr entries whose sum passes it.
  for (const double bad : {1e300, std::numeric_limits<double>::quiet_NaN()}) {
    const pickle::Document f8 =
        parse(pickle_of(ndarray_body({2, 2}, "f8", "<", false, raw_of(std::vector<double>{1, 2, 3, bad}))),
              "x.pkl");
    expect_error([&] { pickle::to_dense(f8); }, {"x.pkl", "element (1, 1) is", "features must be finite"});
  }
  expect_error(
      [] {
        pickle::to_dense(parse(csr_pickle(1, 2, {0, 2}, {1, 1}, {3e38f, 3e38f}), "m.pkl"));
      },
      {"m.pkl", "element (0, 1) is inf"});
  const Tensor x = Tensor::from_vector(std::vector<float>{-3e38f, 0, 3e38f, 1}, {2, 2});
  expect_error([&] { normalize_features(x); },
               {"normalize_features: row 1", "the features span more than the largest float"});
}

TEST(Registry, ABuiltInNameThatIsAlsoAFolderIsAmbiguous) {
  TempDir tmp("gat_test_datasets");
  const fs::path previous = fs::current_path();
  fs::current_path(tmp.path());
  write_custom(tmp.path() / "cora");
  std::optional<gat::testing::ScopedEnv> data_env;
  data_env.emplace("GAT_DATA_DIR", std::nullopt);
  expect_error([] { load_dataset("cora"); }, {"'cora' names both a built-in dataset and the folder ./cora",
                                              "write ./cora for the folder", "(--data-dir or GAT_DATA_DIR)"});
  EXPECT_FALSE(dataset_is_folder("cora"));  // gat_train's output checks read it as load_dataset does
  EXPECT_TRUE(dataset_is_folder("./cora"));
  data_env.emplace("GAT_DATA_DIR", "");  // empty is unset
  expect_error([] { load_dataset("cora"); }, {"names both a built-in dataset"});
  // GAT_DATA_DIR, --data-dir's default, gives the built-in dataset's folder as --data-dir does.
  data_env.emplace("GAT_DATA_DIR", (tmp.path() / "planetoid").string());
  expect_error([&] { load_dataset("cora"); }, {"ind.cora.x is missing from"});
  data_env.emplace("GAT_DATA_DIR", std::nullopt);
  EXPECT_EQ(load_dataset("./cora").num_nodes(), 5);  // a '/': the folder
  EXPECT_EQ(load_dataset("cora/").num_nodes(), 5);
  // With a data folder the name is the built-in dataset (offline in the tests: its download fails).
  expect_error([&] { load_dataset("cora", (tmp.path() / "planetoid").string()); },
               {"ind.cora.x is missing from"});
  fs::create_directories(tmp.path() / "synthetic:700:4:0");
  expect_error([] { load_dataset("synthetic:700:4:0"); }, {"names both a built-in dataset"});
  write_bytes(tmp.path() / "plain", "x");
  expect_error([] { load_dataset("plain"); }, {"unknown dataset 'plain'", "it is not a directory"});
  fs::current_path(previous);
}

TEST(Registry, TheCacheFolderFallsBackAsXdgToolsDoAndIsNeededOnlyForPlanetoid) {
  const gat::testing::ScopedEnv data("GAT_DATA_DIR", std::nullopt), cache("XDG_CACHE_HOME", std::nullopt),
      home("HOME", std::nullopt);
  EXPECT_EQ(find_default_data_dir("/home/acct"), "/home/acct/.cache/gat/planetoid");  // the account's home
  EXPECT_EQ(find_default_data_dir(nullptr), std::nullopt);
  EXPECT_EQ(find_default_data_dir(""), std::nullopt);
  {
    const gat::testing::ScopedEnv relative("XDG_CACHE_HOME", "relative/cache");  // ignored: not absolute
    const gat::testing::ScopedEnv set_home("HOME", "/h");
    EXPECT_EQ(find_default_data_dir("/home/acct"), "/h/.cache/gat/planetoid");
  }
  {
    const gat::testing::ScopedEnv absolute("XDG_CACHE_HOME", "/c");
    EXPECT_EQ(find_default_data_dir(nullptr), "/c/gat/planetoid");
  }
  // Without HOME, a dataset that needs no cache loads.
  EXPECT_EQ(load_dataset("synthetic:700:4:0").num_nodes(), 700);
}

TEST(Generator, TheSmallestGraphIsTheSplitsNodesPlusATestNode) {
  GeneratorOptions o;  // 8 classes x 20 training nodes + 500 validation + 1 test = 661
  o.avg_degree = 4;
  o.num_nodes = 660;
  expect_error([&] { generate_sbm(o); },
               {"generate_sbm: 660 nodes are too few for the splits: at least 661 are "
                "needed (8 classes x 20 training nodes + 500 validation nodes + a test node)"});
  expect_error([] { load_dataset("synthetic:660:4:0"); }, {"at least 661 are needed"});
  for (uint64_t seed = 0; seed < 4; ++seed) {  // enough for every seed
    o.num_nodes = 661;
    o.seed = seed;
    EXPECT_GE(generate_sbm(o).test_index.numel(), 1);
  }
  o.train_per_class = std::numeric_limits<int64_t>::max();
  expect_error([&] { generate_sbm(o); }, {"at least 2^63 are needed"});
}

TEST(Download, TheGitBlobIdIsGitsOwn) {
  try {
    // `git hash-object FILE` on a file of the 12 bytes "hello world\n", on an empty file, and on
    // the 3 bytes 'a', NUL, 'b' (printf 'a\0b' > FILE), with git 2.x.
    EXPECT_EQ(git_blob_id("hello world\n"), "3b18e512dba79e4c8300dd08aeb37f8e728b8dad");
    EXPECT_EQ(git_blob_id(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    EXPECT_EQ(git_blob_id(std::string("a\0b", 3)), "20b5be91886d0b6f26dc98a225c0dac05fe2c86e");
  } catch (const Error& e) {
    if (std::string(e.what()).find("no downloader") == std::string::npos) throw;
    GTEST_SKIP() << "a build without the downloader: " << e.what();
  }
}
