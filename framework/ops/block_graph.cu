// block_graph on CUDA: the looped rows from a scan of their lengths; the transpose from a stable
// radix sort of the edges by source (ties stay in edge-id order, so each transpose row is sorted
// by destination, as Graph's counting sort leaves it); the row plans from scans of the rows'
// chunk counts and a stable sort of the uncut rows by length. Every buffer is sized by a bound
// (Es + Nd edges: a row gains one loop at most) and cut to the counts read back at the end.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <limits>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/detail/chunk_edges.h"
#include "gat/framework/ops/block_graph.h"
#include "gat/framework/ops/detail/device_scratch.cuh"
#include "gat/framework/ops/detail/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

using detail::run_cub;
using detail::scratch;
using detail::words;

constexpr int32_t kNoKey = std::numeric_limits<int32_t>::max();  // sorts after every real key

// The counts the Graph keeps on the host, read back in one copy.
enum Count : int {
  kEdges,       // E' = Es - the loops removed + Nd
  kMaxIn,       // the longest row
  kMaxOut,      // the longest transpose row
  kChunkEdges,  // detail::chunk_edges_for(E', the longer of the two)
  kRowChunks,
  kTRowChunks,
  kUncutRows,  // rows of at most kChunkEdges edges
  kTUncutRows,
  kCounts
};

// The first position in sorted [first, first + n) whose value is >= v.
__device__ long long lower_bound(const int32_t* first, long long n, int32_t v) {
  long long at = 0;
  while (n > 0) {
    const long long half = n / 2;
    if (first[at + half] < v) {
      at += half + 1;
      n -= half + 1;
    } else {
      n = half;
    }
  }
  return at;
}

// looped_ptr[i + 1] = row i's length without its loops (i, i), plus one.
struct LoopedLengthsFn {
  const int32_t* row_ptr;  // (Nd+1,)
  const int32_t* col;      // (Es,) rows sorted
  int32_t* looped_ptr;     // (Nd+1,)
  __device__ void operator()(long long i) const {
    const int32_t* row = col + row_ptr[i];
    const long long length = row_ptr[i + 1] - row_ptr[i];
    const auto self = static_cast<int32_t>(i);
    const long long loops = lower_bound(row, length, self + 1) - lower_bound(row, length, self);
    looped_ptr[i + 1] = static_cast<int32_t>(length - loops + 1);
  }
};

// Row i's looped sources: those below i, i, those above i (its own loops dropped); edge_dst i.
struct LoopedRowsFn {
  const int32_t* row_ptr;     // (Nd+1,)
  const int32_t* col;         // (Es,)
  const int32_t* looped_ptr;  // (Nd+1,)
  int32_t* looped_col;        // (E',)
  int32_t* edge_dst;          // (E',)
  __device__ void operator()(long long i) const {
    const auto self = static_cast<int32_t>(i);
    int32_t* out = looped_col + looped_ptr[i];
    bool placed = false;
    for (int32_t e = row_ptr[i]; e < row_ptr[i + 1]; ++e) {
      const int32_t source = col[e];
      if (source == self) continue;
      if (!placed && source > self) {
        *out++ = self;
        placed = true;
      }
      *out++ = source;
    }
    if (!placed) *out = self;
    for (int32_t e = looped_ptr[i]; e < looped_ptr[i + 1]; ++e) edge_dst[e] = self;
  }
};

// The transpose's sort items: edge k's source and id; slots past E' sort last.
struct TransposeKeysFn {
  const int32_t* looped_col;  // (capacity,) the first E' written
  const int32_t* edges;       // &looped_ptr[Nd]: E'
  int32_t* key;               // (capacity,)
  int32_t* id;                // (capacity,)
  __device__ void operator()(long long k) const {
    key[k] = k < *edges ? looped_col[k] : kNoKey;
    id[k] = static_cast<int32_t>(k);
  }
};

