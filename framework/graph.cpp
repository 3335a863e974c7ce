#include "gat/framework/graph.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>

#include "gat/framework/detail/chunk_edges.h"
#include "gat/framework/detail/host_parallel.h"
#include "gat/framework/progress.h"

// Every stage runs in parallel (OpenMP) and gives the same arrays for any number of threads:
// the sorts by destination and by source are stable (detail::bucket_sort), and rows are sorted
// by value.

namespace gat {

namespace {

constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

// Checks a CSR by destination of n rows and e edges (sizes, monotone row pointers, sources in
// [0, num_src)); `op` names the caller in the message.
template <class Offset>
void check_csr(const char* op, int64_t n, const Offset* row_ptr, int64_t e, const int32_t* col_idx,
               int64_t num_src) {
  GAT_CHECK(e <= std::numeric_limits<Offset>::max(), op, ": ", e,
            " edges do not fit 32-bit offsets (at most 2^31 - 1; Graph::from_wide_csr takes more)");
  GAT_CHECK(row_ptr[0] == 0, op, ": row_ptr[0] is ", row_ptr[0], ", expected 0");
  const int64_t i = detail::first_index_where(n, [&](int64_t r) { return row_ptr[r + 1] < row_ptr[r]; });
  GAT_CHECK(i == n, op, ": row_ptr decreases at node ", i, " (", row_ptr[i], " then ", row_ptr[i + 1], ")");
  GAT_CHECK(row_ptr[n] == e, op, ": row_ptr[N] is ", row_ptr[n], " but col_idx has ", e, " edges");
  const int64_t k =
      detail::first_index_where(e, [&](int64_t x) { return col_idx[x] < 0 || col_idx[x] >= num_src; });
  GAT_CHECK(k == e, op, ": edge ", k, " has source ", col_idx[k], " outside [0, ", num_src, ")");
}

// Sorts every row of a CSR (row i is [begin[i], begin[i+1]) of col) in place; with `dedup` each
// row's distinct values move to its front. Returns the running row lengths afterwards (N+1,).
template <class Offset>
std::vector<int64_t> sort_rows(int64_t n, const Offset* begin, int32_t* col, bool dedup) {
  std::vector<int64_t> ends(static_cast<size_t>(n) + 1, 0);  // (N+1,)
#pragma omp parallel for schedule(dynamic, 1024) if (begin[n] > detail::kParallelItems)
  for (int64_t i = 0; i < n; ++i) {
    int32_t *first = col + begin[i], *last = col + begin[i + 1];
    std::sort(first, last);
    if (dedup) last = std::unique(first, last);
    ends[static_cast<size_t>(i) + 1] = last - first;
  }
  detail::inclusive_scan(ends.data() + 1, n);
  return ends;
}

// The (N+1,) row pointers of the running row lengths `ends` (N+1,), of the offset type Offset.
template <class Offset>
Tensor row_pointers(const char* op, const std::vector<int64_t>& ends) {
  const int64_t n = static_cast<int64_t>(ends.size()) - 1;
  Tensor row_ptr = Tensor::empty({n + 1}, dtype_of<Offset>::value, Device::cpu, op);
  Offset* rp = row_ptr.data<Offset>();  // (N+1,)
#pragma omp parallel for if (n > detail::kParallelItems)
  for (int64_t i = 0; i <= n; ++i) rp[i] = static_cast<Offset>(ends[static_cast<size_t>(i)]);
  return row_ptr;
}

}  // namespace

DType offset_dtype_for(int64_t num_edges, bool wide) {
  return wide || num_edges > kMaxNarrowEdges ? DType::i64 : DType::i32;
}

Tensor narrow_offsets(const char* op, const Tensor& offsets) {
  if (!offsets.defined() || offsets.dtype() != DType::i64) return offsets;
  const std::vector<int64_t> wide = offsets.to_vector<int64_t>();
  GAT_CHECK(wide.empty() || wide.back() <= kMaxNarrowEdges, op, ": the offsets reach ", wide.back(),
            ", more than its 32-bit offsets hold (at most 2^31 - 1)");
  return Tensor::from_vector(std::vector<int32_t>(wide.begin(), wide.end()), offsets.shape(),
                             offsets.device());
}

namespace {

// The graph's CSR (N+1,) row pointers of `ends`, in the offsets offset_dtype_for picks.
Tensor row_pointers(const char* op, const std::vector<int64_t>& ends, bool wide) {
  Tensor row_ptr;
  dispatch_offsets(offset_dtype_for(ends.back(), wide),
                   [&](auto offset) { row_ptr = row_pointers<decltype(offset)>(op, ends); });
  return row_ptr;
}

}  // namespace

int64_t Graph::num_nodes() const {
  GAT_CHECK(!is_bipartite(), "Graph::num_nodes: the graph is bipartite (", num_src_nodes_, " sources, ",
            num_dst_nodes_, " destinations): ask num_src_nodes() or num_dst_nodes()");
  return num_dst_nodes_;
}

Graph Graph::from_edges(int64_t num_src, int64_t num_dst, const std::vector<int32_t>& src,
                        const std::vector<int32_t>& dst, const GraphBuildOptions& options) {
  return build(num_src, num_dst, src, dst, options, [] {});
}

Graph Graph::from_edges(int64_t num_src, int64_t num_dst, std::vector<int32_t>&& src,
                        std::vector<int32_t>&& dst, const GraphBuildOptions& options) {
  return build(num_src, num_dst, src, dst, options, [&] {
    std::vector<int32_t>().swap(src);
    std::vector<int32_t>().swap(dst);
  });
}

Graph Graph::build(int64_t num_src, int64_t num_dst, const std::vector<int32_t>& src,
                   const std::vector<int32_t>& dst, const GraphBuildOptions& options,
                   const std::function<void()>& release_input) {
  GAT_CHECK(num_src >= 0 && num_src <= kMaxIndex && num_dst >= 0 && num_dst <= kMaxIndex,
            "Graph::from_edges: ", num_src, " sources and ", num_dst, " destinations: each must be in [0, ",
            kMaxIndex, "]");
  GAT_CHECK(!options.symmetrize || num_src == num_dst,
            "Graph::from_edges: symmetrize needs one node set, but the "
            "graph is bipartite (",
            num_src, " sources, ", num_dst, " destinations)");
  GAT_CHECK(src.size() == dst.size(), "Graph::from_edges: ", src.size(), " sources but ", dst.size(),
            " destinations");
  const int64_t m = static_cast<int64_t>(src.size()), n = num_dst;
  const int64_t loops = options.add_self_loops ? std::min(num_src, num_dst) : 0;  // (i, i) for i < loops
  const int32_t *s = src.data(), *d = dst.data();                                 // (m,)
  const int64_t bad = detail::first_index_where(
      m, [&](int64_t k) { return s[k] < 0 || s[k] >= num_src || d[k] < 0 || d[k] >= n; });
  if (bad < m) {
    GAT_CHECK(s[bad] >= 0 && s[bad] < num_src, "Graph::from_edges: edge ", bad, " has source ", s[bad],
              " outside [0, ", num_src, ")");
    GAT_FAIL("Graph::from_edges: edge ", bad, " has destination ", d[bad], " outside [0, ", n, ")");
  }
  progress::Stage stage("graph: sorted by destination", m);
  const bool drop_loops = options.remove_self_loops || options.add_self_loops;

  // Counting sort by destination: inputs [0, m) are the edges (and their reverses), inputs
  // [m, m + loops) with add_self_loops the nodes' loops. Rows are sorted by source next, so only
  // the rows' contents matter here, not their order.
  const int64_t inputs = m + loops;
  auto visit = [&](int64_t begin, int64_t end, auto&& emit) {
    for (int64_t k = begin; k < end; ++k) {
      if (k >= m) {
        emit(k - m, static_cast<int32_t>(k - m));
        continue;
      }
      if (drop_loops && s[k] == d[k]) continue;
      emit(d[k], s[k]);
      if (options.symmetrize && s[k] != d[k]) emit(s[k], d[k]);
    }
  };
  Tensor col;  // (E',) sources grouped by destination
  int32_t* c = nullptr;
  std::unique_ptr<int32_t[]> staged_dst;  // (E',) the destination of col's entries, between the passes
  const std::vector<int64_t> offset = detail::bucket_sort<int32_t>(  // (Nd+1,) row starts in col
      "Graph::from_edges", inputs, n, visit,
      [&](int64_t total) {
        col = Tensor::empty({total}, DType::i32, Device::cpu, "Graph::from_edges");
        c = col.data<int32_t>();
        staged_dst.reset(new int32_t[static_cast<size_t>(total)]);
      },
      [&](int64_t pos, int32_t dest, int32_t source) {
        staged_dst[pos] = dest;
        c[pos] = source;
      },
      [&](int64_t pos) { return std::make_pair(staged_dst[pos], c[pos]); },
      [&](int64_t pos, int32_t source) { c[pos] = source; });
  staged_dst.reset();
  release_input();

  // Sort each row by source and drop duplicates within it; compact the rows if any were dropped.
  const std::vector<int64_t> ends = sort_rows(n, offset.data(), c, options.remove_duplicates);
  Tensor row_ptr = row_pointers("Graph::from_edges", ends, options.wide_offsets);
  const int64_t edges = ends.back();
  if (edges < offset.back()) {
    Tensor col_idx = Tensor::empty({edges}, DType::i32, Device::cpu, "Graph::from_edges");
    int32_t* out = col_idx.data<int32_t>();  // (E,)
#pragma omp parallel for schedule(dynamic, 1024) if (edges > detail::kParallelItems)
    for (int64_t i = 0; i < n; ++i)
      std::copy(c + offset[i], c + offset[i] + (ends[i + 1] - ends[i]), out + ends[i]);
    col = col_idx;
  }
  stage.done(detail::concat(edges, " edges"));
  Graph g;
  dispatch_offsets(row_ptr.dtype(), [&](auto offset) {
    g = from_sorted_csr<decltype(offset)>(num_src, std::move(row_ptr), std::move(col));
  });
  return g;
}

Graph Graph::from_csr(std::vector<int32_t> row_ptr, std::vector<int32_t> col_idx) {
  const int64_t n = static_cast<int64_t>(row_ptr.size()) - 1;  // -1 when empty: reported as such
  return csr_of(n, std::move(row_ptr), std::move(col_idx));
}

Graph Graph::from_csr(int64_t num_src, std::vector<int32_t> row_ptr, std::vector<int32_t> col_idx) {
  return csr_of(num_src, std::move(row_ptr), std::move(col_idx));
}

Graph Graph::from_wide_csr(int64_t num_src, std::vector<int64_t> row_ptr, std::vector<int32_t> col_idx) {
  return csr_of(num_src, std::move(row_ptr), std::move(col_idx));
}

template <class Offset>
Graph Graph::csr_of(int64_t num_src, std::vector<Offset> row_ptr, std::vector<int32_t> col_idx) {
  GAT_CHECK(!row_ptr.empty(), "Graph::from_csr: row_ptr is empty (needs Nd+1 entries)");
  GAT_CHECK(num_src >= 0 && num_src <= kMaxIndex, "Graph::from_csr: ", num_src, " sources outside [0, ",
            kMaxIndex, "]");
  const int64_t n = static_cast<int64_t>(row_ptr.size()) - 1, e = static_cast<int64_t>(col_idx.size());
  check_csr("Graph::from_csr", n, row_ptr.data(), e, col_idx.data(), num_src);
  sort_rows(n, row_ptr.data(), col_idx.data(), false);
  return from_sorted_csr<Offset>(num_src, Tensor::from_vector(row_ptr, {n + 1}),
                                 Tensor::from_vector(col_idx, {e}));
}

namespace {

// chunk_ptr (N+1,) of a CSR of n rows: the running count of chunks, ceil(degree / chunk) for the
// rows of more than `chunk` edges and none for the others. Throws when the count passes 2^31 - 1
// (RowPlans says why it cannot on a graph that fits a machine).
template <class Offset>
std::vector<int32_t> chunk_ptr_of(int64_t n, const Offset* row_ptr, int chunk) {
  std::vector<Offset> chunk_ptr(static_cast<size_t>(n) + 1, 0);  // (N+1,) counted in Offset
#pragma omp parallel for if (n > detail::kParallelItems)
  for (int64_t i = 0; i < n; ++i) {
    const Offset degree = row_ptr[i + 1] - row_ptr[i];
    chunk_ptr[static_cast<size_t>(i) + 1] = degree > chunk ? (degree + chunk - 1) / chunk : 0;
  }
  detail::inclusive_scan(chunk_ptr.data() + 1, n);
  if constexpr (std::is_same_v<Offset, int32_t>) {
    return chunk_ptr;
  } else {
    GAT_CHECK(chunk_ptr.back() <= kMaxIndex, "Graph: ", chunk_ptr.back(), " chunks of ", chunk,
              " edges do not fit the 32-bit chunk pointers");
    return std::vector<int32_t>(chunk_ptr.begin(), chunk_ptr.end());
  }
}

// chunk_row (W,) of a chunk_ptr (n+1,): the row that owns each chunk.
std::vector<int32_t> chunk_rows_of(int64_t n, const std::vector<int32_t>& chunk_ptr) {
  std::vector<int32_t> rows(static_cast<size_t>(chunk_ptr[static_cast<size_t>(n)]));
#pragma omp parallel for if (n > detail::kParallelItems)
  for (int64_t i = 0; i < n; ++i)
    for (int32_t w = chunk_ptr[static_cast<size_t>(i)]; w < chunk_ptr[static_cast<size_t>(i) + 1]; ++w)
      rows[static_cast<size_t>(w)] = static_cast<int32_t>(i);
  return rows;
}

// The rows of a CSR of n rows with at most `chunk` edges (the longer ones are cut into chunks),
// longest first and by index within a length (Graph::row_order): a stable counting sort by
// chunk - degree.
template <class Offset>
std::vector<int32_t> rows_longest_first(int64_t n, const Offset* row_ptr, int chunk) {
  std::vector<int32_t> order;
  detail::counting_sort(
      "Graph (row order)", n, int64_t{chunk} + 1,
      [&](int64_t begin, int64_t end, auto&& emit) {
        for (int64_t i = begin; i < end; ++i) {
          const Offset degree = row_ptr[i + 1] - row_ptr[i];
          if (degree <= chunk) emit(chunk - degree, static_cast<int32_t>(i));
        }
      },
      [&](int64_t total) { order.resize(static_cast<size_t>(total)); },
      [&](int64_t pos, int32_t i) { order[static_cast<size_t>(pos)] = i; });
  return order;
}

// The self loops of the sorted row [first, last) of node i: where value i starts and ends.
std::pair<const int32_t*, const int32_t*> loops_in_row(const int32_t* first, const int32_t* last, int64_t i) {
  return std::equal_range(first, last, static_cast<int32_t>(i));
}

// What from_sorted_csr and validate learn from the rows of a sorted CSR in one pass.
struct RowSummary {
  int64_t max_degree = 0;
  int64_t self_loops = 0;
  int64_t rows_with_one_loop = 0;
  // Every node i < loop_nodes (= min(Ns, Nd)) has exactly one self loop; none else can have one.
  bool one_loop_per_node(int64_t loop_nodes) const {
    return rows_with_one_loop == loop_nodes && self_loops == loop_nodes;
  }
};
template <class Offset>
RowSummary summarize_rows(int64_t n, const Offset* row_ptr, const int32_t* col_idx) {
  int64_t max_degree = 0, self_loops = 0, rows_with_one_loop = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(max : max_degree) reduction(+ : self_loops, rows_with_one_loop) \
    if (row_ptr[n] > detail::kParallelItems)
  for (int64_t i = 0; i < n; ++i) {
    max_degree = std::max<int64_t>(max_degree, row_ptr[i + 1] - row_ptr[i]);
    const auto loops = loops_in_row(col_idx + row_ptr[i], col_idx + row_ptr[i + 1], i);
    self_loops += loops.second - loops.first;
    rows_with_one_loop += loops.second - loops.first == 1;
  }
  return {max_degree, self_loops, rows_with_one_loop};
}

}  // namespace

template <class Offset>
Graph Graph::from_sorted_csr(int64_t num_src, Tensor row_ptr, Tensor col_idx) {
  const int64_t n = row_ptr.numel() - 1, e = col_idx.numel();
  progress::Stage stage("graph: transpose and chunk plans", e);
  const Offset* rp = row_ptr.data<Offset>();     // (Nd+1,)
  const int32_t* col = col_idx.data<int32_t>();  // (E,)
  Graph g;
  g.num_src_nodes_ = num_src;
  g.num_dst_nodes_ = n;
  const RowSummary rows = summarize_rows(n, rp, col);
  g.num_self_loops_ = rows.self_loops;
  g.one_self_loop_per_node_ = rows.one_loop_per_node(std::min(num_src, n));

  Tensor edge_dst = Tensor::empty({e}, DType::i32, Device::cpu, "Graph edge_dst");
  int32_t* ed = edge_dst.data<int32_t>();  // (E,)
#pragma omp parallel for schedule(dynamic, 4096) if (e > detail::kParallelItems)
  for (int64_t i = 0; i < n; ++i) std::fill(ed + rp[i], ed + rp[i + 1], static_cast<int32_t>(i));

  // The transpose: a stable counting sort of the edges by source. Edges in id order visit
  // destinations in ascending order, so each transpose row comes out sorted by destination.
  Tensor t_edge_dst = Tensor::empty({e}, DType::i32, Device::cpu, "Graph t_edge_dst");
  Tensor t_edge_id = Tensor::empty({e}, dtype_of<Offset>::value, Device::cpu, "Graph t_edge_id");
  int32_t* td = t_edge_dst.data<int32_t>();                                    // (E,)
  Offset* tid = t_edge_id.data<Offset>();                                      // (E,)
  using EdgeAndDst = std::pair<Offset, int32_t>;                               // (edge id, destination)
  std::unique_ptr<int32_t[]> staged_src(new int32_t[static_cast<size_t>(e)]);  // (E,) between the passes
  const std::vector<int64_t> t_offsets = detail::bucket_sort<EdgeAndDst>(      // (Ns+1,)
      "Graph (transpose)", e, num_src,
      [&](int64_t begin, int64_t end, auto&& emit) {
        for (int64_t k = begin; k < end; ++k) emit(col[k], EdgeAndDst(static_cast<Offset>(k), ed[k]));
      },
      [](int64_t) {},
      [&](int64_t pos, int32_t source, const EdgeAndDst& edge) {  // staged in the outputs, and the sources
        staged_src[pos] = source;
        tid[pos] = edge.first;
        td[pos] = edge.second;
      },
      [&](int64_t pos) { return std::make_pair(staged_src[pos], EdgeAndDst(tid[pos], td[pos])); },
      [&](int64_t pos, const EdgeAndDst& edge) {
        tid[pos] = edge.first;
        td[pos] = edge.second;
      });
  staged_src.reset();
  Tensor t_row_ptr = row_pointers<Offset>("Graph (transpose)", t_offsets);
  g.set_plans(plan_rows(e, row_ptr, t_row_ptr));
  g.row_ptr_ = std::move(row_ptr);
  g.edge_src_ = std::move(col_idx);
  g.t_row_ptr_ = std::move(t_row_ptr);
  g.t_edge_dst_ = std::move(t_edge_dst);
  g.t_edge_id_ = std::move(t_edge_id);
  g.edge_dst_ = std::move(edge_dst);
  stage.done();
  return g;
}

namespace {

template <class Offset>
RowPlans plan_rows_of(int64_t num_edges, const Tensor& row_ptr, const Tensor& t_row_ptr) {
  const int64_t n = row_ptr.numel() - 1, num_src = t_row_ptr.numel() - 1;
  const Offset* rp = row_ptr.data<Offset>();     // (Nd+1,)
  const Offset* trp = t_row_ptr.data<Offset>();  // (Ns+1,)
  RowPlans p;
  int64_t max_in = 0, max_out = 0;
#pragma omp parallel for reduction(max : max_in) if (n > detail::kParallelItems)
  for (int64_t i = 0; i < n; ++i) max_in = std::max<int64_t>(max_in, rp[i + 1] - rp[i]);
#pragma omp parallel for reduction(max : max_out) if (num_src > detail::kParallelItems)
  for (int64_t j = 0; j < num_src; ++j) max_out = std::max<int64_t>(max_out, trp[j + 1] - trp[j]);
  p.max_in_degree = max_in;
  p.max_out_degree = max_out;
  p.chunk_edges = detail::chunk_edges_for(num_edges, std::max(max_in, max_out));
  const std::vector<int32_t> row_chunk_ptr = chunk_ptr_of(n, rp, p.chunk_edges);
  const std::vector<int32_t> t_row_chunk_ptr = chunk_ptr_of(num_src, trp, p.chunk_edges);
  p.num_row_chunks = row_chunk_ptr.back();
  p.num_t_row_chunks = t_row_chunk_ptr.back();
  p.row_chunk_ptr = Tensor::from_vector(row_chunk_ptr, {n + 1});
  p.t_row_chunk_ptr = Tensor::from_vector(t_row_chunk_ptr, {num_src + 1});
  p.row_chunk_row = Tensor::from_vector(chunk_rows_of(n, row_chunk_ptr), {p.num_row_chunks});
  p.t_row_chunk_row = Tensor::from_vector(chunk_rows_of(num_src, t_row_chunk_ptr), {p.num_t_row_chunks});
  const std::vector<int32_t> row_order = rows_longest_first(n, rp, p.chunk_edges);
  const std::vector<int32_t> t_row_order = rows_longest_first(num_src, trp, p.chunk_edges);
  p.row_order = Tensor::from_vector(row_order, {static_cast<int64_t>(row_order.size())});
  p.t_row_order = Tensor::from_vector(t_row_order, {static_cast<int64_t>(t_row_order.size())});
  return p;
}

}  // namespace

RowPlans plan_rows(int64_t num_edges, const Tensor& row_ptr, const Tensor& t_row_ptr) {
  GAT_CHECK(row_ptr.dtype() == t_row_ptr.dtype() &&
                (row_ptr.dtype() == DType::i32 || row_ptr.dtype() == DType::i64),
            "plan_rows: row_ptr ", row_ptr.describe(), " and t_row_ptr ", t_row_ptr.describe(),
            " must both be i32 or both i64");
  RowPlans p;
  dispatch_offsets(row_ptr.dtype(),
                   [&](auto offset) { p = plan_rows_of<decltype(offset)>(num_edges, row_ptr, t_row_ptr); });
  return p;
}

void Graph::set_plans(RowPlans p) {
  max_in_degree_ = p.max_in_degree;
  max_out_degree_ = p.max_out_degree;
  chunk_edges_ = p.chunk_edges;
  num_row_chunks_ = p.num_row_chunks;
  num_t_row_chunks_ = p.num_t_row_chunks;
  row_chunk_ptr_ = std::move(p.row_chunk_ptr);
  t_row_chunk_ptr_ = std::move(p.t_row_chunk_ptr);
  row_chunk_row_ = std::move(p.row_chunk_row);
  t_row_chunk_row_ = std::move(p.t_row_chunk_row);
  row_order_ = std::move(p.row_order);
  t_row_order_ = std::move(p.t_row_order);
}

namespace {

// The CUDA kernels read 32-bit offsets only: a graph of i64 offsets stays on the host.
void check_offsets_on(const char* op, Device device, DType offsets) {
  GAT_CHECK(device != Device::cuda || offsets == DType::i32, op,
            ": a graph of i64 offsets (more than 2^31 - 1 edges, or built with wide_offsets) cannot go to "
            "CUDA: its kernels read 32-bit offsets only");
}

}  // namespace

Graph Graph::from_arrays(GraphArrays a) {
  if (a.row_ptr.defined()) check_offsets_on("Graph::from_arrays", a.row_ptr.device(), a.row_ptr.dtype());
  Graph g;
  g.num_src_nodes_ = a.num_src_nodes;
  g.num_dst_nodes_ = a.num_dst_nodes;
  g.row_ptr_ = std::move(a.row_ptr);
  g.edge_src_ = std::move(a.edge_src);
  g.edge_dst_ = std::move(a.edge_dst);
  g.t_row_ptr_ = std::move(a.t_row_ptr);
  g.t_edge_dst_ = std::move(a.t_edge_dst);
  g.t_edge_id_ = std::move(a.t_edge_id);
  g.set_plans(std::move(a.plans));
  g.num_self_loops_ = a.num_self_loops;
  g.one_self_loop_per_node_ = a.one_self_loop_per_node;
  return g;
}

Graph Graph::with_self_loops() const {
  Graph g;
  dispatch_offsets(*this, [&](auto offset) { g = looped<decltype(offset)>(nullptr); });
  return g;
}

Graph Graph::with_self_loops(std::vector<int32_t>& edge_origins) const {
  Graph g;
  dispatch_offsets(*this, [&](auto offset) { g = looped<decltype(offset)>(&edge_origins); });
  return g;
}

template <class Offset>
Graph Graph::looped(std::vector<int32_t>* origins) const {
  if (one_self_loop_per_node_) {
    if (origins) {
      origins->resize(static_cast<size_t>(num_edges()));
      std::iota(origins->begin(), origins->end(), 0);
    }
    return *this;
  }
  const int64_t n = num_dst_nodes_, looped = std::min(num_src_nodes_, num_dst_nodes_);
  progress::Stage stage("graph: self loops added", num_edges());
  // Row i keeps its sources other than i, in order, with i put in its sorted place when i <
  // min(Ns, Nd) (a row i >= min(Ns, Nd) has no source i: it is kept as it is).
  const Tensor rp_host =
      row_ptr_.defined() ? row_ptr_.to(Device::cpu) : Tensor::zeros({1}, dtype_of<Offset>::value);
  const Tensor src_host = row_ptr_.defined() ? edge_src_.to(Device::cpu) : Tensor::zeros({0}, DType::i32);
  const Offset* rp = rp_host.data<Offset>();                 // (Nd+1,)
  const int32_t* col = src_host.data<int32_t>();             // (E,)
  std::vector<int64_t> ends(static_cast<size_t>(n) + 1, 0);  // (Nd+1,) running row lengths
#pragma omp parallel for if (n > detail::kParallelItems)
  for (int64_t i = 0; i < n; ++i) {
    const auto loops = loops_in_row(col + rp[i], col + rp[i + 1], i);
    ends[static_cast<size_t>(i) + 1] = rp[i + 1] - rp[i] - (loops.second - loops.first) + (i < looped);
  }
  detail::inclusive_scan(ends.data() + 1, n);
  GAT_CHECK(!origins || ends.back() <= kMaxNarrowEdges, "Graph::with_self_loops: the looped graph's ",
            ends.back(), " edges have ids that int32 edge_origins cannot hold (at most 2^31 - 1)");
  // A wide graph stays wide; a narrow one widens only when the loops take it past 2^31 - 1 edges.
  Tensor row_ptr = row_pointers("Graph::with_self_loops", ends, std::is_same_v<Offset, int64_t>);
  Tensor col_idx = Tensor::empty({ends.back()}, DType::i32, Device::cpu, "Graph::with_self_loops");
  int32_t* out = col_idx.data<int32_t>();  // (E + min(Ns, Nd) - loops,)
  if (origins) origins->resize(static_cast<size_t>(ends.back()));
#pragma omp parallel for schedule(dynamic, 4096) if (ends.back() > detail::kParallelItems)
  for (int64_t i = 0; i < n; ++i) {
    const int32_t *first = col + rp[i], *last = col + rp[i + 1];
    const auto loops = loops_in_row(first, last, i);
    int32_t* o = std::copy(first, loops.first, out + ends[static_cast<size_t>(i)]);
    if (i < looped) *o++ = static_cast<int32_t>(i);
    std::copy(loops.second, last, o);
    if (!origins) continue;
    // The same walk over the input's edge ids (at most the looped graph's count, checked above):
    // rp[i] + the position in the row.
    const int32_t loops_begin = static_cast<int32_t>(rp[i] + (loops.first - first));
    const int32_t loops_end = static_cast<int32_t>(rp[i] + (loops.second - first));
    int32_t* g = origins->data() + ends[static_cast<size_t>(i)];
    for (int32_t e = static_cast<int32_t>(rp[i]); e < loops_begin; ++e) *g++ = e;
    if (i < looped) *g++ = loops_end > loops_begin ? loops_end - 1 : -1;
    for (int32_t e = loops_end; e < static_cast<int32_t>(rp[i + 1]); ++e) *g++ = e;
  }
  stage.done(detail::concat(ends.back(), " edges"));
  Graph g;
  dispatch_offsets(row_ptr.dtype(), [&](auto offset) {
    g = from_sorted_csr<decltype(offset)>(num_src_nodes_, std::move(row_ptr), std::move(col_idx));
  });
  return g.to(device());
}

Graph Graph::to(Device target) const {
  Graph out = *this;
  if (!row_ptr_.defined()) return out;
  check_offsets_on("Graph::to", target, offset_dtype());
  to_each(target, {&out.row_ptr_, &out.edge_src_, &out.t_row_ptr_, &out.t_edge_dst_, &out.t_edge_id_,
                   &out.edge_dst_, &out.row_chunk_ptr_, &out.t_row_chunk_ptr_, &out.row_chunk_row_,
                   &out.t_row_chunk_row_, &out.row_order_, &out.t_row_order_});
  return out;
}

std::vector<int32_t> Graph::sources() const {
  return row_ptr_.defined() ? edge_src_.to_vector<int32_t>() : std::vector<int32_t>{};
}

std::vector<int32_t> Graph::destinations() const {
  return row_ptr_.defined() ? edge_dst_.to_vector<int32_t>() : std::vector<int32_t>{};
}

std::vector<int32_t> Graph::in_degrees() const {
  if (!row_ptr_.defined()) return {};
  GAT_CHECK(max_in_degree_ <= kMaxIndex, "Graph::in_degrees: a node has ", max_in_degree_,
            " in-edges, more than int32 degrees hold");
  std::vector<int32_t> deg(static_cast<size_t>(num_dst_nodes_));
  dispatch_offsets(*this, [&](auto offset) {
    const auto rp = row_ptr_.to_vector<decltype(offset)>();  // (Nd+1,)
    for (size_t i = 0; i < deg.size(); ++i) deg[i] = static_cast<int32_t>(rp[i + 1] - rp[i]);
  });
  return deg;
}

void Graph::validate() const {
  const char* op = "Graph::validate";
  if (!row_ptr_.defined()) {
    GAT_CHECK(num_src_nodes_ == 0 && num_dst_nodes_ == 0, op, ": ", num_src_nodes_, " sources and ",
              num_dst_nodes_, " destinations but no index arrays");
    return;
  }
  const Tensor* all[] = {&row_ptr_,       &edge_src_,        &t_row_ptr_,     &t_edge_dst_,
                         &t_edge_id_,     &edge_dst_,        &row_chunk_ptr_, &t_row_chunk_ptr_,
                         &row_chunk_row_, &t_row_chunk_row_, &row_order_,     &t_row_order_};
  const char* names[] = {"row_ptr",       "edge_src",        "t_row_ptr",     "t_edge_dst",
                         "t_edge_id",     "edge_dst",        "row_chunk_ptr", "t_row_chunk_ptr",
                         "row_chunk_row", "t_row_chunk_row", "row_order",     "t_row_order"};
  static_assert(std::size(all) == std::size(names));
  const DType offsets = row_ptr_.dtype();
  GAT_CHECK(offsets == DType::i32 || offsets == DType::i64, op, ": row_ptr ", row_ptr_.describe(),
            " must be i32 or i64");
  for (size_t k = 0; k < std::size(all); ++k) {
    const bool is_offset = all[k] == &row_ptr_ || all[k] == &t_row_ptr_ || all[k] == &t_edge_id_;
    check_dtype(op, names[k], *all[k], is_offset ? offsets : DType::i32);
    check_dim(op, names[k], *all[k], 1);
    GAT_CHECK(all[k]->device() == row_ptr_.device(), op, ": ", names[k], " is on ",
              device_name(all[k]->device()), ", row_ptr on ", device_name(row_ptr_.device()));
  }
  const int64_t n = num_dst_nodes_, ns = num_src_nodes_, e = edge_src_.numel();
  GAT_CHECK(n >= 0 && ns >= 0, op, ": ", ns, " sources and ", n,
            " destinations; counts must not be negative");
  check_shape(op, "row_ptr", row_ptr_, {n + 1});
  check_shape(op, "t_row_ptr", t_row_ptr_, {ns + 1});
  check_shape(op, "t_edge_dst", t_edge_dst_, {e});
  check_shape(op, "t_edge_id", t_edge_id_, {e});
  check_shape(op, "edge_dst", edge_dst_, {e});
  check_shape(op, "row_chunk_ptr", row_chunk_ptr_, {n + 1});
  check_shape(op, "t_row_chunk_ptr", t_row_chunk_ptr_, {ns + 1});

  dispatch_offsets(offsets, [&](auto offset) {
    using Offset = decltype(offset);
    const std::vector<Offset> rp = row_ptr_.to_vector<Offset>(), trp = t_row_ptr_.to_vector<Offset>(),
                              tid = t_edge_id_.to_vector<Offset>();
    const std::vector<int32_t> ci = edge_src_.to_vector<int32_t>(), tci = t_edge_dst_.to_vector<int32_t>(),
                               ed = edge_dst_.to_vector<int32_t>();
    check_csr(op, n, rp.data(), e, ci.data(), ns);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = rp[i]; k < rp[i + 1]; ++k) {
        GAT_CHECK(ed[k] == i, op, ": edge_dst[", k, "] is ", ed[k], " but the edge is in row ", i);
        GAT_CHECK(k == rp[i] || ci[k - 1] <= ci[k], op, ": row ", i, " is not sorted by source at edge ", k,
                  " (", ci[k - 1], " then ", ci[k], ")");
      }
    }
    const RowSummary rows = summarize_rows(n, rp.data(), ci.data());
    GAT_CHECK(rows.max_degree == max_in_degree_, op, ": max_in_degree is ", max_in_degree_, ", computed ",
              rows.max_degree);
    const int64_t loop_nodes = std::min(ns, n);
    GAT_CHECK(
        rows.self_loops == num_self_loops_ && rows.one_loop_per_node(loop_nodes) == one_self_loop_per_node_,
        op, ": the graph records ", num_self_loops_, " self loops",
        one_self_loop_per_node_ ? ", one per node" : "", "; its rows hold ", rows.self_loops, " in ",
        rows.rows_with_one_loop, " of ", loop_nodes, " rows with exactly one");

    // The transpose: same CSR checks, rows sorted by destination, every edge id exactly once and
    // naming an edge with this source and destination.
    check_csr("Graph::validate (transpose)", ns, trp.data(), e, tci.data(), n);
    std::vector<char> seen(static_cast<size_t>(e), 0);
    int64_t max_out = 0;
    for (int64_t j = 0; j < ns; ++j) {
      max_out = std::max<int64_t>(max_out, trp[j + 1] - trp[j]);
      for (int64_t k = trp[j]; k < trp[j + 1]; ++k) {
        const int64_t id = tid[k];
        GAT_CHECK(id >= 0 && id < e, op, ": t_edge_id[", k, "] is ", id, ", outside [0, ", e, ")");
        GAT_CHECK(!seen[id], op, ": t_edge_id names edge ", id, " twice (at position ", k, ")");
        seen[id] = 1;
        GAT_CHECK(ci[id] == j && ed[id] == tci[k], op, ": transpose position ", k, " (", j, " -> ", tci[k],
                  ") names edge ", id, " which is ", ci[id], " -> ", ed[id]);
        GAT_CHECK(k == trp[j] || tci[k - 1] <= tci[k], op, ": transpose row ", j,
                  " is not sorted by destination at position ", k);
      }
    }
    GAT_CHECK(max_out == max_out_degree_, op, ": max_out_degree is ", max_out_degree_, ", computed ",
              max_out);

    // The chunks of long rows, as from_sorted_csr cuts them.
    const int chunk = detail::chunk_edges_for(e, std::max(max_in_degree_, max_out_degree_));
    GAT_CHECK(chunk_edges_ == chunk, op, ": chunk_edges is ", chunk_edges_,
              ", the graph's edge count and longest row give ", chunk);
    const std::vector<int32_t> rcp = chunk_ptr_of(n, rp.data(), chunk_edges_),
                               trcp = chunk_ptr_of(ns, trp.data(), chunk_edges_);
    GAT_CHECK(row_chunk_ptr_.to_vector<int32_t>() == rcp && num_row_chunks_ == rcp.back(), op,
              ": row_chunk_ptr does not match the rows");
    GAT_CHECK(t_row_chunk_ptr_.to_vector<int32_t>() == trcp && num_t_row_chunks_ == trcp.back(), op,
              ": t_row_chunk_ptr does not match the transpose's rows");
    GAT_CHECK(row_chunk_row_.to_vector<int32_t>() == chunk_rows_of(n, rcp), op,
              ": row_chunk_row does not match row_chunk_ptr");
    GAT_CHECK(t_row_chunk_row_.to_vector<int32_t>() == chunk_rows_of(ns, trcp), op,
              ": t_row_chunk_row does not match t_row_chunk_ptr");
    GAT_CHECK(row_order_.to_vector<int32_t>() == rows_longest_first(n, rp.data(), chunk_edges_), op,
              ": row_order is not the uncut rows longest first");
    GAT_CHECK(t_row_order_.to_vector<int32_t>() == rows_longest_first(ns, trp.data(), chunk_edges_), op,
              ": t_row_order is not the transpose's uncut rows longest first");
  });
}

