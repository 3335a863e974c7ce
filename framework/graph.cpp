#include "gat/framework/graph.h"
#include "gat/framework/ops/loops.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace gat {

namespace {

constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

// Checks a CSR by destination (sizes, monotone row pointers, sources in range); `op` names the
// caller in the message.
void check_csr(const char* op, const std::vector<int32_t>& row_ptr,
               const std::vector<int32_t>& col_idx) {
  GAT_CHECK(!row_ptr.empty(), op, ": row_ptr is empty (needs N+1 entries)");
  const int64_t n = static_cast<int64_t>(row_ptr.size()) - 1;
  const int64_t e = static_cast<int64_t>(col_idx.size());
  GAT_CHECK(e <= kMaxIndex, op, ": ", e, " edges do not fit 32-bit edge ids");
  GAT_CHECK(row_ptr[0] == 0, op, ": row_ptr[0] is ", row_ptr[0], ", expected 0");
  for (int64_t i = 0; i < n; ++i) {
    GAT_CHECK(row_ptr[i + 1] >= row_ptr[i], op, ": row_ptr decreases at node ", i, " (",
              row_ptr[i], " then ", row_ptr[i + 1], ")");
  }
  GAT_CHECK(row_ptr[n] == e, op, ": row_ptr[N] is ", row_ptr[n], " but col_idx has ", e,
            " edges");
  for (int64_t k = 0; k < e; ++k) {
    GAT_CHECK(col_idx[k] >= 0 && col_idx[k] < n, op, ": edge ", k, " has source ", col_idx[k],
              " outside [0, ", n, ")");
  }
}

}  // namespace

Graph Graph::from_edges(int64_t num_nodes, const std::vector<int32_t>& src,
                        const std::vector<int32_t>& dst, const GraphBuildOptions& options) {
  GAT_CHECK(num_nodes >= 0 && num_nodes <= kMaxIndex, "Graph::from_edges: num_nodes ", num_nodes,
            " outside [0, ", kMaxIndex, "]");
  GAT_CHECK(src.size() == dst.size(), "Graph::from_edges: ", src.size(), " sources but ",
            dst.size(), " destinations");
  const int64_t m = static_cast<int64_t>(src.size());
  for (int64_t k = 0; k < m; ++k) {
    GAT_CHECK(src[k] >= 0 && src[k] < num_nodes, "Graph::from_edges: edge ", k, " has source ",
              src[k], " outside [0, ", num_nodes, ")");
    GAT_CHECK(dst[k] >= 0 && dst[k] < num_nodes, "Graph::from_edges: edge ", k,
              " has destination ", dst[k], " outside [0, ", num_nodes, ")");
  }
  const bool drop_loops = options.remove_self_loops || options.add_self_loops;
  const size_t n = static_cast<size_t>(num_nodes);

  // Counting sort by destination: count[d] edges land in row d (reverse copies too).
  std::vector<int64_t> offset(n + 1, 0);  // (N+1,) running row starts
  auto each_edge = [&](auto&& visit) {      // visit(s, d) for every kept directed edge
    for (int64_t k = 0; k < m; ++k) {
      if (drop_loops && src[k] == dst[k]) continue;
      visit(src[k], dst[k]);
      if (options.symmetrize && src[k] != dst[k]) visit(dst[k], src[k]);
    }
  };
  each_edge([&](int32_t, int32_t d) { ++offset[static_cast<size_t>(d) + 1]; });
  if (options.add_self_loops)
    for (size_t i = 0; i < n; ++i) ++offset[i + 1];
  std::partial_sum(offset.begin(), offset.end(), offset.begin());
  const int64_t total = offset[n];
  std::vector<int32_t> col(static_cast<size_t>(total));  // (E',) sources grouped by destination
  {
    std::vector<int64_t> fill(offset.begin(), offset.end() - 1);  // (N,)
    each_edge([&](int32_t s, int32_t d) { col[static_cast<size_t>(fill[d]++)] = s; });
    if (options.add_self_loops)
      for (size_t i = 0; i < n; ++i) col[static_cast<size_t>(fill[i]++)] = static_cast<int32_t>(i);
  }

  // Sort each row by source, drop duplicates within the row; kept[i] = edges left in row i.
  std::vector<int64_t> kept(n);  // (N,)
#pragma omp parallel for schedule(dynamic, 1024) if (total > ops::detail::kParallelThreshold)
  for (int64_t i = 0; i < num_nodes; ++i) {
    auto first = col.begin() + offset[i], last = col.begin() + offset[i + 1];
    std::sort(first, last);
    if (options.remove_duplicates) last = std::unique(first, last);
    kept[static_cast<size_t>(i)] = last - first;
  }

  std::vector<int32_t> row_ptr(n + 1, 0);  // (N+1,)
  int64_t edges = 0;
  for (size_t i = 0; i < n; ++i) {
    edges += kept[i];
    GAT_CHECK(edges <= kMaxIndex, "Graph::from_edges: more than ", kMaxIndex,
              " edges do not fit 32-bit edge ids");
    row_ptr[i + 1] = static_cast<int32_t>(edges);
  }
  std::vector<int32_t> col_idx(static_cast<size_t>(edges));  // (E,)
#pragma omp parallel for schedule(dynamic, 1024) if (edges > ops::detail::kParallelThreshold)
  for (int64_t i = 0; i < num_nodes; ++i) {
    std::copy_n(col.begin() + offset[i], kept[static_cast<size_t>(i)], col_idx.begin() + row_ptr[i]);
  }
  return from_sorted_csr(std::move(row_ptr), std::move(col_idx));
}