// t_edge_dst of the first E' entries; t_row_ptr[j] = the first sorted key >= j (j <= Ns).
struct TransposeFn {
  const int32_t* sorted_key;  // (capacity,)
  const int32_t* t_edge_id;   // (capacity,)
  const int32_t* edge_dst;    // (capacity,)
  const int32_t* edges;       // E'
  long long capacity, ns;
  int32_t* t_edge_dst;  // (capacity,)
  int32_t* t_row_ptr;   // (Ns+1,)
  __device__ void operator()(long long k) const {
    if (k < *edges) t_edge_dst[k] = edge_dst[t_edge_id[k]];
    if (k <= ns)
      t_row_ptr[k] = static_cast<int32_t>(lower_bound(sorted_key, capacity, static_cast<int32_t>(k)));
  }
};

// The longest row either way (item k: row k < Nd, transpose row k < Ns; Nd <= Ns).
struct LongestRowsFn {
  const int32_t* row_ptr;    // (Nd+1,) looped
  const int32_t* t_row_ptr;  // (Ns+1,)
  long long nd;
  int32_t* counts;  // (kCounts,) zeroed
  __device__ void operator()(long long k) const {
    if (k < nd) atomicMax(counts + kMaxIn, row_ptr[k + 1] - row_ptr[k]);
    atomicMax(counts + kMaxOut, t_row_ptr[k + 1] - t_row_ptr[k]);
  }
};

struct ChunkLengthFn {
  const int32_t* edges;  // E'
  int32_t* counts;
  __device__ void operator()(long long) const {
    counts[kEdges] = *edges;
    const int32_t longest = counts[kMaxIn] > counts[kMaxOut] ? counts[kMaxIn] : counts[kMaxOut];
    counts[kChunkEdges] = gat::detail::chunk_edges_for(*edges, longest);
  }
};

// One side's rows (the rows or the transpose's) under chunk length c: chunk_ptr[i + 1] = the
// chunks of row i (ceil(degree / c) above c edges, else none); an uncut row gets the order key
// c - degree (longest first), a cut one kNoKey, and is counted.
struct RowsSide {
  const int32_t* row_ptr;  // (n+1,)
  long long n;
  int32_t* chunk_ptr;  // (n+1,)
  int32_t* order_key;  // (n,)
  int32_t* row_id;     // (n,) i, the sort's values
  Count uncut;
  __device__ void plan(long long i, int32_t* counts) const {
    const int32_t chunk = counts[kChunkEdges], degree = row_ptr[i + 1] - row_ptr[i];
    chunk_ptr[i + 1] = degree > chunk ? (degree + chunk - 1) / chunk : 0;
    order_key[i] = degree <= chunk ? chunk - degree : kNoKey;
    row_id[i] = static_cast<int32_t>(i);
    if (degree <= chunk) atomicAdd(counts + uncut, 1);
  }
};
struct ChunkCountsFn {
  RowsSide rows, t_rows;
  int32_t* counts;
  __device__ void operator()(long long k) const {
    if (k < rows.n) rows.plan(k, counts);
    t_rows.plan(k, counts);
  }
};

// The row that owns each chunk, both sides; and the chunk totals.
struct ChunkRowsFn {
  const int32_t* row_chunk_ptr;    // (Nd+1,)
  const int32_t* t_row_chunk_ptr;  // (Ns+1,)
  long long nd, ns;
  int32_t* row_chunk_row;    // (chunks,)
  int32_t* t_row_chunk_row;  // (transpose chunks,)
  int32_t* counts;
  __device__ void operator()(long long k) const {  // k < max(Ns, 1)
    if (k < nd)
      for (int32_t w = row_chunk_ptr[k]; w < row_chunk_ptr[k + 1]; ++w)
        row_chunk_row[w] = static_cast<int32_t>(k);
    if (k < ns)
      for (int32_t w = t_row_chunk_ptr[k]; w < t_row_chunk_ptr[k + 1]; ++w)
        t_row_chunk_row[w] = static_cast<int32_t>(k);
    if (k == 0) {
      counts[kRowChunks] = row_chunk_ptr[nd];
      counts[kTRowChunks] = t_row_chunk_ptr[ns];
    }
  }
};

