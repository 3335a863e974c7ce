// The backend-consistency table: one row per op of framework/ops/, and for every row
//   - CUDA against the CPU reference, forward and backward, f32 and f64 (skipped without a device);
//   - bitwise the same CUDA results on a second run;
//   - the f64 gradient of every float input against central finite differences, on the CPU and
//     (with a device) on CUDA;
//   - bad arguments raising a gat::Error that names the op and what is wrong.
// Adding an op is its three files (docs/design.md) and one row here; a test below fails when an
// op header has no row. What is specific to one op (worked examples, long rows, masks bit for
// bit) stays in its family's test file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gat/framework/graph.h"
#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/add_into.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/attention/gat_edge_scores.h"
#include "gat/framework/ops/attention/gatv2_attention_aggregate.h"
#include "gat/framework/ops/attention/head_dot.h"
#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat/framework/ops/batch_norm.h"
#include "gat/framework/ops/block_graph.h"
#include "gat/framework/ops/classification_metrics.h"
#include "gat/framework/ops/concat.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/fill.h"
#include "gat/framework/ops/global_pool.h"
#include "gat/framework/ops/head_mean.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/ops/layer_norm.h"
#include "gat/framework/ops/log_softmax.h"
#include "gat/framework/ops/losses.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/micro_f1.h"
#include "gat/framework/ops/narrow.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/ops/reshape.h"
#include "gat/framework/ops/sample_neighbors.h"
#include "gat/framework/ops/scatter_add.h"
#include "gat/framework/ops/segment_reduce.h"
#include "gat/framework/ops/sparse_dropout.h"
#include "gat/framework/ops/sparse_matmul.h"
#include "gat/framework/ops/to_dtype.h"
#include "gat/framework/ops/transpose.h"
#include "gat/framework/ops/unary.h"
#include "gat/framework/sparse.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

namespace {

using Inputs = std::vector<Tensor>;

// A fixed non-float argument of an op (a graph, an index, a sparse matrix), made once on the host
// and copied to the device the first time a CUDA run asks for it.
template <class T>
class OnDevice {
 public:
  explicit OnDevice(T host) : host_(std::move(host)), device_(std::make_shared<std::optional<T>>()) {}
  const T& on(Device device) const {
    if (device == Device::cpu) return host_;
    if (!*device_) *device_ = host_.to(Device::cuda);
    return **device_;
  }
  const T& host() const { return host_; }

 private:
  T host_;
  std::shared_ptr<std::optional<T>> device_;  // shared by the copies of the row's lambdas
};

struct ErrorCase {
  std::function<void()> call;
  std::vector<std::string> parts;  // what the message must contain
};

struct OpCase {
  std::string header;        // framework/ops/<header>.h
  std::string name;          // the row's name in failure messages
  TensorFn f;                // float inputs, all on one device -> one output
  std::vector<Shape> large;  // CUDA against CPU and reproducibility (several blocks' worth)
  std::vector<Shape> small;  // f64 gradient checks (two evaluations per element)
  std::vector<ErrorCase> errors = {};
  bool differentiable = true;
  // CUDA against CPU: element by element, |cpu - cuda| <= tol max(|cpu|, |cuda|, 1e-6), or with
  // `normwise` max |cpu - cuda| <= tol max |cpu|: for ops whose backward subtracts a sum (softmax)
  // or that sum long products (matmul, aggregation), where the two devices' summation orders leave
  // tiny f32 elements with no correct digits.
  bool normwise = false;
};

// 1 where t > 0, else 0: multi-label targets of t's shape, dtype and device.
Tensor zero_one(const Tensor& t) {
  std::vector<double> v = t.to(Device::cpu).to(DType::f64).to_vector<double>();
  for (double& e : v) e = e > 0 ? 1.0 : 0.0;
  return Tensor::from_vector(v, t.shape()).to(t.dtype()).to(t.device());
}

// Indices with repeats (every 3rd row, some rows three times) for `rows` source rows.
Tensor repeating_index(int64_t count, int64_t rows) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k)
    v[static_cast<size_t>(k)] = static_cast<int32_t>((k * 7 + k / 3) % rows);
  return Tensor::from_vector(v, {count});
}

// `count` distinct nodes of [0, nodes): k * 7 mod nodes (distinct while count <= nodes and 7
// does not divide nodes).
Tensor distinct_nodes(int64_t count, int64_t nodes) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) v[static_cast<size_t>(k)] = static_cast<int32_t>(k * 7 % nodes);
  return Tensor::from_vector(v, {count});
}

// Offsets of `segments` segments over `rows` rows, growing quadratically: the first ones empty,
// the last ones long.
Tensor quadratic_offsets(int64_t rows, int64_t segments) {
  std::vector<int32_t> v(static_cast<size_t>(segments) + 1);
  for (int64_t s = 0; s <= segments; ++s)
    v[static_cast<size_t>(s)] = static_cast<int32_t>(s * s * rows / (segments * segments));
  return Tensor::from_vector(v, {segments + 1});
}

Tensor random_labels(int64_t N, int64_t C, std::mt19937_64& rng) {
  std::vector<int32_t> y(static_cast<size_t>(N));
  for (int32_t& v : y) v = static_cast<int32_t>(rng() % C);
  return Tensor::from_vector(y, {N});
}

