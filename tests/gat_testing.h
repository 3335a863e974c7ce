// Helpers shared by the tests: tests run on each device (DeviceTest) or comparing CUDA with the CPU
// (CudaVsCpuTest), comparisons (rel_error, expect_close, bitwise_equal), expected
// errors (expect_error), an environment variable for a scope (ScopedEnv), a temporary folder (TempDir),
// skipping without a device (GAT_SKIP_WITHOUT_CUDA), test graphs (mixed_graph, random_graph, small_graph), a
// small training dataset (small_training_dataset), sparse-looking features (sparse_random) and the GAT
// layer's gradient-check plumbing. Gradient checks themselves are in gradcheck.h.
#pragma once

#include <gtest/gtest.h>
#if GAT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gat/datasets/generator.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/graph.h"
#include "gat/framework/tensor.h"
#include "gat/layers/gat_conv.h"
#include "gat/models/gat.h"
#include "gradcheck.h"

// Skips the current test, with the reason, where no CUDA device can be used.
#define GAT_SKIP_WITHOUT_CUDA() \
  if (!::gat::cuda::available()) GTEST_SKIP() << "no CUDA device: " << ::gat::cuda::unavailable_reason()

namespace gat::testing {

// ---- tests per device ----

// A test written once against device() and run on each device, as PyTorch's
// instantiate_device_type_tests:
//
//   class CsrSoftmaxAggregateOnDevice : public DeviceTest {};
//   TEST_P(CsrSoftmaxAggregateOnDevice, Gradients) { ... random_tensor(shape, rng, -1, 1, DType::f64,
//   device()) ... } GAT_INSTANTIATE_DEVICE_TESTS(CsrSoftmaxAggregateOnDevice);
//
// The instances are Suite.Test/cpu and Suite.Test/cuda (--gtest_filter='*/cuda' runs the CUDA
// ones); the CUDA one skips, with the reason, where no device can be used. tests/CMakeLists.txt
// labels a program that instantiates such a suite "cuda".
class DeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (device() == Device::cuda) {
      GAT_SKIP_WITHOUT_CUDA();
    }
  }
  Device device() const { return GetParam(); }
  // Uniform in [lo, hi), f64 on device(): a gradient check's input.
  Tensor random_f64(const Shape& shape, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) const {
    return random_tensor(shape, rng, lo, hi, DType::f64, device());
  }
};

#define GAT_INSTANTIATE_DEVICE_TESTS(Suite)                                                     \
  INSTANTIATE_TEST_SUITE_P(, Suite, ::testing::Values(::gat::Device::cpu, ::gat::Device::cuda), \
                           [](const ::testing::TestParamInfo<::gat::Device>& info) {            \
                             return std::string(::gat::device_name(info.param));                \
                           })

// No CUDA error is left on this thread after `what`: the next launch check (CUDA_CHECK_LAUNCH reads
// cudaGetLastError) would report it as its own launch's failure. Nothing to check without CUDA.
inline void expect_no_cuda_error_left(const std::string& what) {
#if GAT_WITH_CUDA
  const cudaError_t left = cudaPeekAtLastError();
  EXPECT_EQ(left, cudaSuccess) << cudaGetErrorName(left) << " is left after " << what;
#else
  (void)what;
#endif
}

// A test that compares the CUDA backend with the CPU reference on the same inputs (the point of
// testing CUDA); it skips, with the reason, where no device can be used. A file names its suites
// after it: `using CudaSparse = CudaVsCpuTest;` then TEST_F(CudaSparse, ...).
class CudaVsCpuTest : public ::testing::Test {
 protected:
  void SetUp() override { GAT_SKIP_WITHOUT_CUDA(); }
};

// A fresh folder under the system's temporary directory (mkdtemp: PREFIX_XXXXXX), removed with
// everything in it at the end of the scope.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "gat_test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr) << "mkdtemp " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// An environment variable set to `value` (unset when nullopt) for the scope's life; its old value,
// or its absence, comes back at the end, so a test cannot leak it to the tests that follow (or
// lose one that the run was started with, such as GAT_GRADCHECK_SAMPLE).
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  std::string name_;
  std::optional<std::string> old_;
};

// ---- comparisons ----

