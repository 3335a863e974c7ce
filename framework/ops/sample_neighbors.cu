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
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/detail/neighbor_draws.h"
#include "gat/framework/ops/sample_neighbors.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr long long kMaxEdges = std::numeric_limits<int32_t>::max();

// Device memory of `bytes` for the scope of a kernel entry (freed in stream order).
Tensor scratch(size_t bytes, const char* what) {
  return Tensor::empty({static_cast<int64_t>((bytes + 3) / 4)}, DType::i32, Device::cuda, what);
}

// Runs a CUB device-wide algorithm: `call(temp, temp_bytes)` once to size its temporary storage,
// then with it.
template <class Call>
void run_cub(const Call& call) {
  size_t bytes = 0;
  CUDA_CHECK(call(nullptr, bytes));
  // At least one word: a null pointer would make the second call a size query too.
  const Tensor temp = scratch(bytes > 0 ? bytes : 1, "sample_neighbors cub temp");
  CUDA_CHECK(call(temp.raw_data(), bytes));
}

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

// Item k < Nd is destination k; item Nd + e is edge e's source. Position k orders first
// appearances: a destination comes before every edge, edge e before edge e + 1.
struct ItemsFn {
  const int32_t* dst;        // (Nd,)
  const int32_t* graph_src;  // (E,)
  const int32_t* edge_ids;   // (Es,)
  long long nd;
  int32_t* node;      // (Nd+Es,)
  int32_t* position;  // (Nd+Es,)
  __device__ void operator()(long long k) const {
    node[k] = k < nd ? dst[k] : graph_src[edge_ids[k - nd]];
    position[k] = static_cast<int32_t>(k);
  }
};

// Over the items sorted by node (stably, so each run of one node starts at its first position):
// run_head[i] = i at a run's head, else 0 (a running max then gives every item its run's head);
// is_new[e] = 1 where edge e is the first to name a node that is no destination.
struct HeadsFn {
  const int32_t* node;      // (Nd+Es,) sorted
  const int32_t* position;  // (Nd+Es,) in the sorted order
  long long nd;
  int32_t* run_head;  // (Nd+Es,)
  int32_t* is_new;    // (Es,) zeroed
  __device__ void operator()(long long i) const {
    const bool head = i == 0 || node[i] != node[i - 1];
    run_head[i] = head ? static_cast<int32_t>(i) : 0;
    if (head && position[i] >= nd) is_new[position[i] - nd] = 1;
  }
};

// Every edge's local source: its node's destination index, or Nd + the rank of the node's first
// edge among the new nodes' first edges. The head of each new node's run writes src_nodes.
struct LocalIdsFn {
  const int32_t* node;      // (Nd+Es,) sorted
  const int32_t* position;  // (Nd+Es,)
  const int32_t* run_head;  // (Nd+Es,) after the running max
  const int32_t* new_rank;  // (Es,) exclusive sums of is_new
  long long nd;
  int32_t* col;        // (Es,)
  int32_t* src_nodes;  // (Nd+Es,)
  __device__ void operator()(long long i) const {
    const int32_t head = run_head[i], first = position[head];
    const int32_t local = first < nd ? first : static_cast<int32_t>(nd) + new_rank[first - nd];
    if (position[i] >= nd) col[position[i] - nd] = local;
    if (head == i && first >= nd) src_nodes[local] = node[i];
  }
};

struct CountSourcesFn {
  const int32_t* new_rank;  // (Es,)
  const int32_t* is_new;    // (Es,)
  long long nd, edges;
  int32_t* num_src;  // (1,)
  __device__ void operator()(long long) const {
    num_src[0] = static_cast<int32_t>(nd + (edges > 0 ? new_rank[edges - 1] + is_new[edges - 1] : 0));
  }
};

// (local source, edge id) packed in one key, so that sorting the keys sorts by both.
struct PackFn {
  const int32_t* col;
  const int32_t* edge_ids;
  unsigned long long* keys;  // (Es,)
  __device__ void operator()(long long e) const {
    keys[e] = static_cast<unsigned long long>(col[e]) << 32 | static_cast<uint32_t>(edge_ids[e]);
  }
};