// The rows; with wide_offsets, every graph the rows build has i64 offsets (the same graphs).
std::vector<OpCase> op_cases(bool wide_offsets = false) {
  std::mt19937_64 rng(2024);
  const DropoutKey key{0.35f, 123, 4};
  const Tensor index_large = repeating_index(3000, 1000), index_small = repeating_index(9, 4);
  // Segments: large with empty ones first and long ones last; small with empty ones at both ends
  // and inside. Batch vectors for the pools, unsorted (index_rows puts x in graph order first),
  // with graphs that have no node.
  const Tensor offsets_large = quadratic_offsets(3000, 700);
  const Tensor offsets_small = Tensor::from_vector<int32_t>({0, 0, 3, 3, 4, 7, 7}, {7});
  const Tensor batch_large = repeating_index(3000, 40);
  const Tensor batch_small = Tensor::from_vector<int32_t>({3, 0, 2, 0, 2, 5, 2}, {7});
  auto segment_row = [=](const char* name, Tensor (*op)(const Tensor&, const ops::Segments&),
                         std::vector<ErrorCase> errors = {}) {
    return OpCase{"segment_reduce",
                  name,
                  [=](const Inputs& in) {
                    const Tensor& offsets = in[0].size(0) == 3000 ? offsets_large : offsets_small;
                    return op(in[0], ops::Segments(offsets, in[0].device()));
                  },
                  {{3000, 3, 11}},
                  {{7, 2, 3}},
                  std::move(errors)};
  };
  auto pool_row = [=](const char* name, Tensor (*op)(const Tensor&, const Tensor&, int64_t),
                      std::vector<ErrorCase> errors = {}) {
    return OpCase{"global_pool",
                  name,
                  [=](const Inputs& in) {
                    const bool large = in[0].size(0) == 3000;
                    return op(in[0], large ? batch_large : batch_small, large ? 45 : -1);
                  },
                  {{3000, 33}},
                  {{7, 3}},
                  std::move(errors)};
  };
  // Graphs: a large one with a hub (rows and transposed rows cut into chunks on the device) and
  // the small one with empty rows and a self loop.
  GraphBuildOptions graph_options;
  graph_options.wide_offsets = wide_offsets;
  const OnDevice<Graph> big(random_graph(3000, 30000, 300, rng, graph_options)),
      mixed(mixed_graph(graph_options));
  EXPECT_EQ(big.host().offset_dtype(), wide_offsets ? DType::i64 : DType::i32);
  const int64_t NB = big.host().num_nodes(), EB = big.host().num_edges();
  const int64_t NM = mixed.host().num_nodes(), EM = mixed.host().num_edges();
  // Cross-entropy: labels of 500 rows (5 classes), 200 of them listed with repeats; small: 4 rows.
  const OnDevice<Tensor> labels_large(random_labels(500, 5, rng)), labels_small(random_labels(4, 3, rng));
  const OnDevice<Tensor> ce_index_large(repeating_index(200, 500)), ce_index_small(repeating_index(5, 4));
  // Sparse left operands.
  const OnDevice<CsrMatrix> sparse_large(
      CsrMatrix::from_dense(sparse_random(400, 300, rng, 0.05, DType::f64)));
  const OnDevice<CsrMatrix> sparse_small(CsrMatrix::from_dense(sparse_random(9, 14, rng, 0.3, DType::f64)));
  const int64_t nnz_large = sparse_large.host().nnz(), nnz_small = sparse_small.host().nnz();
  auto sparse_with = [](const OnDevice<CsrMatrix>& a, const Tensor& values) {
    return a.on(values.device()).with_values(values);
  };
  const Tensor z23 = Tensor::zeros({2, 3}), z32 = Tensor::zeros({3, 2});
  // where's masks: (33, 1) for a (40, 33, 67) output, (3, 1) for (2, 3, 4); every other row kept.
  auto alternating_mask = [](int64_t rows) {
    std::vector<int32_t> v(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) v[static_cast<size_t>(r)] = r % 2 == 0 ? 7 : 0;
    return Tensor::from_vector(v, {rows, 1});
  };
  const OnDevice<Tensor> mask_large(alternating_mask(33)), mask_small(alternating_mask(3));
  // sample_neighbors of every 7th node of big (distinct) by one draw: its four outputs, joined.
  const OnDevice<Tensor> sample_seeds(distinct_nodes(400, big.host().num_nodes()));
  auto sample_row = [=](const char* name, ops::NeighborDraw draw, std::vector<ErrorCase> errors = {}) {
    return OpCase{"sample_neighbors",
                  name,
                  [=](const Inputs& in) {
                    const Device d = in[0].device();
                    const Graph& g = big.on(d);
                    const ops::SampledLayer l =
                        ops::sample_neighbors(g.row_ptr(), g.edge_src(), sample_seeds.on(d), draw);
                    return ops::concat({l.row_ptr, l.col, l.edge_ids, l.src_nodes}, 0);
                  },
                  {{1}},
                  {},
                  std::move(errors),
                  false};
  };
  // block_graph of every in-edge of 400 nodes of big (the hub's rows and the transpose's cut into
  // chunks) or of mixed's 8 nodes (a self loop replaced, empty rows): every array and count.
  const OnDevice<Tensor> mixed_nodes(distinct_nodes(8, 8));
  auto block_row = [=](const char* name, bool on_mixed, std::vector<ErrorCase> errors = {}) {
    return OpCase{
        "block_graph",
        name,
        [=](const Inputs& in) {
          const Device d = in[0].device();
          const Graph& g = (on_mixed ? mixed : big).on(d);
          const ops::SampledLayer l = ops::sample_neighbors(
              g.row_ptr(), g.edge_src(), (on_mixed ? mixed_nodes : sample_seeds).on(d), {-1, false, 0, 0});
          const Graph b = ops::block_graph(l.row_ptr, l.col, l.src_nodes.numel());
          const std::vector<int64_t> counts = {
              b.num_src_nodes(),    b.num_dst_nodes(),    b.max_in_degree(),
              b.max_out_degree(),   b.chunk_edges(),      b.num_row_chunks(),
              b.num_t_row_chunks(), b.count_self_loops(), b.one_self_loop_per_node()};
          std::vector<int32_t> c(counts.begin(), counts.end());
          return ops::concat(
              {b.row_ptr(), b.edge_src(), b.edge_dst(), b.t_row_ptr(), b.t_edge_dst(), b.t_edge_id(),
               b.row_chunk_ptr(), b.t_row_chunk_ptr(), b.row_chunk_row(), b.t_row_chunk_row(), b.row_order(),
               b.t_row_order(), Tensor::from_vector(c, {static_cast<int64_t>(c.size())}, d)},
              0);
        },
        {{1}},
        {},
        std::move(errors),
        false};
  };
  // self_loop_attr by one fill_value, on big or mixed (both with existing self loops) and their
  // looped graphs.
  const OnDevice<Graph> big_looped(big.host().with_self_loops()),
      mixed_looped(mixed.host().with_self_loops());
  auto self_loop_row = [=](const char* fill, std::vector<ErrorCase> errors = {}) {
    return OpCase{"self_loop_attr",
                  std::string("self_loop_attr ") + fill,
                  [=](const Inputs& in) {
                    const bool large = in[0].size(0) == big.host().num_edges();
                    const Device d = in[0].device();
                    return ops::self_loop_attr((large ? big : mixed).on(d),
                                               (large ? big_looped : mixed_looped).on(d), in[0],
                                               ops::SelfLoopFill::parse(fill));
                  },
                  {{EB, 6}},
                  {{EM, 2}},
                  std::move(errors),
                  true,
                  true};
  };
  // The rows are added a group at a time: as one braced list of all of them (hundreds of
  // temporaries, each with its cleanup, in one expression) this function took g++ half as long
  // again to compile (the file: 23.9 CPU-seconds at -O1, 16.3 in groups of ten, 10.0 at -Og).
  std::vector<OpCase> cases;
  const auto add_rows = [&cases](std::initializer_list<OpCase> rows) {
    cases.insert(cases.end(), rows.begin(), rows.end());
  };
  add_rows({
      {"arithmetic",
       "add",
       [](const Inputs& in) { return ops::add(in[0], in[1]); },
       {{513, 67}, {513, 67}},
       {{3, 4}, {3, 4}},
       {{[=] { ops::add(z23, z32); }, {"add", "(2, 3)", "(3, 2)"}}}},
      {"arithmetic",
       "add(x, x)",
       [](const Inputs& in) { return ops::add(in[0], in[0]); },
       {{513, 67}},
       {{3, 4}}},
      {"arithmetic",
       "mul",
       [](const Inputs& in) { return ops::mul(in[0], in[1]); },
       {{513, 67}, {513, 67}},
       {{3, 4}, {3, 4}},
       {{[=] { ops::mul(z23, z32); }, {"mul", "(2, 3)", "(3, 2)"}}}},
      {"arithmetic",
       "mul(x, x)",
       [](const Inputs& in) { return ops::mul(in[0], in[0]); },
       {{513, 67}},
       {{3, 4}}},
      {"arithmetic", "scale", [](const Inputs& in) { return ops::scale(in[0], -0.3); }, {{100003}}, {{5}}},
      {"arithmetic",
       "add_bias",
       [](const Inputs& in) { return ops::add_bias(in[0], in[1]); },
       {{300, 8, 67}, {67}},
       {{2, 3, 4}, {4}},
       {{[=] { ops::add_bias(z23, Tensor::zeros({2})); }, {"add_bias", "(2,)"}}}},
      {"activations",
       "relu",
       [](const Inputs& in) { return ops::relu(in[0]); },
       {{100003}},
       {{4, 5}},
       {{[] { ops::relu(Tensor::zeros({2}, DType::i32)); }, {"relu", "i32"}}}},
      {"activations",
       "leaky_relu",
       [](const Inputs& in) { return ops::leaky_relu(in[0], 0.2); },
       {{100003}},
       {{4, 5}}},
      {"activations", "elu", [](const Inputs& in) { return ops::elu(in[0], 1.3); }, {{100003}}, {{4, 5}}},
      {"dropout",
       "dropout",
       [key](const Inputs& in) { return ops::dropout(in[0], key); },
       {{1000, 99}},
       {{6, 7}},
       {{[=] {
           ops::dropout(z23, DropoutKey{1.0f, 0, 0});
         },
         {"dropout", "1"}}}},
  });
  add_rows({
      {"elu_dropout",
       "elu_dropout",
       [key](const Inputs& in) { return ops::elu_dropout(in[0], 1.3, key); },
       {{1000, 99}},
       {{6, 7}},
       {{[=] {
           ops::elu_dropout(z23, 1.0, DropoutKey{1.0f, 0, 0});
         },
         {"elu_dropout", "p = 1", "outside [0, 1)"}},
        {[=] { ops::elu_dropout(z23, -0.5, key); }, {"elu_dropout", "alpha = -0.5", "alpha >= 0"}},
        {[=] { ops::elu_dropout(z23, NAN, key); }, {"elu_dropout", "alpha = nan"}},
        {[] { ops::elu_dropout(Tensor::zeros({2}, DType::i32), 1.0, DropoutKey{}); }, {"elu_dropout", "i32"}},
        {[=] {
           static const uint64_t device_base = 0;  // a key made while a CUDA graph records
           ops::elu_dropout(z23, 1.0, DropoutKey{0.5f, 0, 0, &device_base});
         },
         {"dropout", "recorded for a CUDA graph"}}}},
      {"elu_dropout",
       "elu_dropout, inactive key",
       [](const Inputs& in) { return ops::elu_dropout(in[0], 1.3, DropoutKey{}); },
       {{100003}},
       {{4, 5}}},
      {"reshape",
       "reshape",
       [](const Inputs& in) {
         return ops::reshape(in[0], {-1, 2});
       },
       {{50, 7, 6}},
       {{2, 3, 2}},
       {{[=] {
           ops::reshape(z23, {4, 2});
         },
         {"reshape", "(2, 3)"}}}},
      // Through bf16 and back: CUDA rounds and widens as the CPU, forward and backward. No
      // gradient check: a rounding has no finite differences (test_precision.cpp checks the
      // gradient's cast bit for bit).
      {"to_dtype",
       "to_dtype through bf16",
       [](const Inputs& in) { return ops::to_dtype(ops::to_dtype(in[0], DType::bf16), in[0].dtype()); },
       {{1000, 37}},
       {},
       {{[=] { ops::to_dtype(Tensor::zeros({2}, DType::i32), DType::f32); }, {"to_dtype", "i32 cpu (2,)"}},
        {[=] { ops::to_dtype(z23, DType::i32); }, {"to_dtype", "target dtype i32"}}}},
      {"reduce", "sum", [](const Inputs& in) { return ops::sum(in[0]); }, {{1000003}}, {{3, 4}}},
      {"reduce", "mean", [](const Inputs& in) { return ops::mean(in[0]); }, {{700, 301}}, {{3, 4}}},
      {"reduce",
       "sum axis 0",
       [](const Inputs& in) { return ops::sum(in[0], 0); },
       {{300, 70, 5}},
       {{2, 3, 4}},
       {{[=] { ops::sum(z23, 2); }, {"sum", "axis", "(2, 3)"}}}},
      {"reduce",
       "sum axis 1",
       [](const Inputs& in) { return ops::sum(in[0], 1); },
       {{300, 70, 5}},
       {{2, 3, 4}}},
      {"reduce", "sum axis 0, long", [](const Inputs& in) { return ops::sum(in[0], 0); }, {{40000, 3}}, {}},
      {"reduce", "sum axis -1, long", [](const Inputs& in) { return ops::sum(in[0], -1); }, {{3, 40000}}, {}},
  });
  add_rows({
      {"reduce",
       "sum axis -1",
       [](const Inputs& in) { return ops::sum(in[0], -1); },
       {{300, 70, 5}},
       {{2, 3, 4}}},
      {"reduce",
       "mean axis 1",
       [](const Inputs& in) { return ops::mean(in[0], 1); },
       {{300, 70, 5}},
       {{2, 3, 4}}},
      // A short axis (GAT's mean over the output layer's heads): a thread per output on CUDA.
      {"reduce",
       "mean axis 1, short",
       [](const Inputs& in) { return ops::mean(in[0], 1); },
       {{30000, 8, 7}},
       {{5, 1, 3}}},
      {"reduce",
       "sum axis 1, one",
       [](const Inputs& in) { return ops::sum(in[0], 1); },
       {{30000, 1, 8}},
       {{4, 1, 2}}},
      {"concat",
       "concat axis 1",
       [](const Inputs& in) {
         return ops::concat({in[0], in[1], in[2]}, 1);
       },
       {{200, 3, 9}, {200, 17, 9}, {200, 1, 9}},
       {{2, 1, 3}, {2, 4, 3}, {2, 2, 3}},
       {{[=] {
           ops::concat({z23, z32}, 1);
         },
         {"concat", "(2, 3)", "(3, 2)"}}}},
      {"concat",
       "concat axis 0",
       [](const Inputs& in) {
         return ops::concat({in[0], in[1]}, 0);
       },
       {{300, 64}, {17, 64}},
       {{2, 3}, {1, 3}}},
      {"concat",
       "concat(x, x) axis -1",
       [](const Inputs& in) {
         return ops::concat({in[0], in[0]}, -1);
       },
       {{300, 33}},
       {{3, 2}}},
      {"index_rows",
       "index_rows",
       [index_large](const Inputs& in) { return ops::index_rows(in[0], index_large); },
       {{1000, 4, 16}},
       {},
       {{[=] {
           ops::index_rows(z23, Tensor::from_vector<int32_t>({0, 5}, {2}));
         },
         {"index_rows", "5"}}}},
      {"index_rows",
       "index_rows small",
       [index_small](const Inputs& in) { return ops::index_rows(in[0], index_small); },
       {},
       {{4, 2, 3}}},
      {"index_rows",
       "index_select axis 1",
       [=](const Inputs& in) {
         return ops::index_select(in[0], 1, in[0].size(1) == 1000 ? index_large : index_small);
       },
       {{5, 1000, 7}},
       {{2, 4, 3}},
       {{[=] {
           ops::index_select(z23, 1, Tensor::from_vector<int32_t>({0, 3}, {2}));
         },
         {"index_select", "index 3", "axis 1", "(2, 3)", "length 3"}},
        {[=] { ops::index_select(z23, -3, Tensor::from_vector<int32_t>({0}, {1})); },
         {"index_select", "axis -3", "(2, 3)"}}}},
  });
  add_rows({
      {"index_rows",
       "index_select axis -1",
       [=](const Inputs& in) {
         return ops::index_select(in[0], -1, in[0].size(1) == 1000 ? index_large : index_small);
       },
       {{30, 1000}},
       {{3, 4}}},
      {"narrow",
       "narrow axis 1",
       [](const Inputs& in) { return ops::narrow(in[0], 1, 2, 5); },
       {{300, 33, 9}},
       {{2, 7, 3}},
       {{[=] { ops::narrow(z23, 1, 2, 2); }, {"narrow", "length 2", "start 2", "(2, 3)"}},
        {[=] { ops::narrow(z23, 1, 4, 0); }, {"narrow", "start 4", "(2, 3)"}},
        {[=] { ops::narrow(z23, 2, 0, 1); }, {"narrow", "axis 2", "(2, 3)"}}}},
      {"narrow",
       "narrow axis -1 to its last element",
       [](const Inputs& in) { return ops::narrow(in[0], -1, in[0].size(-1) - 1, 1); },
       {{300, 67}},
       {{3, 4}}},
      {"narrow",
       "select",
       [](const Inputs& in) { return ops::select(in[0], -2, -1) * ops::select(in[0], 0, 1); },
       {{33, 33, 9}},
       {{3, 3, 2}},
       {{[=] { ops::select(z23, 0, 2); }, {"select", "index 2", "(2, 3)"}},
        {[=] { ops::select(z23, 0, -3); }, {"select", "index -3"}}}},
      {"concat",
       "stack axis 1",
       [](const Inputs& in) {
         return ops::stack({in[0], in[1], in[0]}, 1);
       },
       {{300, 33}, {300, 33}},
       {{2, 3}, {2, 3}},
       {{[=] {
           ops::stack({z23, z32}, 0);
         },
         {"stack", "inputs[1]", "(3, 2)", "(2, 3)"}},
        {[=] { ops::stack({z23}, 3); }, {"stack", "axis 3"}},
        {[=] { ops::stack({}, 0); }, {"stack", "no inputs"}}}},
      {"concat",
       "stack axis -1",
       [](const Inputs& in) {
         return ops::stack({in[0], in[1]}, -1);
       },
       {{300, 33}, {300, 33}},
       {{2, 3}, {2, 3}}},
      {"scatter_add",
       "scatter_add",
       [index_large, index_small](const Inputs& in) {
         const bool large = in[0].size(0) == 3000;
         return ops::scatter_add(in[0], large ? index_large : index_small, large ? 1100 : 6);
       },
       {{3000, 4, 16}},
       {{9, 2, 3}},
       {{[=] {
           ops::scatter_add(z32, Tensor::from_vector<int32_t>({0, 5, 1}, {3}), 5);
         },
         {"scatter_add", "index 5", "position 1", "5 segments"}},
        {[=] {
           ops::scatter_add(z32, Tensor::from_vector<int32_t>({0, -1, 1}, {3}), 5);
         },
         {"scatter_add", "index -1", "negative"}},
        {[=] {
           ops::scatter_add(z23, Tensor::from_vector<int32_t>({0, 1, 1}, {3}), 5);
         },
         {"scatter_add", "(2, 3)", "one row per index entry (3)"}}}},
      segment_row("segment_sum", ops::segment_sum,
                  {{[] {
                      ops::segment_sum(Tensor::zeros({4, 2}),
                                       ops::Segments(Tensor::from_vector<int32_t>({0, 3, 2, 4}, {4})));
                    },
                    {"Segments", "decrease", "offsets[2] = 2 < offsets[1] = 3"}},
                   {[] {
                      ops::segment_sum(Tensor::zeros({4, 2}),
                                       ops::Segments(Tensor::from_vector<int32_t>({0, 3}, {2})));
                    },
                    {"segment_sum", "(4, 2)", "offsets end at 3"}},
                   {[] {
                      ops::segment_mean(Tensor::zeros({2}, DType::i32),
                                        ops::Segments(Tensor::from_vector<int32_t>({0, 2}, {2})));
                    },
                    {"segment_mean", "i32"}}}),
      segment_row("segment_mean", ops::segment_mean),
      segment_row("segment_max", ops::segment_max),
  });
  add_rows({
      pool_row(
          "global_add_pool", ops::global_add_pool,
          {{[] {
              ops::global_add_pool(Tensor::zeros({3, 2}), Tensor::from_vector<int32_t>({0, 4, 1}, {3}), 3);
            },
            {"global_add_pool", "batch[1] = 4", "size 3"}},
           {[] {
              ops::global_max_pool(Tensor::zeros({3, 2}), Tensor::from_vector<int32_t>({0, -4, 1}, {3}));
            },
            {"global_max_pool", "batch[1] = -4", "negative"}},
           {[] {
              ops::global_mean_pool(Tensor::zeros({3, 2}), Tensor::zeros({2}, DType::i32));
            },
            {"global_mean_pool", "'batch' i32 cpu (2,)", "(3, 2)"}}}),
      pool_row("global_mean_pool", ops::global_mean_pool),
      pool_row("global_max_pool", ops::global_max_pool),
      {"layer_norm",
       "layer_norm",
       [](const Inputs& in) { return ops::layer_norm(in[0], in[1], in[2], 1e-5); },
       {{300, 7, 129}, {129}, {129}},
       {{3, 2, 5}, {5}, {5}},
       {{[] {
           ops::layer_norm(Tensor::zeros({2, 0}), Tensor(), Tensor());
         },
         {"layer_norm", "last axis"}},
        {[] {
           ops::layer_norm(Tensor::zeros({2, 3}), Tensor(), Tensor(), -1.0);
         },
         {"layer_norm", "eps -1"}}}},
      {"layer_norm",
       "layer_norm plain",
       [](const Inputs& in) { return ops::layer_norm(in[0], Tensor(), Tensor(), 1e-3); },
       {{1000, 64}},
       {{4, 6}}},
      {"batch_norm",
       "batch_norm training",
       [](const Inputs& in) {
         return ops::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
       },
       {{3000, 70}, {70}, {70}},
       {{5, 3}, {3}, {3}},
       {{[=] {
           ops::batch_norm(Tensor::zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
         },
         {"batch_norm", "at least 2 rows"}},
        {[=] { ops::batch_norm(z23, Tensor(), Tensor(), Tensor(), Tensor(), true, 1.5); },
         {"batch_norm", "momentum 1.5"}}}},
      {"batch_norm",
       "batch_norm training, long",
       [](const Inputs& in) {
         return ops::batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
       },
       {{40000, 3}},
       {}},
      {"batch_norm",
       "batch_norm eval",
       [](const Inputs& in) {
         const int64_t C = in[0].size(1);
         Tensor running_mean = Tensor::full({C}, 0.25, in[0].dtype(), in[0].device());
         Tensor running_var = Tensor::full({C}, 1.5, in[0].dtype(), in[0].device());
         return ops::batch_norm(in[0], running_mean, running_var, in[1], in[2], false, 0.1, 1e-5);
       },
       {{500, 33}, {33}, {33}},
       {{4, 3}, {3}, {3}}},
      // Broadcasting arithmetic: rows, columns, single elements, constants on either side. Divisors
      // and logarithms see 0.5 + x^2 (the inputs are uniform in [-1, 1]).
      {"arithmetic",
       "sub",
       [](const Inputs& in) { return in[0] - in[1]; },
       {{513, 67}, {513, 67}},
       {{3, 4}, {3, 4}},
       {{[] {
           Tensor::zeros({2, 3, 4}) - Tensor::zeros({2, 1});
         },
         {"sub", "(2, 3, 4)", "(2, 1)", "do not broadcast (axis -2: 3 against 2)"}}}},
      {"arithmetic",
       "div",
       [](const Inputs& in) { return in[0] / (in[1] * in[1] + 0.5); },
       {{513, 67}, {513, 67}},
       {{3, 4}, {3, 4}},
       {{[] { 1.0 / Tensor::zeros({2}, DType::i32); }, {"div", "'b'", "i32"}}}},
  });
  add_rows({
      {"arithmetic",
       "add row",
       [](const Inputs& in) { return in[0] + in[1]; },
       {{300, 8, 67}, {67}},
       {{2, 3, 4}, {4}}},
      {"arithmetic",
       "sub row (1, C) first",
       [](const Inputs& in) { return in[1] - in[0]; },
       {{513, 67}, {1, 67}},
       {{3, 4}, {1, 4}}},
      {"arithmetic",
       "mul column",
       [](const Inputs& in) { return in[0] * in[1]; },
       {{513, 67}, {513, 1}},
       {{3, 4}, {3, 1}}},
      {"arithmetic",
       "div column",
       [](const Inputs& in) { return in[0] / (in[1] * in[1] + 0.5); },
       {{513, 67}, {513, 1}},
       {{3, 4}, {3, 1}}},
      {"arithmetic",
       "div by a row",
       [](const Inputs& in) { return in[1] / (in[0] * in[0] + 0.5); },
       {{513, 67}, {67}},
       {{3, 4}, {4}}},
      {"arithmetic",
       "mul single",
       [](const Inputs& in) { return in[1] * in[0]; },
       {{513, 67}, {1, 1}},
       {{3, 4}, {1, 1}}},
      {"arithmetic",
       "outer sum",
       [](const Inputs& in) { return in[0] + in[1]; },
       {{513, 1}, {1, 67}},
       {{3, 1}, {1, 4}}},
      // Broadcasting over any number of axes, both ways, and the comparison, power and selection ops.
      {"arithmetic",
       "add 3-d and 2-d",
       [](const Inputs& in) { return in[0] + in[1]; },
       {{40, 33, 67}, {33, 67}},
       {{2, 3, 4}, {3, 4}},
       {{[] {
           Tensor::zeros({2, 3, 4}) + Tensor::zeros({2, 4});
         },
         {"add", "(2, 3, 4)", "(2, 4)", "axis -2"}}}},
      {"arithmetic",
       "mul (2, 1, 4) by (3, 1): both broadcast",
       [](const Inputs& in) { return in[0] * in[1]; },
       {{40, 1, 67}, {33, 1}},
       {{2, 1, 4}, {3, 1}}},
      {"arithmetic",
       "sub a middle axis",
       [](const Inputs& in) { return in[1] - in[0]; },
       {{40, 33, 67}, {40, 1, 67}},
       {{2, 3, 4}, {2, 1, 4}}},
  });
  add_rows({
      {"arithmetic",
       "div 4-d by ()",
       [](const Inputs& in) { return in[0] / (in[1] * in[1] + 0.5); },
       {{5, 6, 7, 8}, {}},
       {{2, 1, 3, 2}, {}}},
      {"arithmetic",
       "maximum",
       [](const Inputs& in) { return ops::maximum(in[0], in[1]); },
       {{40, 33, 67}, {33, 1}},
       {{2, 3, 4}, {3, 1}},
       {{[=] {
           ops::maximum(z23, Tensor::zeros({2, 3}, DType::f64));
         },
         {"maximum", "'b'", "f64"}}}},
      {"arithmetic",
       "minimum",
       [](const Inputs& in) { return ops::minimum(in[0], in[1]) + ops::minimum(in[0], 0.25); },
       {{513, 67}, {67}},
       {{3, 4}, {4}},
       {{[=] { ops::minimum(z23, z32); }, {"minimum", "(2, 3)", "(3, 2)"}}}},
      {"arithmetic",
       "pow",
       [](const Inputs& in) { return ops::pow(in[0] * in[0] + 0.5, in[1]); },
       {{40, 33, 67}, {67}},
       {{2, 3, 4}, {4}},
       {{[=] { ops::pow(z23, Tensor::zeros({3}, DType::i32)); }, {"pow", "'b'", "i32"}}}},
      {"arithmetic",
       "pow with constants",  // a product: a sum of the two cancels near x = -0.77, where f32's
                              // last-bit differences between the devices become 5e-5 relative
       [](const Inputs& in) { return ops::pow(in[0], 3.0) * ops::pow(2.0, in[0]); },
       {{100003}},
       {{5}}},
      {"arithmetic",
       "where",
       [=](const Inputs& in) {
         const bool large = in[0].size(0) == 40;
         return ops::where((large ? mask_large : mask_small).on(in[0].device()), in[0], in[1]);
       },
       {{40, 33, 67}, {67}},
       {{2, 3, 4}, {4}},
       {{[=] { ops::where(z23, z23, z23); }, {"where", "'cond'", "i32"}},
        {[=] { ops::where(Tensor::zeros({2}, DType::i32), z23, z23); },
         {"where", "'cond'", "(2,)", "axis -1"}}}},
      {"arithmetic",
       "where with a constant",
       [=](const Inputs& in) {
         const bool large = in[0].size(0) == 40;
         return ops::where((large ? mask_large : mask_small).on(in[0].device()), in[0], -2.0);
       },
       {{40, 33, 67}},
       {{2, 3, 4}}},
      {"arithmetic",
       "constants",
       [](const Inputs& in) { return 2.0 - in[0] * 3.0 + -in[0] / 4.0 + 1.0 / (in[0] * in[0] + 0.5); },
       {{100003}},
       {{5}},
       {{[] { -Tensor(); }, {"neg"}}}},
      // Pointwise functions, softmax along both axes of 2-D tensors and a middle axis, transpose.
      {"unary",
       "exp",
       [](const Inputs& in) { return ops::exp(in[0]); },
       {{100003}},
       {{4, 5}},
       {{[] { ops::sigmoid(Tensor::zeros({2}, DType::i32)); }, {"sigmoid", "i32 cpu (2,)"}}}},
      {"unary", "log", [](const Inputs& in) { return ops::log(in[0] * in[0] + 0.5); }, {{100003}}, {{4, 5}}},
  });
  add_rows({
      {"unary", "sigmoid", [](const Inputs& in) { return ops::sigmoid(in[0] * 1.5); }, {{100003}}, {{4, 5}}},
      {"unary", "tanh", [](const Inputs& in) { return ops::tanh(in[0] * 1.5); }, {{100003}}, {{4, 5}}},
      // Each function over its interesting range: both kinks of relu6, softplus's threshold from
      // both sides, negative bases for an integer exponent, both bounds of clamp. gelu's and silu's
      // derivatives cross 0 (near x = -0.75 and -1.28) as a difference of terms near 0.2: normwise.
      {"unary",
       "relu6",
       [](const Inputs& in) { return ops::relu6(in[0] * 4.0 + 3.0); },
       {{100003}},
       {{4, 5}},
       {{[] { ops::relu6(Tensor::zeros({2}, DType::i32)); }, {"relu6", "i32"}}}},
      {"unary",
       "gelu",
       [](const Inputs& in) { return ops::gelu(in[0] * 6.0); },
       {{100003}},
       {{4, 5}},
       {{[] { ops::gelu(Tensor::zeros({2}, DType::i32)); }, {"gelu", "i32"}}},
       true,
       true},
      {"unary",
       "gelu tanh",
       [](const Inputs& in) { return ops::gelu(in[0] * 6.0, ops::GeluApproximate::tanh); },
       {{100003}},
       {{4, 5}},
       {},
       true,
       true},
      {"unary",
       "silu",
       [](const Inputs& in) { return ops::silu(in[0] * 10.0); },
       {{100003}},
       {{4, 5}},
       {{[] { ops::silu(Tensor::zeros({2}, DType::i32)); }, {"silu", "i32"}}},
       true,
       true},
      {"unary",
       "softplus",
       [](const Inputs& in) { return ops::softplus(in[0] * 15.0, 1.5, 10.0); },
       {{100003}},
       {{4, 5}},
       {{[=] { ops::softplus(z23, 0.0); }, {"softplus", "beta = 0", "not 0"}},
        {[=] { ops::softplus(z23, INFINITY); }, {"softplus", "beta = inf", "finite"}},
        {[=] { ops::softplus(z23, 1.0, NAN); }, {"softplus", "threshold = nan"}}}},
      {"unary",
       "softplus, defaults",
       [](const Inputs& in) { return ops::softplus(in[0] * 30.0); },
       {{100003}},
       {{4, 5}}},
      {"unary",
       "sqrt",
       [](const Inputs& in) { return ops::sqrt(in[0] * in[0] + 0.01); },
       {{100003}},
       {{4, 5}},
       {{[] { ops::sqrt(Tensor::zeros({2}, DType::i32)); }, {"sqrt", "i32"}}}},
      {"unary",
       "pow 2.5",
       [](const Inputs& in) { return ops::pow(in[0] * in[0] + 0.5, 2.5); },
       {{100003}},
       {{4, 5}},
       {{[=] { ops::pow(z23, NAN); }, {"pow", "exponent = nan", "finite"}},
        {[=] { ops::pow(z23, -INFINITY); }, {"pow", "exponent = -inf"}}}},
  });
  add_rows({
      {"unary", "pow 3", [](const Inputs& in) { return ops::pow(in[0] * 2.0, 3.0); }, {{100003}}, {{4, 5}}},
      {"unary",
       "pow -1.5",
       [](const Inputs& in) { return ops::pow(in[0] * in[0] + 0.5, -1.5); },
       {{100003}},
       {{4, 5}}},
      {"unary",
       "clamp",
       [](const Inputs& in) { return ops::clamp(in[0], -0.5, 0.7); },
       {{100003}},
       {{4, 5}},
       {{[=] { ops::clamp(z23, std::nullopt, std::nullopt); }, {"clamp", "at least one of min and max"}},
        {[=] { ops::clamp(z23, NAN, 1.0); }, {"clamp", "min = nan", "must not be NaN"}},
        {[=] { ops::clamp(z23, 0.0, NAN); }, {"clamp", "max = nan"}}}},
      {"unary",
       "clamp min",
       [](const Inputs& in) { return ops::clamp(in[0], -0.5, std::nullopt); },
       {{100003}},
       {{4, 5}}},
      {"unary",
       "clamp max",
       [](const Inputs& in) { return ops::clamp(in[0], std::nullopt, 0.3); },
       {{100003}},
       {{4, 5}}},
      {"log_softmax",
       "softmax axis 1",
       [](const Inputs& in) { return ops::softmax(in[0] * 5.0, 1); },
       {{1000, 99}},
       {{3, 5}},
       {},
       true,
       true},
      {"log_softmax",
       "softmax axis 0",
       [](const Inputs& in) { return ops::softmax(in[0] * 5.0, 0); },
       {{1000, 99}},
       {{3, 5}},
       {},
       true,
       true},
      {"log_softmax",
       "log_softmax axis 1",
       [](const Inputs& in) { return ops::log_softmax(in[0] * 5.0, 1); },
       {{1000, 99}},
       {{3, 5}},
       {},
       true,
       true},
      {"log_softmax",
       "log_softmax axis 0",
       [](const Inputs& in) { return ops::log_softmax(in[0] * 5.0, 0); },
       {{1000, 99}},
       {{3, 5}},
       {},
       true,
       true},
      {"log_softmax",
       "softmax 3-D axis 1",
       [](const Inputs& in) { return ops::softmax(in[0] * 5.0, 1); },
       {{40, 300, 33}},
       {{2, 3, 4}},
       {},
       true,
       true},
  });
  add_rows({
      {"transpose",
       "transpose",
       [](const Inputs& in) { return ops::transpose(in[0]); },
       {{1000, 67}},
       {{3, 5}},
       {{[] {
           ops::transpose(Tensor::zeros({2, 3, 4}));
         },
         {"transpose", "(2, 3, 4)"}},
        {[] { ops::transpose(Tensor::zeros({3})); }, {"transpose", "(3,)"}}}},
      // Losses, whole and over the rows of an index with repeats.
      {"losses",
       "mse_loss",
       [](const Inputs& in) { return ops::mse_loss(in[0], in[1]); },
       {{1000, 33}, {1000, 33}},
       {{4, 3}, {4, 3}},
       {{[=] { ops::mse_loss(z32, z23); }, {"mse_loss", "target", "(2, 3)", "(3, 2)"}},
        {[=] { ops::mse_loss(z32, z32, Tensor::zeros({0}, DType::i32)); }, {"mse_loss", "index is empty"}}}},
      {"losses",
       "bce_with_logits",
       [](const Inputs& in) { return ops::binary_cross_entropy_with_logits(in[0] * 5.0, in[1]); },
       {{1000, 33}, {1000, 33}},
       {{4, 3}, {4, 3}},
       {{[=] { ops::binary_cross_entropy_with_logits(z32, z32, Tensor::from_vector<int32_t>({5}, {1})); },
         {"index 5", "length 3"}}}},
      {"losses",
       "masked mse_loss",
       [index_large](const Inputs& in) { return ops::mse_loss(in[0], in[1], index_large); },
       {{1000, 7}, {1000, 7}},
       {}},
      {"losses",
       "masked bce_with_logits small",
       [index_small](const Inputs& in) {
         return ops::binary_cross_entropy_with_logits(in[0], in[1], index_small);
       },
       {},
       {{4, 3}, {4, 3}}},
      {"activations",
       "a chain of ops as in a GAT layer",
       [key, index_small](const Inputs& in) {
         Tensor h = ops::concat({ops::leaky_relu(in[0], 0.2), ops::scale(in[1], 0.5)}, -1);
         h = ops::dropout(ops::elu(ops::add_bias(h, in[2])), key);
         return ops::mean(ops::sum(ops::index_rows(h, index_small), 1));
       },
       {{4, 100}, {4, 28}, {128}},
       {{4, 1}, {4, 3}, {4}}},
      {"log_softmax",
       "log_softmax",
       [](const Inputs& in) { return ops::log_softmax(in[0]); },
       {{700, 41}},
       {{3, 5}},
       {{[] { ops::log_softmax(Tensor::zeros({})); }, {"log_softmax", "at least one dimension"}},
        {[] {
           ops::log_softmax(Tensor::zeros({2, 3, 4}), 3);
         },
         {"log_softmax", "axis 3", "(2, 3, 4)"}},
        {[] {
           ops::softmax(Tensor::zeros({2, 3}), -3);
         },
         {"softmax", "axis -3", "(2, 3)"}},
        {[] {
           ops::softmax(Tensor::zeros({2, 3}, DType::i32));
         },
         {"softmax", "i32", "f32 or f64"}}},
       true,
       true},
      {"cross_entropy",
       "masked_cross_entropy",
       [labels_large, labels_small, ce_index_large, ce_index_small](const Inputs& in) {
         const bool large = in[0].size(0) == labels_large.host().numel();
         const Device d = in[0].device();
         return ops::masked_cross_entropy(in[0], (large ? labels_large : labels_small).on(d),
                                          (large ? ce_index_large : ce_index_small).on(d));
       },
       {{500, 5}},
       {{4, 3}},
       {{[=] {
           ops::masked_cross_entropy(z23, Tensor::zeros({3}, DType::i32), Tensor::zeros({1}, DType::i32));
         },
         {"masked_cross_entropy", "labels", "(3,)"}}},
       true,
       true},
      {"matmul",
       "matmul",
       [](const Inputs& in) { return ops::matmul(in[0], in[1]); },
       {{130, 70}, {70, 90}},
       {{3, 4}, {4, 2}},
       {{[=] { ops::matmul(z23, z23); }, {"matmul", "(2, 3)"}}},
       true,
       true},
      {"matmul",
       "matmul(x, x)",
       [](const Inputs& in) { return ops::matmul(in[0], in[0]); },
       {{64, 64}},
       {{3, 3}},
       {},
       true,
       true},
  });
  add_rows({
      {"sparse_matmul",
       "sparse_matmul",
       [sparse_large, sparse_small, sparse_with](const Inputs& in) {
         const OnDevice<CsrMatrix>& a =
             in[1].numel() == sparse_large.host().nnz() ? sparse_large : sparse_small;
         return ops::sparse_matmul(sparse_with(a, in[1]), in[0]);
       },
       {{300, 33}, {nnz_large}},
       {{14, 3}, {nnz_small}},
       {{[=] {
           ops::sparse_matmul(sparse_small.host(), Tensor::zeros({3, 2}, DType::f64));
         },
         {"sparse_matmul", "(3, 2)"}}},
       true,
       true},
      {"sparse_matmul",
       "sparse_dropout_matmul",
       [sparse_large, sparse_small, sparse_with, key](const Inputs& in) {
         const OnDevice<CsrMatrix>& a =
             in[1].numel() == sparse_large.host().nnz() ? sparse_large : sparse_small;
         return ops::sparse_dropout_matmul(sparse_with(a, in[1]), key, in[0]);
       },
       {{300, 33}, {nnz_large}},
       {{14, 3}, {nnz_small}},
       {{[=] {
           ops::sparse_dropout_matmul(sparse_small.host(), DropoutKey{1.5f, 0, 0},
                                      Tensor::zeros({14, 2}, DType::f64));
         },
         {"sparse_dropout_matmul", "1.5"}}},
       true,
       true},
      {"sparse_dropout",
       "sparse_dropout",
       [sparse_large, sparse_small, sparse_with, key](const Inputs& in) {
         const OnDevice<CsrMatrix>& a =
             in[0].numel() == sparse_large.host().nnz() ? sparse_large : sparse_small;
         return ops::sparse_dropout(sparse_with(a, in[0]), key).values();
       },
       {{nnz_large}},
       {{nnz_small}},
       {{[=] {
           ops::sparse_dropout(sparse_small.host(), DropoutKey{-0.5f, 0, 0});
         },
         {"sparse_dropout", "-0.5"}}},
       true,
       true},
      {"csr_softmax_aggregate",
       "csr_softmax_aggregate",
       [big, mixed, key](const Inputs& in) {
         const Graph& g = (in[0].size(0) == big.host().num_edges() ? big : mixed).on(in[0].device());
         return ops::csr_softmax_aggregate(g, in[0], in[1], key);
       },
       {{EB, 4}, {NB, 4, 16}},
       {{EM, 3}, {NM, 3, 5}},
       {{[=] {
           ops::csr_softmax_aggregate(mixed.host(), Tensor::zeros({EM + 1, 2}), Tensor::zeros({NM, 2, 3}));
         },
         {"csr_softmax_aggregate", "(" + std::to_string(EM + 1) + ", 2)", "one row per edge"}},
        {[=] {
           ops::csr_softmax_aggregate(mixed.host(), Tensor::zeros({EM, 2}), Tensor::zeros({NM, 3, 3}));
         },
         {"csr_softmax_aggregate", "(8, 3, 3)", "(" + std::to_string(EM) + ", 2)"}},
        {[=] {
           ops::csr_softmax_aggregate(mixed.host(), Tensor::zeros({EM, 2}), Tensor::zeros({NM - 1, 2, 3}));
         },
         {"(7, 2, 3)"}},
        {[=] {
           ops::csr_softmax_aggregate(mixed.host(), Tensor::zeros({EM, 2}),
                                      Tensor::zeros({NM, 2, 3}, DType::f64));
         },
         {"f64 cpu (8, 2, 3)"}},
        {[=] {
           ops::csr_softmax_aggregate(mixed.host(), Tensor::zeros({EM, 2}, DType::i32),
                                      Tensor::zeros({NM, 2, 3}));
         },
         {"i32"}},
        {[=] {
           ops::csr_softmax_aggregate(mixed.host(), Tensor::zeros({EM, 2}), Tensor::zeros({NM, 2, 3}),
                                      DropoutKey{1.0f, 0, 0});
         },
         {"dropout"}}},
       true,
       true},
      {"csr_softmax_aggregate",
       "gat_attention_aggregate",
       [big, mixed, key](const Inputs& in) {
         const Graph& g = (in[0].size(0) == big.host().num_nodes() ? big : mixed).on(in[0].device());
         return ops::gat_attention_aggregate(g, in[0], in[1], in[2], 0.2, key);
       },
       {{NB, 4}, {NB, 4}, {NB, 4, 16}},
       {{NM, 3}, {NM, 3}, {NM, 3, 5}},
       {{[=] {
           ops::gat_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2}), Tensor::zeros({NM, 3}),
                                        Tensor::zeros({NM, 2, 3}), 0.2);
         },
         {"gat_attention_aggregate", "(8, 3)"}},
        {[=] {
           ops::gat_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2}), Tensor::zeros({NM, 2}),
                                        Tensor::zeros({NM, 3, 3}), 0.2);
         },
         {"gat_attention_aggregate", "(8, 3, 3)"}},
        {[=] {
           ops::gat_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2}), Tensor::zeros({NM, 2}),
                                        Tensor::zeros({NM, 2, 3}, DType::f64), 0.2);
         },
         {"gat_attention_aggregate", "f64"}},
        {[=] {
           ops::gat_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2}), Tensor::zeros({NM, 2}),
                                        Tensor::zeros({NM, 2, 3}), 0.2, DropoutKey{1.0f, 0, 0});
         },
         {"gat_attention_aggregate", "dropout"}}},
       true,
       true},
      // GAT's attention over x W (gat_linear_attention, the kernels of linear_head_dot.h): x, W,
      // att_src, att_dst; the large row's shapes take the fused CUDA forward (x needs a gradient
      // here, so the backward is the composed one: test_graph_ops' CudaGatLinearAttention has the fused one).
      {"linear_head_dot",
       "gat_linear_attention",
       [big, mixed, key](const Inputs& in) {
         const Graph& g = (in[0].size(0) == big.host().num_nodes() ? big : mixed).on(in[0].device());
         return ops::gat_linear_attention(g, in[0], in[1], in[2], in[3], 0.2, key, DropoutKey{0.25f, 7, 9});
       },
       {{NB, 16}, {16, 32}, {4, 8}, {4, 8}},
       {{NM, 4}, {4, 6}, {2, 3}, {2, 3}},
       {{[=] {
           ops::gat_linear_attention(mixed.host(), Tensor::zeros({NM, 4}), Tensor::zeros({4, 5}), z23, z23,
                                     0.2);
         },
         {"gat_linear_attention", "'weight' f32 cpu (4, 5)", "(K, H F) = (4, 6)"}},
        {[=] {
           ops::gat_linear_attention(mixed.host(), Tensor::zeros({NM - 1, 4}), Tensor::zeros({4, 6}), z23,
                                     z23, 0.2);
         },
         {"gat_linear_attention", "'x' f32 cpu (7, 4)", "a row per node"}}},
       true,
       true},
      // GATv2: xl, xr (N, H, F), att (H, F), and an edge term (E, H, F) in the second row.
      {"gatv2_attention_aggregate",
       "gatv2_attention_aggregate",
       [big, mixed, key](const Inputs& in) {
         const Graph& g = (in[0].size(0) == big.host().num_nodes() ? big : mixed).on(in[0].device());
         return ops::gatv2_attention_aggregate(g, in[0], in[1], in[2], 0.2, key);
       },
       {{NB, 4, 16}, {NB, 4, 16}, {4, 16}},
       {{NM, 3, 5}, {NM, 3, 5}, {3, 5}},
       {{[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2, 3}), Tensor::zeros({NM, 2, 4}),
                                          Tensor::zeros({2, 3}), 0.2);
         },
         {"gatv2_attention_aggregate", "'xr' f32 cpu (8, 2, 4)", "Nd = 8"}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM - 1, 2, 3}),
                                          Tensor::zeros({NM, 2, 3}), Tensor::zeros({2, 3}), 0.2);
         },
         {"gatv2_attention_aggregate", "'xl' f32 cpu (7, 2, 3)", "Ns = 8"}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2, 3}), Tensor::zeros({NM, 2, 3}),
                                          Tensor::zeros({3, 2}), 0.2);
         },
         {"gatv2_attention_aggregate", "'att' f32 cpu (3, 2)", "(H, F)"}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 6}), Tensor::zeros({NM, 6}),
                                          Tensor::zeros({2, 3}), 0.2);
         },
         {"gatv2_attention_aggregate", "'xl'", "3 dimensions"}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2, 3}),
                                          Tensor::zeros({NM, 2, 3}, DType::f64), Tensor::zeros({2, 3}), 0.2);
         },
         {"gatv2_attention_aggregate", "f64"}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2, 3}, DType::i32),
                                          Tensor::zeros({NM, 2, 3}, DType::i32),
                                          Tensor::zeros({2, 3}, DType::i32), 0.2);
         },
         {"gatv2_attention_aggregate", "i32"}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2, 3}), Tensor::zeros({NM, 2, 3}),
                                          Tensor::zeros({2, 3}), INFINITY);
         },
         {"gatv2_attention_aggregate", "negative_slope", "not finite"}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2, 3}), Tensor::zeros({NM, 2, 3}),
                                          Tensor::zeros({2, 3}), 0.2, DropoutKey{-0.5f, 0, 0});
         },
         {"gatv2_attention_aggregate", "dropout", "outside [0, 1)"}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2, 3}), Tensor::zeros({NM, 2, 3}),
                                          Tensor::zeros({2, 3}), 0.2, {}, Tensor::zeros({EM + 1, 2, 3}));
         },
         {"gatv2_attention_aggregate", "'edge_term' f32 cpu (" + std::to_string(EM + 1) + ", 2, 3)",
          "E = " + std::to_string(EM)}},
        {[=] {
           ops::gatv2_attention_aggregate(mixed.host(), Tensor::zeros({NM, 2, 3}), Tensor::zeros({NM, 2, 3}),
                                          Tensor::zeros({2, 3}), 0.2, {},
                                          Tensor::zeros({EM, 2, 3}, DType::f64));
         },
         {"gatv2_attention_aggregate", "'edge_term'", "f64"}}},
       true,
       true},
      {"gatv2_attention_aggregate",
       "gatv2_attention_aggregate edge_term",
       [big, mixed, key](const Inputs& in) {
         const Graph& g = (in[0].size(0) == big.host().num_nodes() ? big : mixed).on(in[0].device());
         return ops::gatv2_attention_aggregate(g, in[0], in[1], in[2], 0.2, key, in[3]);
       },
       {{NB, 4, 16}, {NB, 4, 16}, {4, 16}, {EB, 4, 16}},
       {{NM, 2, 3}, {NM, 2, 3}, {2, 3}, {EM, 2, 3}},
       {},
       true,
       true},
      {"gatv2_attention_aggregate",
       "gatv2_edge_scores",
       [big, mixed](const Inputs& in) {
         const Graph& g = (in[0].size(0) == big.host().num_nodes() ? big : mixed).on(in[0].device());
         return ops::gatv2_edge_scores(g, in[0], in[1], in[2], 0.2, in[3]);
       },
       {{NB, 4, 16}, {NB, 4, 16}, {4, 16}, {EB, 4, 16}},
       {},
       {{[=] {
           ops::gatv2_edge_scores(mixed.host(), Tensor::zeros({NM, 2, 3}), Tensor::zeros({NM, 2, 3}),
                                  Tensor::zeros({2, 4}), 0.2);
         },
         {"gatv2_edge_scores", "'att' f32 cpu (2, 4)"}}},
       false,
       true},
      {"csr_softmax_aggregate",
       "csr_softmax",
       [big, mixed](const Inputs& in) {
         return ops::csr_softmax((in[0].size(0) == big.host().num_edges() ? big : mixed).on(in[0].device()),
                                 in[0]);
       },
       {{EB, 3}},
       {},
       {{[=] {
           ops::csr_softmax(mixed.host(), Tensor::zeros({EM - 1, 2}));
         },
         {"csr_softmax", "one row per edge"}}},
       false,
       true},
  });
  add_rows({
      {"gat_edge_scores",
       "gat_edge_scores",
       [big, mixed](const Inputs& in) {
         const Graph& g = (in[0].size(0) == big.host().num_nodes() ? big : mixed).on(in[0].device());
         return ops::gat_edge_scores(g, in[0], in[1], 0.2);
       },
       {{NB, 4}, {NB, 4}},
       {{NM, 3}, {NM, 3}},
       {{[=] {
           ops::gat_edge_scores(mixed.host(), Tensor::zeros({NM, 2}), Tensor::zeros({NM, 3}), 0.2);
         },
         {"gat_edge_scores", "(8, 3)"}},
        {[=] {
           ops::gat_edge_scores(mixed.host(), Tensor::zeros({NM + 1, 2}), Tensor::zeros({NM + 1, 2}), 0.2);
         },
         {"gat_edge_scores", "(9, 2)", "Ns = 8 sources"}},
        {[=] {
           ops::gat_edge_scores(mixed.host(), Tensor::zeros({NM, 2}), Tensor::zeros({NM, 2}, DType::f64),
                                0.2);
         },
         {"gat_edge_scores", "f64"}}},
       true,
       true},
      self_loop_row(
          "mean", {{[=] {
                      ops::self_loop_attr(mixed.host(), mixed_looped.host(), Tensor::zeros({EM - 1, 2}), {});
                    },
                    {"self_loop_attr", "one row per edge of the graph"}},
                   {[=] {
                      ops::self_loop_attr(mixed.host(), mixed.host(), Tensor::zeros({EM, 2}), {});
                    },
                    {"self_loop_attr", "is not graph.with_self_loops()"}}}),
      self_loop_row("add"),
      self_loop_row("min"),
      self_loop_row("max"),
      self_loop_row("mul"),
      self_loop_row("-0.5"),
      {"head_dot",
       "head_dot",
       [](const Inputs& in) { return ops::head_dot(in[0], in[1]); },
       {{3000, 8, 8}, {8, 8}},
       {{5, 3, 4}, {3, 4}},
       {{[] {
           ops::head_dot(Tensor::zeros({4, 2, 3}), Tensor::zeros({3, 2}));
         },
         {"head_dot", "(3, 2)", "(2, 3)"}},
        {[] {
           ops::head_dot(Tensor::zeros({4, 6}), Tensor::zeros({2, 3}));
         },
         {"head_dot", "(4, 6)"}}},
       true,
       true},
      {"head_mean",
       "head_mean",
       [](const Inputs& in) { return ops::head_mean(in[0], in[1]); },
       {{3000, 8, 7}, {7}},
       {{5, 3, 4}, {4}},
       {{[] {
           ops::head_mean(Tensor::zeros({4, 2, 3}), Tensor::zeros({2}));
         },
         {"head_mean", "bias", "(2,)", "(3,)"}},
        {[] {
           ops::head_mean(Tensor::zeros({4, 6}));
         },
         {"head_mean", "(4, 6)"}},
        {[] {
           ops::head_mean(Tensor::zeros({4, 0, 3}));
         },
         {"head_mean", "no heads"}}}},
      {"head_mean",
       "head_mean, one head, no bias",
       [](const Inputs& in) { return ops::head_mean(in[0]); },
       {{3000, 1, 7}},
       {{5, 1, 4}}},
  });
  add_rows({
      {"head_mean",
       "head_mean, 20 heads",
       [](const Inputs& in) { return ops::head_mean(in[0], in[1]); },
       {{300, 20, 33}, {33}},
       {{2, 20, 3}, {3}}},
      // Not differentiable: in-place helpers and integer results.
      {"fill",
       "fill_",
       [](const Inputs& in) {
         Tensor t = in[0].clone();
         ops::fill_(t, -0.75);
         return t;
       },
       {{100003}},
       {},
       {{[] {
           Tensor undefined;
           ops::fill_(undefined, 1.0);
         },
         {"fill_"}}},
       false},
      {"add_into",
       "add_into",
       [](const Inputs& in) {
         Tensor t = in[0].clone();
         ops::add_into(t, in[1]);
         return t;
       },
       {{513, 67}, {513, 67}},
       {},
       {{[=] {
           Tensor t = z23.clone();
           ops::add_into(t, z32);
         },
         {"add_into", "(3, 2)"}}},
       false},
      {"accuracy",
       "argmax",
       [](const Inputs& in) { return ops::argmax(in[0]); },
       {{700, 41}},
       {},
       {{[] { ops::argmax(Tensor::zeros({3})); }, {"argmax", "(3,)"}}},
       false},
      {"accuracy",
       "correct_counts",
       [labels_large](const Inputs& in) {
         const Tensor& labels = labels_large.on(in[0].device());
         return ops::correct_counts(in[0], labels, repeating_index(300, 500).to(in[0].device()));
       },
       {{500, 5}},
       {},
       {{[] {
           ops::accuracy(Tensor::zeros({3, 2}), Tensor::zeros({3}, DType::i32),
                         Tensor::from_vector<int32_t>({4}, {1}));
         },
         {"accuracy", "index[0] = 4"}}},
       false},
      {"micro_f1",
       "micro_f1_counts",
       [](const Inputs& in) { return ops::micro_f1_counts(in[0], zero_one(in[1])); },
       {{700, 121}, {700, 121}},
       {},
       {{[=] { ops::micro_f1_counts(z32, z23); }, {"micro_f1", "labels", "(3, 2)", "(2, 3)"}},
        {[=] {
           ops::micro_f1_counts(z32, Tensor::zeros({3, 2}, DType::f64));
         },
         {"micro_f1", "labels"}},
        {[] {
           ops::micro_f1_counts(Tensor::zeros({0, 2}), Tensor::zeros({0, 2}));
         },
         {"micro_f1", "no rows"}},
        {[] {
           ops::micro_f1(Tensor::zeros({1, 2}), Tensor::from_vector<float>({0, 2}, {1, 2}));
         },
         {"micro_f1", "labels[0, 1] = 2", "neither 0 nor 1"}}},
       false},
      {"classification_metrics",
       "classification_metrics",
       [labels_large, ce_index_large](const Inputs& in) {
         const Device d = in[0].device();
         return ops::classification_metrics(in[0], labels_large.on(d),
                                            {ce_index_large.on(d), repeating_index(300, 500).to(d)});
       },
       {{500, 5}},
       {},
       {{[=] {
           ops::classification_metrics(z32, Tensor::zeros({3}, DType::i32), {Tensor::zeros({0}, DType::i32)});
         },
         {"classification_metrics", "splits[0]", "empty"}},
        {[=] { ops::classification_metrics(z32, Tensor::zeros({3}, DType::i32), {}); },
         {"classification_metrics", "0 splits"}},
        {[=] {
           Tensor out = Tensor::zeros({2, 3}, DType::f64);
           ops::classification_metrics(z32, Tensor::zeros({3}, DType::i32), {Tensor::zeros({1}, DType::i32)},
                                       out);
         },
         {"classification_metrics", "'out'", "(1, 3)", "(2, 3)"}},
        {[=] {
           ops::classification_metrics(z32, Tensor::zeros({2}, DType::i32), {Tensor::zeros({1}, DType::i32)});
         },
         {"classification_metrics", "labels", "(3,)"}}},
       false},
      sample_row("sample_neighbors", {5, false, 3, 8},
                 {{[=] { ops::sample_neighbors(big.host().row_ptr(), big.host().edge_src(), z23, {}); },
                   {"sample_neighbors", "dst_nodes", "i32"}},
                  {[=] {
                     ops::sample_neighbors(big.host().row_ptr(), big.host().edge_src(), sample_seeds.host(),
                                           {-2, false, 0, 0});
                   },
                   {"sample_neighbors", "fanout -2"}}}),
      sample_row("sample_neighbors with replacement", {3, true, 3, 9}),
      sample_row("sample_neighbors all in-edges", {-1, false, 3, 10}),
  });
  add_rows({
      block_row(
          "block_graph", false,
          {{[=] { ops::block_graph(Tensor::zeros({3}, DType::i32), Tensor::zeros({0}, DType::i32), 1); },
            {"block_graph", "1 sources for 2 destinations"}},
           {[=] { ops::block_graph(Tensor::zeros({2}), Tensor::zeros({0}, DType::i32), 1); },
            {"block_graph", "row_ptr", "i32"}},
           {[=] { ops::block_graph(Tensor::zeros({0}, DType::i32), Tensor::zeros({0}, DType::i32), 1); },
            {"block_graph", "row_ptr is empty"}}}),
      block_row("block_graph of a graph with a self loop and empty rows", true),
  });
  return cases;
}