// The worst difference of got from want: max_k |got_k - want_k| / max_k |want_k| (the absolute
// difference when want is all zeros), and the element k where it is. Equal values match, equal
// infinities included (the log-sum-exp of an empty row); a NaN or an infinity anywhere else is an
// infinite error.
struct Difference {
  double error = 0;
  size_t at = 0;
};
inline Difference difference(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double scale = 0, worst = 0;
  Difference d;
  for (size_t k = 0; k < want.size() && k < got.size(); ++k) {
    if (std::isfinite(want[k])) scale = std::max(scale, std::abs(want[k]));
    if (got[k] == want[k]) continue;
    const double diff =
        std::isfinite(got[k]) && std::isfinite(want[k]) ? std::abs(got[k] - want[k]) : INFINITY;
    if (diff > worst) worst = diff, d.at = k;
  }
  d.error = scale > 0 ? worst / scale : worst;
  return d;
}

// A tensor's elements on the host as f64 (any device, any dtype).
inline std::vector<double> host_f64(const Tensor& t) {
  return t.to(Device::cpu).to(DType::f64).to_vector<double>();
}

inline double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  return difference(got, want).error;
}
inline double rel_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  return rel_error(host_f64(got), host_f64(want));
}

// rel_error(got, want) <= tol, reporting the worst element.
inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what, double tol) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = host_f64(got), w = host_f64(want);
  const Difference d = difference(g, w);
  EXPECT_LE(d.error, tol) << what << ": element " << d.at << " got " << (g.empty() ? 0 : g[d.at]) << " want "
                          << (w.empty() ? 0 : w[d.at]);
}

// |got_k - want_k| <= tol * max(1, |want_k|) for every element k, reporting each that is not.
inline void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                            const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

// The same shape, dtype and bytes (any devices).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ha = a.to(Device::cpu), hb = b.to(Device::cpu);
  return ha.nbytes() == 0 ||
         std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;  // empty: no data pointer
}

// The first array or count in which two graphs differ (any devices), or "" when every one is the
// same, bit for bit.
inline std::string graph_difference(const Graph& a, const Graph& b) {
  const std::vector<std::pair<const char*, std::pair<int64_t, int64_t>>> counts = {
      {"num_src_nodes", {a.num_src_nodes(), b.num_src_nodes()}},
      {"num_dst_nodes", {a.num_dst_nodes(), b.num_dst_nodes()}},
      {"max_in_degree", {a.max_in_degree(), b.max_in_degree()}},
      {"max_out_degree", {a.max_out_degree(), b.max_out_degree()}},
      {"chunk_edges", {a.chunk_edges(), b.chunk_edges()}},
      {"num_row_chunks", {a.num_row_chunks(), b.num_row_chunks()}},
      {"num_t_row_chunks", {a.num_t_row_chunks(), b.num_t_row_chunks()}},
      {"count_self_loops", {a.count_self_loops(), b.count_self_loops()}},
      {"one_self_loop_per_node", {a.one_self_loop_per_node(), b.one_self_loop_per_node()}}};
  for (const auto& [name, values] : counts)
    if (values.first != values.second)
      return std::string(name) + " " + std::to_string(values.first) + " against " +
             std::to_string(values.second);
  const std::vector<std::pair<const char*, std::pair<const Tensor*, const Tensor*>>> arrays = {
      {"row_ptr", {&a.row_ptr(), &b.row_ptr()}},
      {"edge_src", {&a.edge_src(), &b.edge_src()}},
      {"edge_dst", {&a.edge_dst(), &b.edge_dst()}},
      {"t_row_ptr", {&a.t_row_ptr(), &b.t_row_ptr()}},
      {"t_edge_dst", {&a.t_edge_dst(), &b.t_edge_dst()}},
      {"t_edge_id", {&a.t_edge_id(), &b.t_edge_id()}},
      {"row_chunk_ptr", {&a.row_chunk_ptr(), &b.row_chunk_ptr()}},
      {"t_row_chunk_ptr", {&a.t_row_chunk_ptr(), &b.t_row_chunk_ptr()}},
      {"row_chunk_row", {&a.row_chunk_row(), &b.row_chunk_row()}},
      {"t_row_chunk_row", {&a.t_row_chunk_row(), &b.t_row_chunk_row()}},
      {"row_order", {&a.row_order(), &b.row_order()}},
      {"t_row_order", {&a.t_row_order(), &b.t_row_order()}}};
  for (const auto& [name, pair] : arrays)
    if (!bitwise_equal(*pair.first, *pair.second)) return name;
  return "";
}

// f() throws a gat::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a gat::Error mentioning '" << (parts.empty() ? "" : parts.front()) << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

// ---- test inputs ----

// An f64 tensor of `values` on the CPU.
inline Tensor f64(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape);
}

// 8 nodes, 13 edges: 0, 6 and 7 have no incoming edge, 1 has one, 2 has six, 4 has a self loop;
// 7 has no edge at all.
// The same graph with i64 offsets (Graph::offset_dtype): every array's values kept.
inline Graph with_wide_offsets(const Graph& g) {
  const std::vector<int32_t> rp = g.row_ptr().to(Device::cpu).to_vector<int32_t>();
  return Graph::from_wide_csr(g.num_src_nodes(), std::vector<int64_t>(rp.begin(), rp.end()), g.sources());
}

