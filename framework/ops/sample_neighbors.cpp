#include "gat/framework/ops/sample_neighbors.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gat/framework/detail/host_parallel.h"
#include "gat/framework/ops/detail/neighbor_draws.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

constexpr int64_t kMaxEdges = std::numeric_limits<int32_t>::max();  // 32-bit edge ids

// Refuses a block of nd destinations and `edges` edges that 32-bit ids cannot number.
void check_block_size(int64_t nd, int64_t edges) {
  GAT_CHECK(
      edges < kMaxEdges, "sample_neighbors: a block of ", edges,
      " edges or more does not fit 32-bit edge ids (at most 2^31 - 2): lower the batch size or the fanouts");
  GAT_CHECK(nd + edges <= kMaxEdges, "sample_neighbors: ", nd, " destinations and ", edges,
            " edges do not fit 32-bit local ids (at most 2^31 - 1 together)");
}

// Past it the edge count is read: a bound far above the count (a fanout above most degrees)
// would otherwise hold memory for nothing. 2^24 edges, 64 MB of ids.
constexpr int64_t kMaxUnreadEdges = int64_t{1} << 24;

// A bound of a hop's edge count over nd destinations that the buffers may take, or -1 where the
// count must be read: a destination keeps at most `fanout` edges. Fanout -1 keeps them all: no
// bound below the graph's. (Not min(nd * fanout, E), which holds only for distinct destinations:
// a caller's repeated destination then wrote past the buffers.)
int64_t unread_edge_bound(int64_t nd, const NeighborDraw& draw) {
  if (draw.fanout < 0 || (draw.fanout > 0 && nd > kMaxUnreadEdges / draw.fanout)) return -1;
  const int64_t bound = nd * draw.fanout;
  return bound <= kMaxUnreadEdges && nd + bound <= kMaxEdges ? bound : -1;
}

// On the CPU, where it costs one pass over dst_nodes: every destination in [0, N), and its row
// [row_ptr[v], row_ptr[v+1]) inside [0, E] and in order. The kernels read those rows unchecked: an
// id out of range read memory out of bounds (a crash, or a block of garbage); a decreasing row
// asked for a buffer of billions of edges. (On CUDA the caller checks them: NeighborSampler does
// its seeds, and each later hop's destinations are nodes the op itself found.)
void check_destinations(const Tensor& row_ptr, const Tensor& edge_src, const Tensor& dst_nodes) {
  if (row_ptr.device() != Device::cpu) return;
  const int64_t n = row_ptr.numel() - 1, e = edge_src.numel();
  const int32_t* rp = row_ptr.data<int32_t>();     // (N+1,)
  const int32_t* dst = dst_nodes.data<int32_t>();  // (Nd,)
  const int64_t bad = gat::detail::first_index_where(dst_nodes.numel(), [&](int64_t i) {
    const int64_t v = dst[i];
    return v < 0 || v >= n || rp[v] < 0 || rp[v] > rp[v + 1] || rp[v + 1] > e;
  });
  if (bad == dst_nodes.numel()) return;
  const int64_t v = dst[bad];
  GAT_CHECK(v >= 0 && v < n, "sample_neighbors: dst_nodes[", bad, "] is ", v, ", outside [0, ", n, ")");
  GAT_FAIL("sample_neighbors: dst_nodes[", bad, "] is node ", v, ", whose row [", rp[v], ", ", rp[v + 1],
           ") of row_ptr is not inside [0, ", e, "] in order");
}

}  // namespace