Tensor edge_attr_in_graph_order(const Graph& graph, const std::vector<int32_t>& src,
                                const std::vector<int32_t>& dst, const GraphBuildOptions& options,
                                const Tensor& edge_attr) {
  const char* op = "edge_attr_in_graph_order";
  GAT_CHECK(options.remove_duplicates && !options.add_self_loops, op,
            ": needs a graph built with remove_duplicates and without add_self_loops (edges must come from",
            " the input edges; ops::self_loop_attr makes self loops' attributes)");
  check_float(op, "edge_attr", edge_attr);
  check_dim(op, "edge_attr", edge_attr, 2);
  const int64_t m = static_cast<int64_t>(src.size()), E = graph.num_edges(), D = edge_attr.size(1);
  GAT_CHECK(src.size() == dst.size() && edge_attr.size(0) == m, op, ": ", src.size(), " sources, ",
            dst.size(), " destinations and 'edge_attr' ", edge_attr.describe(),
            " must all have one row per input edge");
  std::vector<int64_t> rp{0};  // (N+1,)
  if (graph.row_ptr().defined()) {
    dispatch_offsets(graph, [&](auto offset) {
      const auto offsets = graph.row_ptr().to_vector<decltype(offset)>();
      rp.assign(offsets.begin(), offsets.end());
    });
  }
  const std::vector<int32_t> col = graph.sources();  // (E,)
  // The id of edge s -> d in graph, or -1.
  auto edge_id = [&](int32_t s, int32_t d) -> int64_t {
    if (d < 0 || d + 1 >= static_cast<int64_t>(rp.size())) return -1;
    const auto first = col.begin() + rp[d], last = col.begin() + rp[d + 1];
    const auto at = std::lower_bound(first, last, s);
    return at != last && *at == s ? at - col.begin() : -1;
  };
  const bool drop_loops = options.remove_self_loops;
  Tensor out = Tensor::zeros({E, D}, edge_attr.dtype());
  std::vector<char> reached(static_cast<size_t>(E), 0);  // (E,)
  dispatch_float(edge_attr.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const Tensor host = edge_attr.to(Device::cpu);
    const T* in = host.data<T>();  // (M, D)
    T* o = out.data<T>();          // (E, D)
    // In input order: a duplicate's rows are added in the order they are listed.
    auto add_row = [&](int64_t k, int32_t s, int32_t d) {
      const int64_t e = edge_id(s, d);
      GAT_CHECK(e >= 0, op, ": input edge ", k, " (", s, " -> ", d, (s == src[k] ? "" : ", its reverse"),
                ") is not in the graph: build it with Graph::from_edges from the same lists and options");
      reached[static_cast<size_t>(e)] = 1;
      for (int64_t f = 0; f < D; ++f) o[e * D + f] += in[k * D + f];
    };
    for (int64_t k = 0; k < m; ++k) {
      if (src[k] == dst[k] && drop_loops) continue;
      add_row(k, src[k], dst[k]);
      if (options.symmetrize && src[k] != dst[k]) add_row(k, dst[k], src[k]);
    }
  });
  const auto missing = std::find(reached.begin(), reached.end(), 0);
  GAT_CHECK(missing == reached.end(), op, ": edge ", missing - reached.begin(),
            " of the graph is no input edge",
            " (or its reverse): build the graph with Graph::from_edges from the same lists and options");
  return out.to(edge_attr.device());
}

}  // namespace gat