inline Graph mixed_graph(const GraphBuildOptions& options = {}) {
  return Graph::from_edges(8, {3, 0, 1, 3, 4, 5, 6, 2, 6, 4, 0, 1, 2},
                           {1, 2, 2, 2, 2, 2, 2, 3, 3, 4, 4, 5, 5}, options);
}

// N nodes, E random edges into the last 3/4 of the nodes (the first N/4 receive nothing). With
// hub > 0, node 0 also receives from `hub` distinct sources and node 1 sends to up to `hub`
// distinct destinations: a long row and a long transposed row, cut into chunks on the device.
inline Graph random_graph(int32_t N, int64_t E, int32_t hub, std::mt19937_64& rng,
                          const GraphBuildOptions& options = {}) {
  std::uniform_int_distribution<int32_t> any(0, N - 1), receiver(N / 4, N - 1);
  std::vector<int32_t> src, dst;
  for (int64_t k = 0; k < E; ++k) src.push_back(any(rng)), dst.push_back(receiver(rng));
  for (int32_t j = 1; j <= hub; ++j) src.push_back(j % N), dst.push_back(0);
  for (int32_t j = N / 4; j < std::min(N, N / 4 + hub); ++j) src.push_back(1), dst.push_back(j);
  return Graph::from_edges(N, src, dst, options);
}

// N nodes, E uniform random edges, and `hubs` long rows each way: node h * (N / hubs) receives
// from and sends to degree + 16 h others. With E < 32,768 the device cuts every row of more than
// 8 edges into chunks: many rows' chunks in one launch, of rows of different lengths.
inline Graph hubs_graph(int32_t N, int64_t E, int32_t hubs, int32_t degree, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> any(0, N - 1);
  std::vector<int32_t> src, dst;
  for (int64_t k = 0; k < E; ++k) src.push_back(any(rng)), dst.push_back(any(rng));
  for (int32_t h = 0; h < hubs; ++h) {
    const int32_t node = h * (N / hubs);
    for (int32_t j = 1; j <= degree + 16 * h; ++j) {
      src.push_back((node + j) % N), dst.push_back(node);
      src.push_back(node), dst.push_back((node + 3 * j) % N);
    }
  }
  return Graph::from_edges(N, src, dst);
}

// A bipartite graph of Ns sources and Nd destinations (both >= 4): E random edges from the first
// 3/4 of the sources into the first 3/4 of the destinations, so the last Ns/4 sources send
// nothing and the last Nd/4 destinations receive nothing (nor get a self loop when Nd > Ns).
// With hub > 0, destination 0 also receives from up to `hub` distinct sources and source 0 sends
// to up to `hub` distinct destinations: a long row and a long transposed row, cut into chunks on
// the device.
inline Graph random_bipartite_graph(int32_t Ns, int32_t Nd, int64_t E, int32_t hub, std::mt19937_64& rng) {
  const int32_t senders = Ns - Ns / 4, receivers = Nd - Nd / 4;
  std::uniform_int_distribution<int32_t> sender(0, senders - 1), receiver(0, receivers - 1);
  std::vector<int32_t> src, dst;
  for (int64_t k = 0; k < E; ++k) src.push_back(sender(rng)), dst.push_back(receiver(rng));
  for (int32_t j = 0; j < std::min(senders, hub); ++j) src.push_back(j), dst.push_back(0);
  for (int32_t i = 0; i < std::min(receivers, hub); ++i) src.push_back(0), dst.push_back(i);
  return Graph::from_edges(Ns, Nd, src, dst);
}

// (rows, cols) with about `density` of the elements non-zero, in +-[0.1, 1); rows i % 17 == 1 and
// columns k % 13 == 2 are empty. The shape of bag-of-words node features.
inline Tensor sparse_random(int64_t rows, int64_t cols, std::mt19937_64& rng, double density, DType dtype) {
  std::uniform_real_distribution<double> coin(0.0, 1.0), value(0.1, 1.0);
  std::vector<double> v(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < cols; ++k)
      if (i % 17 != 1 && k % 13 != 2 && coin(rng) < density)
        v[i * cols + k] = coin(rng) < 0.5 ? value(rng) : -value(rng);
  return Tensor::from_vector(v, {rows, cols}).to(dtype);
}