// Forward output and the gradient of every input for the upstream gradient g.
struct OpRun {
  Tensor out;
  std::vector<Tensor> grads;
};

OpRun run_op(const OpCase& c, const Inputs& inputs, Device device, const Tensor& g_host) {
  Inputs leaves;
  for (const Tensor& t : inputs) {
    Tensor leaf = t.to(device).detach();
    if (c.differentiable) leaf.set_requires_grad(true);
    leaves.push_back(leaf);
  }
  OpRun r;
  r.out = c.f(leaves);
  if (!c.differentiable) return r;
  r.out.backward(g_host.to(device));
  for (const Tensor& t : leaves) r.grads.push_back(t.grad());
  return r;
}

Inputs random_inputs(const std::vector<Shape>& shapes, std::mt19937_64& rng, DType dtype,
                     Device device = Device::cpu) {
  Inputs inputs;
  for (const Shape& s : shapes) inputs.push_back(random_tensor(s, rng, -1.0, 1.0, dtype, device));
  return inputs;
}

// |cpu - cuda| <= tol max(|cpu|, |cuda|, 1e-6) for every element.
void expect_close_elementwise(const std::string& what, const Tensor& cpu, const Tensor& cuda, double tol) {
  ASSERT_EQ(cpu.shape(), cuda.shape()) << what;
  const std::vector<double> a = host_f64(cpu), b = host_f64(cuda);
  double worst = 0.0;
  size_t where = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(a[i] - b[i]) / std::max({std::abs(a[i]), std::abs(b[i]), 1e-6});
    if (!(err <= worst)) {
      worst = std::isnan(err) ? INFINITY : err;
      where = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": element " << where << " cpu " << a[where] << " cuda " << b[where];
}

void expect_same_result(const OpCase& c, const std::string& what, const Tensor& cpu, const Tensor& cuda,
                        double tol) {
  ASSERT_EQ(cuda.device(), Device::cuda) << what;
  if (cpu.dtype() == DType::i32)
    EXPECT_TRUE(bitwise_equal(cpu, cuda)) << what;
  else if (c.normwise)
    expect_close(cuda, cpu, what, tol);
  else
    expect_close_elementwise(what, cpu, cuda, tol);
}

}  // namespace