struct UnpackFn {
  const unsigned long long* keys;  // (Es,)
  int32_t* col;
  int32_t* edge_ids;
  __device__ void operator()(long long e) const {
    col[e] = static_cast<int32_t>(keys[e] >> 32);
    edge_ids[e] = static_cast<int32_t>(keys[e] & 0xffffffffu);
  }
};

template <class T>
T* words(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

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
                     Tensor& edge_ids, Tensor& col, Tensor& src_nodes, Tensor& num_src) {
  const long long nd = dst_nodes.numel(), edges = edge_ids.numel(), items = nd + edges;
  if (nd > 0)
    CUDA_CHECK(cudaMemcpyAsync(src_nodes.data<int32_t>(), dst_nodes.data<int32_t>(), nd * sizeof(int32_t),
                               cudaMemcpyDeviceToDevice, cuda::stream()));
  const Tensor is_new = scratch(edges * sizeof(int32_t), "sample_neighbors is_new");      // (Es,)
  const Tensor new_rank = scratch(edges * sizeof(int32_t), "sample_neighbors new_rank");  // (Es,)
  int32_t *fresh = words<int32_t>(is_new), *rank = words<int32_t>(new_rank);
  if (edges > 0) {
    const Tensor node = scratch(items * sizeof(int32_t), "sample_neighbors nodes");  // (Nd+Es,) each pair
    const Tensor position = scratch(items * sizeof(int32_t), "sample_neighbors positions");
    const Tensor sorted_node = scratch(items * sizeof(int32_t), "sample_neighbors sorted nodes");
    const Tensor sorted_position = scratch(items * sizeof(int32_t), "sample_neighbors sorted positions");
    const Tensor run_head = scratch(items * sizeof(int32_t), "sample_neighbors run heads");
    int32_t *n = words<int32_t>(node), *p = words<int32_t>(position), *sn = words<int32_t>(sorted_node),
            *sp = words<int32_t>(sorted_position), *head = words<int32_t>(run_head);
    detail::launch_for_each(
        "sample_neighbors items", items,
        ItemsFn{dst_nodes.data<int32_t>(), edge_src.data<int32_t>(), edge_ids.data<int32_t>(), nd, n, p});
    run_cub([&](void* temp, size_t& bytes) {  // stable: a node's run keeps its positions in order
      return cub::DeviceRadixSort::SortPairs(temp, bytes, n, sn, p, sp, items, 0, 32, cuda::stream());
    });
    cuda::memset_zero(fresh, edges * sizeof(int32_t));
    detail::launch_for_each("sample_neighbors run heads", items, HeadsFn{sn, sp, nd, head, fresh});
    run_cub([&](void* temp, size_t& bytes) {
      return cub::DeviceScan::InclusiveScan(temp, bytes, head, head, ::cuda::maximum<int32_t>{}, items,
                                            cuda::stream());
    });
    run_cub([&](void* temp, size_t& bytes) {
      return cub::DeviceScan::ExclusiveSum(temp, bytes, fresh, rank, edges, cuda::stream());
    });
    detail::launch_for_each(
        "sample_neighbors local ids", items,
        LocalIdsFn{sn, sp, head, rank, nd, col.data<int32_t>(), src_nodes.data<int32_t>()});
  }
  detail::launch_for_each("sample_neighbors source count", 1,
                          CountSourcesFn{rank, fresh, nd, edges, num_src.data<int32_t>()});
  if (edges == 0) return;
  const Tensor keys = scratch(edges * sizeof(unsigned long long), "sample_neighbors row keys");
  const Tensor sorted_keys = scratch(edges * sizeof(unsigned long long), "sample_neighbors sorted row keys");
  unsigned long long *k = words<unsigned long long>(keys), *sk = words<unsigned long long>(sorted_keys);
  detail::launch_for_each("sample_neighbors row keys", edges,
                          PackFn{col.data<int32_t>(), edge_ids.data<int32_t>(), k});
  const int32_t* ends = row_ends.data<int32_t>();
  run_cub([&](void* temp, size_t& bytes) {
    return cub::DeviceSegmentedSort::SortKeys(temp, bytes, k, sk, edges, nd, ends, ends + 1, cuda::stream());
  });
  detail::launch_for_each("sample_neighbors unpack rows", edges,
                          UnpackFn{sk, col.data<int32_t>(), edge_ids.data<int32_t>()});
}

}  // namespace gat::ops::cuda_impl