Tensor ints(long long n, const char* what) { return Tensor::empty({n}, DType::i32, Device::cuda, what); }

// The running sums of a side's chunk counts (chunk_ptr[1..n]) and its uncut rows by order key.
void plan_side(const RowsSide& side, int32_t* sorted_key, Tensor& order) {
  if (side.n == 0) return;
  run_cub([&](void* temp, size_t& bytes) {
    return cub::DeviceScan::InclusiveSum(temp, bytes, side.chunk_ptr + 1, side.chunk_ptr + 1, side.n,
                                         cuda::stream());
  });
  run_cub([&](void* temp, size_t& bytes) {  // stable: rows of one length stay in index order
    return cub::DeviceRadixSort::SortPairs(temp, bytes, side.order_key, sorted_key, side.row_id,
                                           order.data<int32_t>(), side.n, 0, 32, cuda::stream());
  });
}

}  // namespace

Graph block_graph(const Tensor& row_ptr, const Tensor& col, int64_t num_src) {
  const long long nd = row_ptr.numel() - 1, ns = num_src, capacity = col.numel() + nd;
  const int32_t *rp = row_ptr.data<int32_t>(), *c = col.data<int32_t>();
  GraphArrays g;
  g.num_src_nodes = ns;
  g.num_dst_nodes = nd;
  g.row_ptr = ints(nd + 1, "block row_ptr");
  Tensor looped_col = ints(capacity, "block edge_src"), edge_dst = ints(capacity, "block edge_dst");
  Tensor t_edge_id = ints(capacity, "block t_edge_id"), t_edge_dst = ints(capacity, "block t_edge_dst");
  g.t_row_ptr = ints(ns + 1, "block t_row_ptr");
  int32_t* looped_ptr = g.row_ptr.data<int32_t>();
  const int32_t* edges = looped_ptr + nd;  // E', on the device
  cuda::memset_zero(looped_ptr, sizeof(int32_t));
  detail::launch_for_each("block_graph looped lengths", nd, LoopedLengthsFn{rp, c, looped_ptr});
  if (nd > 0)
    run_cub([&](void* temp, size_t& bytes) {
      return cub::DeviceScan::InclusiveSum(temp, bytes, looped_ptr + 1, looped_ptr + 1, nd, cuda::stream());
    });
  detail::launch_for_each(
      "block_graph looped rows", nd,
      LoopedRowsFn{rp, c, looped_ptr, looped_col.data<int32_t>(), edge_dst.data<int32_t>()});

  const Tensor key = scratch(capacity * sizeof(int32_t), "block_graph transpose keys");
  const Tensor id = scratch(capacity * sizeof(int32_t), "block_graph edge ids");
  const Tensor sorted_key = scratch(capacity * sizeof(int32_t), "block_graph sorted transpose keys");
  detail::launch_for_each(
      "block_graph transpose keys", capacity,
      TransposeKeysFn{looped_col.data<int32_t>(), edges, words<int32_t>(key), words<int32_t>(id)});
  if (capacity > 0)
    run_cub([&](void* temp, size_t& bytes) {  // stable: a source's edges stay in edge-id order
      return cub::DeviceRadixSort::SortPairs(temp, bytes, words<int32_t>(key), words<int32_t>(sorted_key),
                                             words<int32_t>(id), t_edge_id.data<int32_t>(), capacity, 0, 32,
                                             cuda::stream());
    });
  detail::launch_for_each(
      "block_graph transpose", (capacity > ns ? capacity : ns) + 1,
      TransposeFn{words<int32_t>(sorted_key), t_edge_id.data<int32_t>(), edge_dst.data<int32_t>(), edges,
                  capacity, ns, t_edge_dst.data<int32_t>(), g.t_row_ptr.data<int32_t>()});

  const Tensor counts = ints(kCounts, "block_graph counts");
  int32_t* n = counts.data<int32_t>();
  cuda::memset_zero(n, kCounts * sizeof(int32_t));
  detail::launch_for_each("block_graph longest rows", ns,
                          LongestRowsFn{looped_ptr, g.t_row_ptr.data<int32_t>(), nd, n});
  detail::launch_for_each("block_graph chunk length", 1, ChunkLengthFn{edges, n});
  RowPlans& p = g.plans;
  p.row_chunk_ptr = ints(nd + 1, "block row_chunk_ptr");
  p.t_row_chunk_ptr = ints(ns + 1, "block t_row_chunk_ptr");
  Tensor row_chunk_row = ints(capacity, "block row_chunk_row"),
         t_row_chunk_row = ints(capacity, "block t_row_chunk_row");
  Tensor row_order = ints(nd, "block row_order"), t_row_order = ints(ns, "block t_row_order");
  const Tensor order_key = scratch((nd + ns) * sizeof(int32_t), "block_graph row order keys");
  const Tensor row_id = scratch((nd + ns) * sizeof(int32_t), "block_graph row ids");
  const Tensor sorted_order_key = scratch((nd + ns) * sizeof(int32_t), "block_graph sorted row order keys");
  const RowsSide rows{
      looped_ptr, nd, p.row_chunk_ptr.data<int32_t>(), words<int32_t>(order_key), words<int32_t>(row_id),
      kUncutRows};
  const RowsSide t_rows{g.t_row_ptr.data<int32_t>(),       ns,
                        p.t_row_chunk_ptr.data<int32_t>(), words<int32_t>(order_key) + nd,
                        words<int32_t>(row_id) + nd,       kTUncutRows};
  cuda::memset_zero(p.row_chunk_ptr.raw_data(), sizeof(int32_t));
  cuda::memset_zero(p.t_row_chunk_ptr.raw_data(), sizeof(int32_t));
  detail::launch_for_each("block_graph chunk counts", ns, ChunkCountsFn{rows, t_rows, n});
  plan_side(rows, words<int32_t>(sorted_order_key), row_order);
  plan_side(t_rows, words<int32_t>(sorted_order_key) + nd, t_row_order);
  detail::launch_for_each("block_graph chunk rows", ns > 0 ? ns : 1,
                          ChunkRowsFn{p.row_chunk_ptr.data<int32_t>(), p.t_row_chunk_ptr.data<int32_t>(), nd,
                                      ns, row_chunk_row.data<int32_t>(), t_row_chunk_row.data<int32_t>(), n});

  const std::vector<int32_t> count = counts.to_vector<int32_t>();  // the one wait
  const int64_t e = count[kEdges];
  g.edge_src = looped_col.rows(0, e);
  g.edge_dst = edge_dst.rows(0, e);
  g.t_edge_dst = t_edge_dst.rows(0, e);
  g.t_edge_id = t_edge_id.rows(0, e);
  p.max_in_degree = count[kMaxIn];
  p.max_out_degree = count[kMaxOut];
  p.chunk_edges = count[kChunkEdges];
  p.num_row_chunks = count[kRowChunks];
  p.num_t_row_chunks = count[kTRowChunks];
  p.row_chunk_row = row_chunk_row.rows(0, count[kRowChunks]);
  p.t_row_chunk_row = t_row_chunk_row.rows(0, count[kTRowChunks]);
  p.row_order = row_order.rows(0, count[kUncutRows]);
  p.t_row_order = t_row_order.rows(0, count[kTUncutRows]);
  g.num_self_loops = nd;  // one per destination, as with_self_loops leaves them
  g.one_self_loop_per_node = true;
  return Graph::from_arrays(std::move(g));
}

}  // namespace gat::ops::cuda_impl