// A (rows, lengths.size()) matrix whose column k holds lengths[k] non-zeros in random rows.
inline Tensor columns_of_lengths(const std::vector<int64_t>& lengths, int64_t rows, std::mt19937_64& rng,
                                 DType dtype) {
  std::uniform_real_distribution<double> value(0.1, 1.0);
  const size_t cols = lengths.size();
  std::vector<double> v(static_cast<size_t>(rows) * cols, 0.0);
  std::vector<int64_t> picked(static_cast<size_t>(rows));
  for (size_t k = 0; k < cols; ++k) {
    for (int64_t i = 0; i < rows; ++i) picked[static_cast<size_t>(i)] = i;
    std::shuffle(picked.begin(), picked.end(), rng);
    for (int64_t n = 0; n < lengths[k]; ++n)
      v[static_cast<size_t>(picked[static_cast<size_t>(n)]) * cols + k] = value(rng);
  }
  return Tensor::from_vector(v, {rows, static_cast<int64_t>(cols)}).to(dtype);
}

// A small directed graph with one explicit self loop (2 -> 2) and a node (0) that only sends.
inline Graph small_graph(int64_t n, std::mt19937_64& rng) {
  std::vector<int32_t> src, dst;
  std::uniform_int_distribution<int32_t> node(0, static_cast<int32_t>(n - 1));
  for (int k = 0; k < 3 * n; ++k) {
    const int32_t s = node(rng), d = node(rng);
    if (d == 0) continue;
    src.push_back(s);
    dst.push_back(d);
  }
  src.push_back(2);
  dst.push_back(2);
  return Graph::from_edges(n, src, dst);
}

// The small two-layer model the model tests build: `in` inputs, `classes` classes, 2 heads of 3
// features, 2 output heads, dropout 0.4 (value dropout at its default).
inline GATConfig small_config(int64_t in, int64_t classes, DType dtype) {
  GATConfig c;
  c.in_features = in;
  c.num_classes = classes;
  c.hidden = 3;
  c.heads = 2;
  c.output_heads = 2;
  c.dropout = 0.4;
  c.dtype = dtype;
  return c;
}

// GATConvOptions or GATv2ConvOptions (both GraphAttentionOptions) with the fields the tests vary.
template <class Options>
Options attention_options(int64_t in, int64_t out, int64_t heads, bool concat, bool residual, double dropout,
                          DType dtype) {
  Options o;
  o.in_channels = in;
  o.out_channels = out;
  o.heads = heads;
  o.concat = concat;
  o.residual = residual;
  o.dropout = dropout;
  o.dtype = dtype;
  return o;
}

inline GATConvOptions conv_options(int64_t in, int64_t out, int64_t heads, bool concat, bool residual,
                                   double dropout, DType dtype = DType::f64) {
  return attention_options<GATConvOptions>(in, out, heads, concat, residual, dropout, dtype);
}

// ---- naive attention layers (the layers' tests), in double with plain loops ----

// x W (+ b) for x (N, in) and W (in, out) row-major, b (out,) or empty.
inline std::vector<double> reference_affine(const std::vector<double>& x, int64_t N,
                                            const std::vector<double>& W, int64_t out,
                                            const std::vector<double>& b = {}) {
  const int64_t in = static_cast<int64_t>(x.size()) / std::max<int64_t>(N, 1);
  std::vector<double> y(static_cast<size_t>(N * out));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < out; ++c) {
      double v = b.empty() ? 0.0 : b[c];
      for (int64_t k = 0; k < in; ++k) v += x[n * in + k] * W[k * out + c];
      y[n * out + c] = v;
    }
  return y;
}