TEST(BackendOps, CudaMatchesTheCpuForwardAndBackward) {
  GAT_SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-10;
    for (const OpCase& c : op_cases()) {
      if (c.large.empty()) continue;
      SCOPED_TRACE(c.name + " " + dtype_name(dtype));
      std::mt19937_64 rng(17);
      const Inputs inputs = random_inputs(c.large, rng, dtype);
      const Tensor probe = c.f(inputs);  // the output's shape, for the upstream gradient
      const Tensor g = random_tensor(probe.shape(), rng, -1.0, 1.0, dtype);
      const OpRun cpu = run_op(c, inputs, Device::cpu, g), gpu = run_op(c, inputs, Device::cuda, g);
      expect_same_result(c, c.name + " forward", cpu.out, gpu.out, tol);
      for (size_t i = 0; i < cpu.grads.size(); ++i)
        expect_same_result(c, c.name + " grad of input " + std::to_string(i), cpu.grads[i], gpu.grads[i],
                           tol);
    }
  }
}

TEST(BackendOps, CudaResultsAreBitwiseIdenticalAcrossRuns) {
  GAT_SKIP_WITHOUT_CUDA();
  for (const OpCase& c : op_cases()) {
    if (c.large.empty()) continue;
    SCOPED_TRACE(c.name);
    std::mt19937_64 rng(5);
    const Inputs inputs = random_inputs(c.large, rng, DType::f32);
    const Tensor g = random_tensor(c.f(inputs).shape(), rng, -1.0, 1.0, DType::f32);
    const OpRun first = run_op(c, inputs, Device::cuda, g), second = run_op(c, inputs, Device::cuda, g);
    EXPECT_TRUE(bitwise_equal(first.out, second.out));
    for (size_t i = 0; i < first.grads.size(); ++i)
      EXPECT_TRUE(bitwise_equal(first.grads[i], second.grads[i])) << "grad of input " << i;
  }
}