namespace cpu_impl {

void sampled_row_ends(const Tensor& row_ptr, const Tensor& dst_nodes, const NeighborDraw& draw,
                      Tensor& row_ends) {
  const int32_t* rp = row_ptr.data<int32_t>();     // (N+1,)
  const int32_t* dst = dst_nodes.data<int32_t>();  // (Nd,)
  int32_t* ends = row_ends.data<int32_t>();        // (Nd+1,)
  int64_t sum = 0;
  ends[0] = 0;
  for (int64_t i = 0; i < dst_nodes.numel(); ++i) {
    sum += detail::sampled_count(int64_t{rp[dst[i] + 1]} - rp[dst[i]], draw.fanout, draw.replace);
    ends[i + 1] = static_cast<int32_t>(std::min(sum, kMaxEdges));
  }
}

void sample_edges(const Tensor& row_ptr, const Tensor& dst_nodes, const Tensor& row_ends,
                  const NeighborDraw& draw, Tensor& edge_ids) {
  const int32_t* rp = row_ptr.data<int32_t>();     // (N+1,)
  const int32_t* dst = dst_nodes.data<int32_t>();  // (Nd,)
  const int32_t* ends = row_ends.data<int32_t>();  // (Nd+1,)
  int32_t* ids = edge_ids.data<int32_t>();         // (Es,)
  const int64_t nd = dst_nodes.numel();
#pragma omp parallel for schedule(dynamic, 256) if (edge_ids.numel() > ::gat::detail::kParallelItems)
  for (int64_t i = 0; i < nd; ++i) {
    const int32_t v = dst[i];
    int32_t* row = ids + ends[i];
    const int64_t count = ends[i + 1] - ends[i];
    detail::pick_edges(draw.seed, draw.stream, v, int64_t{rp[v + 1]} - rp[v], count, draw.replace, row);
    for (int64_t k = 0; k < count; ++k) row[k] += rp[v];
  }
}

void relabel_sources(const Tensor& edge_src, const Tensor& dst_nodes, const Tensor& row_ends,
                     Tensor& edge_ids, Tensor& col, Tensor& src_nodes, Tensor& sizes) {
  const int32_t* graph_src = edge_src.data<int32_t>();  // (E,)
  const int32_t* dst = dst_nodes.data<int32_t>();       // (Nd,)
  const int32_t* ends = row_ends.data<int32_t>();       // (Nd+1,)
  int32_t* ids = edge_ids.data<int32_t>();              // (capacity,) the first Es drawn
  int32_t* local_src = col.data<int32_t>();             // (capacity,)
  int32_t* nodes = src_nodes.data<int32_t>();           // (Nd+capacity,)
  const int64_t nd = dst_nodes.numel(), edges = ends[nd];
  // Local ids: the destinations first, then each new source where an edge first names it.
  std::unordered_map<int32_t, int32_t> local;
  local.reserve(static_cast<size_t>(nd + edges));
  for (int64_t i = 0; i < nd; ++i) {
    local.emplace(dst[i], static_cast<int32_t>(i));
    nodes[i] = dst[i];
  }
  int64_t ns = nd;
  for (int64_t e = 0; e < edges; ++e) {
    const int32_t src = graph_src[ids[e]];
    const auto [it, added] = local.emplace(src, static_cast<int32_t>(ns));
    if (added) nodes[ns++] = src;
    local_src[e] = it->second;
  }
  sizes.data<int32_t>()[0] = static_cast<int32_t>(edges);
  sizes.data<int32_t>()[1] = static_cast<int32_t>(ns);
  // Each row sorted by local source (the Graph's edge order), then by edge id.
  ::gat::detail::FirstException failure;
#pragma omp parallel for schedule(dynamic, 256) if (edges > ::gat::detail::kParallelItems)
  for (int64_t i = 0; i < nd; ++i) {
    failure.capture([&] {
      std::vector<std::pair<int32_t, int32_t>> row;  // (local source, edge id)
      row.reserve(static_cast<size_t>(ends[i + 1] - ends[i]));
      for (int32_t e = ends[i]; e < ends[i + 1]; ++e) row.emplace_back(local_src[e], ids[e]);
      std::sort(row.begin(), row.end());
      for (int32_t e = ends[i]; e < ends[i + 1]; ++e) std::tie(local_src[e], ids[e]) = row[e - ends[i]];
    });
  }
  failure.rethrow();
}

}  // namespace cpu_impl

