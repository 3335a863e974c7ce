// sample_neighbors on CUDA: one thread per destination draws its row (each node's draws are
// independent Philox counters); the local ids come from one radix sort of the destinations and
// the drawn edges' sources by node id, which puts each node's first appearance at the head of its
// run; each row is then sorted by (local source, edge id) with a segmented sort.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cuda/functional>
#include <limits>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/detail/device_scratch.cuh"
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/detail/neighbor_draws.h"
#include "gat/framework/ops/sample_neighbors.h"

namespace gat::ops::cuda_impl {

namespace {

using detail::run_cub;
using detail::scratch;
using detail::words;

constexpr long long kMaxEdges = std::numeric_limits<int32_t>::max();

struct CountFn {
  const int32_t* row_ptr;  // (N+1,)
  const int32_t* dst;      // (Nd,)
  long long fanout;
  bool replace;
  long long* counts;  // (Nd,)
  __device__ void operator()(long long i) const {
    const int32_t v = dst[i];
    counts[i] = detail::sampled_count(row_ptr[v + 1] - row_ptr[v], fanout, replace);
  }
};

struct RowEndsFn {
  const long long* sums;  // (Nd,) inclusive sums of the counts
  int32_t* row_ends;      // (Nd+1,)
  __device__ void operator()(long long i) const {
    if (i == 0) row_ends[0] = 0;
    row_ends[i + 1] = static_cast<int32_t>(sums[i] < kMaxEdges ? sums[i] : kMaxEdges);
  }
};

struct PickFn {
  const int32_t* row_ptr;   // (N+1,)
  const int32_t* dst;       // (Nd,)
  const int32_t* row_ends;  // (Nd+1,)
  NeighborDraw draw;
  int32_t* edge_ids;  // (Es,)
  __device__ void operator()(long long i) const {
    const int32_t v = dst[i];
    int32_t* row = edge_ids + row_ends[i];
    const long long count = row_ends[i + 1] - row_ends[i];
    detail::pick_edges(draw.seed, draw.stream, v, row_ptr[v + 1] - row_ptr[v], count, draw.replace, row);
    for (long long k = 0; k < count; ++k) row[k] += row_ptr[v];
  }
};

// The buffers hold `capacity` edges, of which the first Es = row_ends[Nd] were drawn: Es is on
// the device only (the op reads it once, with the source count, at the end).
//
// Item k < Nd is destination k; item Nd + e is edge e's source, or kUnused for a slot e >= Es.
// Position k orders first appearances: a destination comes before every edge, edge e before
// edge e + 1.
constexpr int32_t kUnused = -1;  // below every node: the unused slots sort first, as one run
struct ItemsFn {
  const int32_t* dst;        // (Nd,)
  const int32_t* graph_src;  // (E,)
  const int32_t* edge_ids;   // (capacity,)
  const int32_t* edges;      // &row_ends[Nd]: Es
  long long nd;
  int32_t* node;      // (Nd+capacity,)
  int32_t* position;  // (Nd+capacity,)
  __device__ void operator()(long long k) const {
    node[k] = k < nd ? dst[k] : (k - nd < *edges ? graph_src[edge_ids[k - nd]] : kUnused);
    position[k] = static_cast<int32_t>(k);
  }
};

// Over the items sorted by node (stably, so each run of one node starts at its first position):
// run_head[i] = i at a run's head, else 0 (a running max then gives every item its run's head);
// is_new[e] = 1 where edge e is the first to name a node that is no destination.
struct HeadsFn {
  const int32_t* node;      // (Nd+capacity,) sorted
  const int32_t* position;  // (Nd+capacity,) in the sorted order
  long long nd;
  int32_t* run_head;  // (Nd+capacity,)
  int32_t* is_new;    // (capacity,) zeroed
  __device__ void operator()(long long i) const {
    const bool head = i == 0 || node[i] != node[i - 1];
    run_head[i] = head ? static_cast<int32_t>(i) : 0;
    if (head && position[i] >= nd && node[i] != kUnused) is_new[position[i] - nd] = 1;
  }
};

// Every edge's local source: its node's destination index, or Nd + the rank of the node's first
// edge among the new nodes' first edges. The head of each new node's run writes src_nodes.
struct LocalIdsFn {
  const int32_t* node;      // (Nd+capacity,) sorted
  const int32_t* position;  // (Nd+capacity,)
  const int32_t* run_head;  // (Nd+capacity,) after the running max
  const int32_t* new_rank;  // (capacity,) exclusive sums of is_new
  long long nd;
  int32_t* col;        // (capacity,)
  int32_t* src_nodes;  // (Nd+capacity,)
  __device__ void operator()(long long i) const {
    if (node[i] == kUnused) return;
    const int32_t head = run_head[i], first = position[head];
    const int32_t local = first < nd ? first : static_cast<int32_t>(nd) + new_rank[first - nd];
    if (position[i] >= nd) col[position[i] - nd] = local;
    if (head == i && first >= nd) src_nodes[local] = node[i];
  }
};

// sizes = (Es, Ns). The unused slots are no new node, so the last slot's rank counts them all.
struct SizesFn {
  const int32_t* new_rank;  // (capacity,)
  const int32_t* is_new;    // (capacity,)
  const int32_t* edges;     // &row_ends[Nd]: Es
  long long nd, capacity;
  int32_t* sizes;  // (2,)
  __device__ void operator()(long long) const {
    sizes[0] = *edges;
    sizes[1] = static_cast<int32_t>(nd + (capacity > 0 ? new_rank[capacity - 1] + is_new[capacity - 1] : 0));
  }
};

// (local source, edge id) packed in one key, so that sorting the keys sorts by both.
// Over the drawn edges e < Es only: the rows' segments end there.
struct PackFn {
  const int32_t* col;
  const int32_t* edge_ids;
  const int32_t* edges;      // &row_ends[Nd]: Es
  unsigned long long* keys;  // (capacity,)
  __device__ void operator()(long long e) const {
    if (e >= *edges) return;
    keys[e] = static_cast<unsigned long long>(col[e]) << 32 | static_cast<uint32_t>(edge_ids[e]);
  }
};

struct UnpackFn {
  const unsigned long long* keys;  // (capacity,)
  const int32_t* edges;            // &row_ends[Nd]: Es
  int32_t* col;
  int32_t* edge_ids;
  __device__ void operator()(long long e) const {
    if (e >= *edges) return;
    col[e] = static_cast<int32_t>(keys[e] >> 32);
    edge_ids[e] = static_cast<int32_t>(keys[e] & 0xffffffffu);
  }
};

}  // namespace

void sampled_row_ends(const Tensor& row_ptr, const Tensor& dst_nodes, const NeighborDraw& draw,
                      Tensor& row_ends) {
  const long long nd = dst_nodes.numel();
  if (nd == 0) {
    cuda::memset_zero(row_ends.raw_data(), sizeof(int32_t));
    return;
  }
  const Tensor counts = scratch(nd * sizeof(long long), "sample_neighbors counts");  // (Nd,) i64
  long long* c = words<long long>(counts);
  detail::launch_for_each(
      "sample_neighbors counts", nd,
      CountFn{row_ptr.data<int32_t>(), dst_nodes.data<int32_t>(), draw.fanout, draw.replace, c});
  run_cub([&](void* temp, size_t& bytes) {
    return cub::DeviceScan::InclusiveSum(temp, bytes, c, c, nd, cuda::stream());
  });
  detail::launch_for_each("sample_neighbors row ends", nd, RowEndsFn{c, row_ends.data<int32_t>()});
}

void sample_edges(const Tensor& row_ptr, const Tensor& dst_nodes, const Tensor& row_ends,
                  const NeighborDraw& draw, Tensor& edge_ids) {
  if (edge_ids.numel() == 0) return;
  detail::launch_for_each("sample_neighbors draws", dst_nodes.numel(),
                          PickFn{row_ptr.data<int32_t>(), dst_nodes.data<int32_t>(), row_ends.data<int32_t>(),
                                 draw, edge_ids.data<int32_t>()});
}

void relabel_sources(const Tensor& edge_src, const Tensor& dst_nodes, const Tensor& row_ends,
                     Tensor& edge_ids, Tensor& col, Tensor& src_nodes, Tensor& sizes) {
  const long long nd = dst_nodes.numel(), capacity = edge_ids.numel(), items = nd + capacity;
  const int32_t* ends = row_ends.data<int32_t>();  // (Nd+1,)
  const int32_t* edges = ends + nd;                // Es, on the device
  if (nd > 0)
    CUDA_CHECK(cudaMemcpyAsync(src_nodes.data<int32_t>(), dst_nodes.data<int32_t>(), nd * sizeof(int32_t),
                               cudaMemcpyDeviceToDevice, cuda::stream()));
  const Tensor is_new = scratch(capacity * sizeof(int32_t), "sample_neighbors is_new");      // (capacity,)
  const Tensor new_rank = scratch(capacity * sizeof(int32_t), "sample_neighbors new_rank");  // (capacity,)
  int32_t *fresh = words<int32_t>(is_new), *rank = words<int32_t>(new_rank);
  if (capacity > 0) {
    const Tensor node = scratch(items * sizeof(int32_t), "sample_neighbors nodes");  // (Nd+capacity,) each
    const Tensor position = scratch(items * sizeof(int32_t), "sample_neighbors positions");
    const Tensor sorted_node = scratch(items * sizeof(int32_t), "sample_neighbors sorted nodes");
    const Tensor sorted_position = scratch(items * sizeof(int32_t), "sample_neighbors sorted positions");
    const Tensor run_head = scratch(items * sizeof(int32_t), "sample_neighbors run heads");
    int32_t *n = words<int32_t>(node), *p = words<int32_t>(position), *sn = words<int32_t>(sorted_node),
            *sp = words<int32_t>(sorted_position), *head = words<int32_t>(run_head);
    detail::launch_for_each("sample_neighbors items", items,
                            ItemsFn{dst_nodes.data<int32_t>(), edge_src.data<int32_t>(),
                                    edge_ids.data<int32_t>(), edges, nd, n, p});
    run_cub([&](void* temp, size_t& bytes) {  // stable: a node's run keeps its positions in order
      return cub::DeviceRadixSort::SortPairs(temp, bytes, n, sn, p, sp, items, 0, 32, cuda::stream());
    });
    cuda::memset_zero(fresh, capacity * sizeof(int32_t));
    detail::launch_for_each("sample_neighbors run heads", items, HeadsFn{sn, sp, nd, head, fresh});
    run_cub([&](void* temp, size_t& bytes) {
      return cub::DeviceScan::InclusiveScan(temp, bytes, head, head, ::cuda::maximum<int32_t>{}, items,
                                            cuda::stream());
    });
    run_cub([&](void* temp, size_t& bytes) {
      return cub::DeviceScan::ExclusiveSum(temp, bytes, fresh, rank, capacity, cuda::stream());
    });
    detail::launch_for_each(
        "sample_neighbors local ids", items,
        LocalIdsFn{sn, sp, head, rank, nd, col.data<int32_t>(), src_nodes.data<int32_t>()});
  }
  detail::launch_for_each("sample_neighbors sizes", 1,
                          SizesFn{rank, fresh, edges, nd, capacity, sizes.data<int32_t>()});
  if (capacity == 0) return;
  const Tensor keys = scratch(capacity * sizeof(unsigned long long), "sample_neighbors row keys");
  const Tensor sorted_keys =
      scratch(capacity * sizeof(unsigned long long), "sample_neighbors sorted row keys");
  unsigned long long *k = words<unsigned long long>(keys), *sk = words<unsigned long long>(sorted_keys);
  detail::launch_for_each("sample_neighbors row keys", capacity,
                          PackFn{col.data<int32_t>(), edge_ids.data<int32_t>(), edges, k});
  run_cub([&](void* temp, size_t& bytes) {
    return cub::DeviceSegmentedSort::SortKeys(temp, bytes, k, sk, capacity, nd, ends, ends + 1,
                                              cuda::stream());
  });
  detail::launch_for_each("sample_neighbors unpack rows", capacity,
                          UnpackFn{sk, edges, col.data<int32_t>(), edge_ids.data<int32_t>()});
}

}  // namespace gat::ops::cuda_impl