// An attention layer's output as PyG computes it, given its edges' scores: with add_self_loops
// the edges (src, dst) lose their self loops and get (i, i) for i < min(num_src, N) (appended;
// num_src < 0: N, one node set); for every head h,
// the softmax over each destination's incoming edges of score(source, destination, h) weights
// the value rows values[source] (N, H, F); then concat (N, H*F) or the heads' mean (N, F), plus
// residual (N, C) and bias (C,) where they are not empty.
inline std::vector<double> reference_attention_layer(
    const std::vector<int32_t>& src, const std::vector<int32_t>& dst, int64_t N, bool add_self_loops,
    int64_t H, int64_t F, const std::function<double(int32_t, int32_t, int64_t)>& score,
    const std::vector<double>& values, bool concat, const std::vector<double>& residual,
    const std::vector<double>& bias, int64_t num_src = -1) {
  const int64_t HF = H * F, C = concat ? HF : F;
  const int64_t loops = std::min(num_src < 0 ? N : num_src, N);  // PyG: (i, i) for i < min(Ns, Nd)
  std::vector<int32_t> s, d;
  for (size_t e = 0; e < src.size(); ++e)
    if (!add_self_loops || src[e] != dst[e]) s.push_back(src[e]), d.push_back(dst[e]);
  if (add_self_loops)
    for (int32_t n = 0; n < loops; ++n) s.push_back(n), d.push_back(n);
  std::vector<double> agg(static_cast<size_t>(N * HF), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> scores(s.size()), mx(static_cast<size_t>(N), -INFINITY),
        z(static_cast<size_t>(N), 0.0);
    for (size_t e = 0; e < s.size(); ++e) {
      scores[e] = score(s[e], d[e], h);
      mx[d[e]] = std::max(mx[d[e]], scores[e]);
    }
    for (size_t e = 0; e < s.size(); ++e) z[d[e]] += std::exp(scores[e] - mx[d[e]]);
    for (size_t e = 0; e < s.size(); ++e) {
      const double a = std::exp(scores[e] - mx[d[e]]) / z[d[e]];
      for (int64_t f = 0; f < F; ++f) agg[d[e] * HF + h * F + f] += a * values[s[e] * HF + h * F + f];
    }
  }
  std::vector<double> out(static_cast<size_t>(N * C), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t f = 0; f < F; ++f) {
        const double v = agg[n * HF + h * F + f];
        if (concat)
          out[n * C + h * F + f] = v;
        else
          out[n * C + f] += v / static_cast<double>(H);
      }
  for (size_t i = 0; i < residual.size(); ++i) out[i] += residual[i];
  if (!bias.empty())
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) out[n * C + c] += bias[c];
  return out;
}

// The parameter slots of a GATConv in a fixed order, so a gradient check can substitute them.
inline std::vector<Tensor*> slots_of(GATConv& conv) {
  std::vector<Tensor*> slots;
  if (conv.lin)
    slots = {&conv.lin->weight};
  else
    slots = {&conv.lin_src->weight, &conv.lin_dst->weight};
  slots.insert(slots.end(), {&conv.att_src, &conv.att_dst});
  if (conv.bias.defined()) slots.push_back(&conv.bias);
  if (conv.res) slots.push_back(&conv.res->weight);
  return slots;
}

// Inputs of a gradient check: the leading inputs (x; or x_src, x_dst, edge_attr, ...), then a copy
// of the current value of every slot.
inline std::vector<Tensor> gradcheck_inputs(std::vector<Tensor> leading, const std::vector<Tensor*>& slots) {
  for (Tensor* s : slots) leading.push_back(s->clone());
  return leading;
}
inline std::vector<Tensor> gradcheck_inputs(const Tensor& x, const std::vector<Tensor*>& slots) {
  return gradcheck_inputs(std::vector<Tensor>{x}, slots);
}

// f(inputs) for a gradient check over slots after `leading` inputs: puts inputs[leading..] into the
// slots, then calls run(inputs), which reads the leading ones.
template <class Run>
TensorFn with_slots(const std::vector<Tensor*>& slots, size_t leading, Run run) {
  return [slots, leading, run](const std::vector<Tensor>& in) {
    for (size_t i = 0; i < slots.size(); ++i) *slots[i] = in[leading + i];
    return run(in);
  };
}

// The same after one leading input x: calls run(x).
template <class Run>
TensorFn with_slots(const std::vector<Tensor*>& slots, Run run) {
  return with_slots(slots, 1, [run](const std::vector<Tensor>& in) { return run(in[0]); });
}

// Gradients of x, edge_attr and every slot of a layer with edge features (GATConv, GATv2Conv) through
// conv.forward(x, graph, edge_attr, gen), with the same dropout masks in every evaluation.
template <class Conv>
void expect_edge_attr_gradients(const std::string& what, Conv& conv, const std::vector<Tensor*>& slots,
                                const Graph& graph, const Tensor& x, const Tensor& edge_attr) {
  expect_gradients_match(what,
                         with_slots(slots, 2,
                                    [&](const std::vector<Tensor>& in) {
                                      Generator gen(0);
                                      return conv.forward(in[0], graph, in[1], gen);
                                    }),
                         gradcheck_inputs({x, edge_attr}, slots));
}

// A generated 200-node, 3-class, 12-feature dataset (10 training nodes per class, 50 validation,
// 100 test): a GAT trains on it in milliseconds per epoch.
inline Dataset small_training_dataset() {
  GeneratorOptions go;
  go.num_nodes = 200;
  go.num_classes = 3;
  go.num_features = 12;
  go.train_per_class = 10;
  go.val_size = 50;
  go.test_size = 100;
  go.seed = 4;
  return generate_sbm(go);
}

}  // namespace gat::testing