Graph Graph::from_csr(std::vector<int32_t> row_ptr, std::vector<int32_t> col_idx) {
  check_csr("Graph::from_csr", row_ptr, col_idx);
  const int64_t n = static_cast<int64_t>(row_ptr.size()) - 1;
#pragma omp parallel for schedule(dynamic, 1024) if (static_cast<int64_t>(col_idx.size()) > ops::detail::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) std::sort(col_idx.begin() + row_ptr[i], col_idx.begin() + row_ptr[i + 1]);
  return from_sorted_csr(std::move(row_ptr), std::move(col_idx));
}

namespace {

// The chunk length of a graph of E edges whose longest row (either way) has `longest` edges.
// 512 leaves large graphs' typical rows whole. On a small graph the GPU is nearly idle and the
// longest serial loop is a kernel's whole time (Cora: 13,264 edges, 2,708 rows, the longest of
// 169 edges), so the chunks shrink with E, down to 16 edges. A graph whose rows all fit in 64
// edges is not cut at all: the chunk and merge launches would cost more than the shorter loops
// save, and the 384-node benchmark graph keeps its single launch.
int chunk_edges_for(int64_t E, int64_t longest) {
  constexpr int kMaxChunk = 512, kMinChunk = 16, kWholeRows = 64;
  int chunk = kMinChunk;
  while (chunk < kMaxChunk && static_cast<int64_t>(chunk) * 2 * 2048 <= E) chunk *= 2;
  return longest <= kWholeRows ? std::max(chunk, kWholeRows) : chunk;
}

// chunk_ptr (N+1,) of a CSR: the running count of chunks, ceil(degree / chunk) for the rows of
// more than `chunk` edges and none for the others.
std::vector<int32_t> chunk_ptr_of(const std::vector<int32_t>& row_ptr, int chunk) {
  std::vector<int32_t> chunk_ptr(row_ptr.size(), 0);
  for (size_t i = 0; i + 1 < row_ptr.size(); ++i) {
    const int32_t degree = row_ptr[i + 1] - row_ptr[i];
    chunk_ptr[i + 1] = chunk_ptr[i] + (degree > chunk ? (degree + chunk - 1) / chunk : 0);
  }
  return chunk_ptr;
}

}  // namespace