TEST(BackendOps, GradientsMatchFiniteDifferencesOnTheCpu) {
  for (const OpCase& c : op_cases()) {
    if (c.small.empty() || !c.differentiable) continue;
    std::mt19937_64 rng(99);
    expect_gradients_match(c.name, c.f, random_inputs(c.small, rng, DType::f64));
  }
}

TEST(BackendOps, GradientsMatchFiniteDifferencesOnCuda) {
  GAT_SKIP_WITHOUT_CUDA();
  for (const OpCase& c : op_cases()) {
    if (c.small.empty() || !c.differentiable) continue;
    std::mt19937_64 rng(99);
    expect_gradients_match(c.name + " (cuda)", c.f, random_inputs(c.small, rng, DType::f64, Device::cuda));
  }
}

// Every row on graphs of i64 offsets (wide_offsets) gives the bits of the same row on the same
// graphs with i32 offsets, forward and every gradient, in f32 and f64. sample_neighbors and
// block_graph take row pointers, not a Graph: NeighborSampler narrows a wide graph's once
// (test_neighbor_sampler.cpp). CUDA refuses wide graphs (Graph.WideGraphsStayOnTheHost).
TEST(BackendOps, WideOffsetsGiveTheBitsOfNarrowOnesOnTheCpu) {
  const std::vector<OpCase> narrow = op_cases(), wide = op_cases(true);
  ASSERT_EQ(narrow.size(), wide.size());
  for (DType dtype : {DType::f32, DType::f64}) {
    for (size_t k = 0; k < narrow.size(); ++k) {
      const OpCase &n = narrow[k], &w = wide[k];
      if (n.large.empty() || n.header == "sample_neighbors" || n.header == "block_graph") continue;
      SCOPED_TRACE(n.name + " " + dtype_name(dtype));
      std::mt19937_64 rng(31);
      const Inputs inputs = random_inputs(n.large, rng, dtype);
      const Tensor g = random_tensor(n.f(inputs).shape(), rng, -1.0, 1.0, dtype);
      const OpRun a = run_op(n, inputs, Device::cpu, g), b = run_op(w, inputs, Device::cpu, g);
      EXPECT_TRUE(bitwise_equal(a.out, b.out)) << "forward";
      ASSERT_EQ(a.grads.size(), b.grads.size());
      for (size_t i = 0; i < a.grads.size(); ++i)
        EXPECT_TRUE(bitwise_equal(a.grads[i], b.grads[i])) << "grad of input " << i;
    }
  }
}