namespace kernels {

void sampled_row_ends(const Tensor& row_ptr, const Tensor& dst_nodes, const NeighborDraw& draw,
                      Tensor& row_ends) {
  if (row_ptr.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::sampled_row_ends(row_ptr, dst_nodes, draw, row_ends));
  cpu_impl::sampled_row_ends(row_ptr, dst_nodes, draw, row_ends);
}

void sample_edges(const Tensor& row_ptr, const Tensor& dst_nodes, const Tensor& row_ends,
                  const NeighborDraw& draw, Tensor& edge_ids) {
  if (row_ptr.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::sample_edges(row_ptr, dst_nodes, row_ends, draw, edge_ids));
  cpu_impl::sample_edges(row_ptr, dst_nodes, row_ends, draw, edge_ids);
}

void relabel_sources(const Tensor& edge_src, const Tensor& dst_nodes, const Tensor& row_ends,
                     Tensor& edge_ids, Tensor& col, Tensor& src_nodes, Tensor& sizes) {
  if (edge_src.is_cuda())
    return GAT_CUDA_CALL(
        cuda_impl::relabel_sources(edge_src, dst_nodes, row_ends, edge_ids, col, src_nodes, sizes));
  cpu_impl::relabel_sources(edge_src, dst_nodes, row_ends, edge_ids, col, src_nodes, sizes);
}

}  // namespace kernels

SampledLayer sample_neighbors(const Tensor& row_ptr, const Tensor& edge_src, const Tensor& dst_nodes,
                              const NeighborDraw& draw) {
  constexpr const char* op = "sample_neighbors";
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"row_ptr", &row_ptr},
                                {"edge_src", &edge_src},
                                {"dst_nodes", &dst_nodes}}) {
    check_dtype(op, name, *t, DType::i32);
    check_dim(op, name, *t, 1);
  }
  check_same(op, "row_ptr", row_ptr, "edge_src", edge_src);
  check_same(op, "row_ptr", row_ptr, "dst_nodes", dst_nodes);
  GAT_CHECK(row_ptr.numel() >= 1, op, ": row_ptr is empty (needs N+1 entries)");
  GAT_CHECK(draw.fanout >= -1, op, ": fanout ", draw.fanout, " is below -1 (-1 keeps every in-edge)");
  check_destinations(row_ptr, edge_src, dst_nodes);
  const Device device = row_ptr.device();
  const int64_t nd = dst_nodes.numel();
  SampledLayer out;
  out.row_ptr = Tensor::empty({nd + 1}, DType::i32, device, "sampled row_ptr");
  kernels::sampled_row_ends(row_ptr, dst_nodes, draw, out.row_ptr);
  // The buffers hold `capacity` edges: on CUDA a bound of the count, so that the host need not
  // wait for it, or the count itself; on the CPU, where reading it costs nothing, the count.
  int64_t capacity = device == Device::cpu ? -1 : unread_edge_bound(nd, draw);
  if (capacity < 0) {
    capacity = static_cast<int64_t>(out.row_ptr.rows(nd, nd + 1).item());  // waits for a CUDA device
    check_block_size(nd, capacity);
  }
  Tensor edge_ids = Tensor::empty({capacity}, DType::i32, device, "sampled edge_ids");
  kernels::sample_edges(row_ptr, dst_nodes, out.row_ptr, draw, edge_ids);
  Tensor col = Tensor::empty({capacity}, DType::i32, device, "sampled col");
  Tensor src_nodes = Tensor::empty({nd + capacity}, DType::i32, device, "sampled src_nodes");
  Tensor sizes = Tensor::empty({2}, DType::i32, device, "sampled sizes");
  kernels::relabel_sources(edge_src, dst_nodes, out.row_ptr, edge_ids, col, src_nodes, sizes);
  const std::vector<int32_t> es_ns = sizes.to_vector<int32_t>();  // the hop's one wait on CUDA
  out.col = col.rows(0, es_ns[0]);
  out.edge_ids = edge_ids.rows(0, es_ns[0]);
  out.src_nodes = src_nodes.rows(0, es_ns[1]);
  return out;
}

}  // namespace gat::ops