Graph Graph::from_sorted_csr(std::vector<int32_t> row_ptr, std::vector<int32_t> col_idx) {
  const int64_t n = static_cast<int64_t>(row_ptr.size()) - 1;
  const int64_t e = static_cast<int64_t>(col_idx.size());
  Graph g;
  g.num_nodes_ = n;
  std::vector<int32_t> edge_dst(static_cast<size_t>(e));  // (E,)
  std::vector<int32_t> t_row_ptr(static_cast<size_t>(n) + 1, 0);  // (N+1,)
  int64_t max_in = 0;
#pragma omp parallel for reduction(max : max_in) if (e > ops::detail::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = row_ptr[i]; k < row_ptr[i + 1]; ++k) edge_dst[k] = static_cast<int32_t>(i);
    max_in = std::max<int64_t>(max_in, row_ptr[i + 1] - row_ptr[i]);
  }
  g.max_in_degree_ = max_in;
  for (int64_t k = 0; k < e; ++k) ++t_row_ptr[static_cast<size_t>(col_idx[k]) + 1];
  for (int64_t j = 0; j < n; ++j) {
    g.max_out_degree_ = std::max<int64_t>(g.max_out_degree_, t_row_ptr[j + 1]);
    t_row_ptr[j + 1] += t_row_ptr[j];
  }
  // Edges in id order visit destinations in ascending order, so each transpose row comes out
  // sorted by destination.
  std::vector<int32_t> t_edge_dst(static_cast<size_t>(e)), t_edge_id(static_cast<size_t>(e));  // (E,)
  std::vector<int32_t> fill(t_row_ptr.begin(), t_row_ptr.end() - 1);  // (N,)
  for (int64_t k = 0; k < e; ++k) {
    const int32_t pos = fill[col_idx[k]]++;
    t_edge_dst[pos] = edge_dst[k];
    t_edge_id[pos] = static_cast<int32_t>(k);
  }
  g.chunk_edges_ = chunk_edges_for(e, std::max(g.max_in_degree_, g.max_out_degree_));
  const std::vector<int32_t> row_chunk_ptr = chunk_ptr_of(row_ptr, g.chunk_edges_);
  const std::vector<int32_t> t_row_chunk_ptr = chunk_ptr_of(t_row_ptr, g.chunk_edges_);
  g.num_row_chunks_ = row_chunk_ptr.back();
  g.num_t_row_chunks_ = t_row_chunk_ptr.back();
  g.row_chunk_ptr_ = Tensor::from_vector(row_chunk_ptr, {n + 1});
  g.t_row_chunk_ptr_ = Tensor::from_vector(t_row_chunk_ptr, {n + 1});
  g.row_ptr_ = Tensor::from_vector(row_ptr, {n + 1});
  g.edge_src_ = Tensor::from_vector(col_idx, {e});
  g.t_row_ptr_ = Tensor::from_vector(t_row_ptr, {n + 1});
  g.t_edge_dst_ = Tensor::from_vector(t_edge_dst, {e});
  g.t_edge_id_ = Tensor::from_vector(t_edge_id, {e});
  g.edge_dst_ = Tensor::from_vector(edge_dst, {e});
  return g;
}

Graph Graph::with_self_loops() const {
  GraphBuildOptions options;
  options.remove_duplicates = false;  // the graph stays as it is apart from its self loops
  options.add_self_loops = true;
  return from_edges(num_nodes_, sources(), destinations(), options).to(device());
}

Graph Graph::to(Device target) const {
  Graph out = *this;
  if (!row_ptr_.defined()) return out;
  out.row_ptr_ = row_ptr_.to(target);
  out.edge_src_ = edge_src_.to(target);
  out.t_row_ptr_ = t_row_ptr_.to(target);
  out.t_edge_dst_ = t_edge_dst_.to(target);
  out.t_edge_id_ = t_edge_id_.to(target);
  out.edge_dst_ = edge_dst_.to(target);
  out.row_chunk_ptr_ = row_chunk_ptr_.to(target);
  out.t_row_chunk_ptr_ = t_row_chunk_ptr_.to(target);
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
  const std::vector<int32_t> rp = row_ptr_.to_vector<int32_t>();
  std::vector<int32_t> deg(static_cast<size_t>(num_nodes_));
  for (size_t i = 0; i < deg.size(); ++i) deg[i] = rp[i + 1] - rp[i];
  return deg;
}

int64_t Graph::count_self_loops() const {
  const std::vector<int32_t> s = sources(), d = destinations();
  int64_t loops = 0;
  for (size_t e = 0; e < s.size(); ++e) loops += s[e] == d[e];
  return loops;
}