TEST(BackendOps, BadArgumentsRaiseAnErrorNamingTheOpAndTheProblem) {
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.name);
    for (const ErrorCase& e : c.errors) expect_error(e.call, e.parts);
  }
}

TEST(BackendOps, EveryOpHasARowWithAnErrorCase) {
  std::set<std::string> with_errors, listed;
  for (const OpCase& c : op_cases()) {
    listed.insert(c.header);
    if (!c.errors.empty()) with_errors.insert(c.header);
  }
  // Every header below framework/ops/ (the attention ops' folder too) but the detail/ folders'
  // and these two, which are the op pattern's helpers, not ops.
  const std::set<std::string> helpers = {"dispatch", "kernel"};
  const std::filesystem::path ops_dir = std::filesystem::path(GAT_SOURCE_DIR) / "framework" / "ops";
  int headers = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(ops_dir);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && it->path().filename() == "detail") {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().extension() != ".h") continue;
    const std::string op = it->path().stem().string();
    if (helpers.count(op)) continue;
    ++headers;
    const std::string where = std::filesystem::relative(it->path(), GAT_SOURCE_DIR).string();
    EXPECT_TRUE(listed.count(op)) << where << " has no row in op_cases()";
    EXPECT_TRUE(with_errors.count(op)) << where << " has no error case";
  }
  EXPECT_GE(headers, 32);  // 26 in framework/ops/, 6 in framework/ops/attention/
}