void Graph::validate() const {
  const char* op = "Graph::validate";
  if (!row_ptr_.defined()) {
    GAT_CHECK(num_nodes_ == 0, op, ": ", num_nodes_, " nodes but no index arrays");
    return;
  }
  const Tensor* all[] = {&row_ptr_,  &edge_src_, &t_row_ptr_,    &t_edge_dst_,
                         &t_edge_id_, &edge_dst_, &row_chunk_ptr_, &t_row_chunk_ptr_};
  const char* names[] = {"row_ptr",   "edge_src", "t_row_ptr",     "t_edge_dst",
                         "t_edge_id", "edge_dst", "row_chunk_ptr", "t_row_chunk_ptr"};
  for (int k = 0; k < 8; ++k) {
    check_dtype(op, names[k], *all[k], DType::i32);
    check_dim(op, names[k], *all[k], 1);
    GAT_CHECK(all[k]->device() == row_ptr_.device(), op, ": ", names[k], " is on ",
              device_name(all[k]->device()), ", row_ptr on ", device_name(row_ptr_.device()));
  }
  const int64_t n = num_nodes_, e = edge_src_.numel();
  check_shape(op, "row_ptr", row_ptr_, {n + 1});
  check_shape(op, "t_row_ptr", t_row_ptr_, {n + 1});
  check_shape(op, "t_edge_dst", t_edge_dst_, {e});
  check_shape(op, "t_edge_id", t_edge_id_, {e});
  check_shape(op, "edge_dst", edge_dst_, {e});
  check_shape(op, "row_chunk_ptr", row_chunk_ptr_, {n + 1});
  check_shape(op, "t_row_chunk_ptr", t_row_chunk_ptr_, {n + 1});

  const std::vector<int32_t> rp = row_ptr_.to_vector<int32_t>(), ci = edge_src_.to_vector<int32_t>();
  const std::vector<int32_t> trp = t_row_ptr_.to_vector<int32_t>(),
                             tci = t_edge_dst_.to_vector<int32_t>(),
                             tid = t_edge_id_.to_vector<int32_t>(),
                             ed = edge_dst_.to_vector<int32_t>();
  check_csr(op, rp, ci);
  int64_t max_in = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_in = std::max<int64_t>(max_in, rp[i + 1] - rp[i]);
    for (int64_t k = rp[i]; k < rp[i + 1]; ++k) {
      GAT_CHECK(ed[k] == i, op, ": edge_dst[", k, "] is ", ed[k], " but the edge is in row ", i);
      GAT_CHECK(k == rp[i] || ci[k - 1] <= ci[k], op, ": row ", i, " is not sorted by source at edge ", k,
                " (", ci[k - 1], " then ", ci[k], ")");
    }
  }
  GAT_CHECK(max_in == max_in_degree_, op, ": max_in_degree is ", max_in_degree_, ", computed ", max_in);

  // The transpose: same CSR checks, rows sorted by destination, every edge id exactly once and
  // naming an edge with this source and destination.
  check_csr("Graph::validate (transpose)", trp, tci);
  std::vector<char> seen(static_cast<size_t>(e), 0);
  int64_t max_out = 0;
  for (int64_t j = 0; j < n; ++j) {
    max_out = std::max<int64_t>(max_out, trp[j + 1] - trp[j]);
    for (int64_t k = trp[j]; k < trp[j + 1]; ++k) {
      const int64_t id = tid[k];
      GAT_CHECK(id >= 0 && id < e, op, ": t_edge_id[", k, "] is ", id, ", outside [0, ", e, ")");
      GAT_CHECK(!seen[id], op, ": t_edge_id names edge ", id, " twice (at position ", k, ")");
      seen[id] = 1;
      GAT_CHECK(ci[id] == j && ed[id] == tci[k], op, ": transpose position ", k, " (", j, " -> ",
                tci[k], ") names edge ", id, " which is ", ci[id], " -> ", ed[id]);
      GAT_CHECK(k == trp[j] || tci[k - 1] <= tci[k], op, ": transpose row ", j,
                " is not sorted by destination at position ", k);
    }
  }
  GAT_CHECK(max_out == max_out_degree_, op, ": max_out_degree is ", max_out_degree_, ", computed ",
            max_out);

  // The chunks of long rows, as from_sorted_csr cuts them.
  const int chunk = chunk_edges_for(e, std::max(max_in_degree_, max_out_degree_));
  GAT_CHECK(chunk_edges_ == chunk, op, ": chunk_edges is ", chunk_edges_,
            ", the graph's edge count and longest row give ", chunk);
  const std::vector<int32_t> rcp = chunk_ptr_of(rp, chunk_edges_), trcp = chunk_ptr_of(trp, chunk_edges_);
  GAT_CHECK(row_chunk_ptr_.to_vector<int32_t>() == rcp && num_row_chunks_ == rcp.back(), op,
            ": row_chunk_ptr does not match the rows");
  GAT_CHECK(t_row_chunk_ptr_.to_vector<int32_t>() == trcp && num_t_row_chunks_ == trcp.back(), op,
            ": t_row_chunk_ptr does not match the transpose's rows");
}

}  // namespace gat
