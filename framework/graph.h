// Graph: directed graph in CSR form by DESTINATION, plus its transpose (CSR by source).
//
// Edges go from a set of num_src_nodes() sources to a set of num_dst_nodes() destinations. A
// graph on one node set has the two equal (from_edges(num_nodes, ...)); a bipartite graph
// (from_edges(num_src, num_dst, ...), is_bipartite() when the counts differ) has source j and
// destination i name different nodes even when j == i, except for the self loops of GATConv's
// rule (PyG's): (i, i) for i < min(Ns, Nd), the nodes both sets share by index.
//
// For every destination node i, its incoming edges are e in [row_ptr[i], row_ptr[i+1]), and
// edge_src[e] is the SOURCE of edge e. Within a row, edges are sorted by source; the edge index e
// (0..E-1) in this order is THE edge id used by every per-edge tensor (edge scores (E, H),
// attention weights (E, H)).
//
// The transpose lists, for every source node j, its outgoing edges in [t_row_ptr[j],
// t_row_ptr[j+1]), sorted by destination: t_edge_dst[k] is the destination and t_edge_id[k] the
// edge id. Backward passes gather over it in this fixed order, so no float atomics are needed
// and results are bitwise reproducible.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "gat/framework/tensor.h"

namespace gat {

struct GraphBuildOptions {
  bool symmetrize = false;         // add the reverse of every edge (one node set only)
  bool remove_duplicates = true;   // keep one copy of each (src, dst)
  bool remove_self_loops = false;  // drop every (i, i)
  bool add_self_loops = false;     // then add (i, i) for every i < min(Ns, Nd) (after removing
                                   // existing ones): every node of a graph on one node set
  // Store the offsets (row_ptr, t_row_ptr, t_edge_id) as i64 whatever the edge count: for tests
  // of the wide path on graphs that fit a test machine, and for callers who want one code path.
  // A graph of 2^31 edges or more has i64 offsets anyway.
  bool wide_offsets = false;
};

// The most edges a graph with i32 offsets holds (2^31 - 1): row_ptr[Nd] = E must fit.
constexpr int64_t kMaxNarrowEdges = 2147483647;
// The most edges Graph::from_edges sorts (2^32 - 1, with symmetrize the reverses counted): its
// sorts count in 32 bits.
constexpr int64_t kMaxSortedEdges = 4294967295;
// The dtype of the offsets (row pointers and edge ids) of a graph of num_edges edges: i32 when
// num_edges <= kMaxNarrowEdges and not `wide`, else i64. Every graph's offsets are chosen here.
DType offset_dtype_for(int64_t num_edges, bool wide);
// i32 offsets of the same values, on the same device: `offsets` itself when i32; i64 ones (a
// graph's wide offsets, of any edge count) narrowed when their last value is at most
// kMaxNarrowEdges, else a gat::Error naming `op`, for a reader that takes 32-bit offsets only.
Tensor narrow_offsets(const char* op, const Tensor& offsets);

// The chunk plans and row orders of a CSR by destination and its transpose: what the GPU kernels
// need beside the indices. Members as Graph's accessors of the same names.
// The chunk pointers stay i32 whatever the offsets: a row of d > chunk_edges edges has at most
// 2 d / chunk_edges chunks, and chunk_edges is 512 from 2^20 edges on, so 2^31 chunks need 2^39
// edges (plan_rows checks it). Chunk rows and row orders are node ids, i32 like every node id.
struct RowPlans {
  int64_t max_in_degree = 0, max_out_degree = 0;
  int chunk_edges = 0;
  int64_t num_row_chunks = 0, num_t_row_chunks = 0;
  Tensor row_chunk_ptr, t_row_chunk_ptr;  // (Nd+1,), (Ns+1,) i32
  Tensor row_chunk_row, t_row_chunk_row;  // (num_row_chunks,), (num_t_row_chunks,) i32
  Tensor row_order, t_row_order;          // i32
};
// The plans of a graph of num_edges edges from its row pointers (CPU tensors (Nd+1,) and (Ns+1,)
// of the CSR by destination and of its transpose, both i32 or both i64): CPU tensors, as Graph
// builds them.
RowPlans plan_rows(int64_t num_edges, const Tensor& row_ptr, const Tensor& t_row_ptr);

// Every array and count of a Graph (members as its accessors of the same names), for a graph
// whose arrays were built elsewhere, e.g. sorted by PyTorch on the device (Graph::from_arrays).
struct GraphArrays {
  int64_t num_src_nodes = 0, num_dst_nodes = 0;
  Tensor row_ptr, edge_src, edge_dst;       // (Nd+1,) offsets, (E,), (E,) i32
  Tensor t_row_ptr, t_edge_dst, t_edge_id;  // (Ns+1,) offsets, (E,) i32, (E,) offsets
  RowPlans plans;
  int64_t num_self_loops = 0;
  bool one_self_loop_per_node = false;
};

class Graph {
 public:
  Graph() = default;

  // Takes every array as given, on their device, without checking them: validate() does (it
  // copies them to the host). For arrays a front end builds itself (the PyTorch package). Throws a
  // gat::Error for i64 offsets on CUDA, as to() does.
  static Graph from_arrays(GraphArrays arrays);

  // Builds from an edge list src[k] -> dst[k] of sources in [0, num_src) and destinations in
  // [0, num_dst). Throws gat::Error when an index is outside its range (naming the edge and the
  // value), the lists differ in length, the edges (with symmetrize, their reverses too) are more
  // than 2^32 - 1 (the sorts' counts are 32-bit), or options.symmetrize is asked of a bipartite
  // graph. The offsets are offset_dtype_for(E, options.wide_offsets). Every stage runs in
  // parallel; the graph is the same for any number of threads.
  static Graph from_edges(int64_t num_src, int64_t num_dst, const std::vector<int32_t>& src,
                          const std::vector<int32_t>& dst, const GraphBuildOptions& options = {});
  // The same, freeing src and dst as soon as they are read (less memory at the peak).
  static Graph from_edges(int64_t num_src, int64_t num_dst, std::vector<int32_t>&& src,
                          std::vector<int32_t>&& dst, const GraphBuildOptions& options = {});
  // A graph on one node set of num_nodes nodes.
  static Graph from_edges(int64_t num_nodes, const std::vector<int32_t>& src, const std::vector<int32_t>& dst,
                          const GraphBuildOptions& options = {}) {
    return from_edges(num_nodes, num_nodes, src, dst, options);
  }
  static Graph from_edges(int64_t num_nodes, std::vector<int32_t>&& src, std::vector<int32_t>&& dst,
                          const GraphBuildOptions& options = {}) {
    return from_edges(num_nodes, num_nodes, std::move(src), std::move(dst), options);
  }
  // Takes a CSR by destination as given (validated; rows are sorted by source if needed): Nd =
  // row_ptr.size() - 1 destinations, sources in [0, num_src) (one node set: num_src = Nd). The
  // graph has i32 offsets (at most kMaxNarrowEdges edges).
  static Graph from_csr(int64_t num_src, std::vector<int32_t> row_ptr, std::vector<int32_t> col_idx);
  static Graph from_csr(std::vector<int32_t> row_ptr, std::vector<int32_t> col_idx);
  // The same from int64_t row pointers: the graph has i64 offsets, whatever its edge count.
  static Graph from_wide_csr(int64_t num_src, std::vector<int64_t> row_ptr, std::vector<int32_t> col_idx);

  // Rows of the tensors on each side of an edge: source-side tensors (values, el, x_src) have
  // num_src_nodes() rows and destination-side ones (out, er, x_dst) num_dst_nodes() rows.
  int64_t num_src_nodes() const { return num_src_nodes_; }
  int64_t num_dst_nodes() const { return num_dst_nodes_; }
  // Sources and destinations differ in number. A graph whose two counts are equal is one node
  // set (as in PyG, whose rules depend only on the counts): it may be symmetrised.
  bool is_bipartite() const { return num_src_nodes_ != num_dst_nodes_; }
  // The node count of a graph on one node set; throws gat::Error on a bipartite graph, where a
  // caller must say which side it means (num_src_nodes() or num_dst_nodes()).
  int64_t num_nodes() const;
  int64_t num_edges() const { return row_ptr_.defined() ? edge_src_.numel() : 0; }
  Device device() const { return row_ptr_.device(); }
  // The dtype of the offsets, row_ptr, t_row_ptr and t_edge_id: i32, or i64 on a graph of more
  // than kMaxNarrowEdges edges or built with wide_offsets (offset_dtype_for). i32 when empty.
  DType offset_dtype() const { return row_ptr_.defined() ? row_ptr_.dtype() : DType::i32; }

  // By destination (CSR, the edge-id order): node i's in-edges are [row_ptr[i], row_ptr[i+1]).
  const Tensor& row_ptr() const { return row_ptr_; }    // (Nd+1,) offsets
  const Tensor& edge_src() const { return edge_src_; }  // (E,) i32: source of each edge
  const Tensor& edge_dst() const { return edge_dst_; }  // (E,) i32: destination of each edge
  // By source (the transposed order): node j's out-edges are entries [t_row_ptr[j], t_row_ptr[j+1]).
  const Tensor& t_row_ptr() const { return t_row_ptr_; }    // (Ns+1,) offsets
  const Tensor& t_edge_dst() const { return t_edge_dst_; }  // (E,) i32: destination of each entry
  const Tensor& t_edge_id() const { return t_edge_id_; }    // (E,) offsets: edge id of each entry

  // Edge list in edge-id order (host vectors; copies from the device if needed).
  std::vector<int32_t> sources() const;
  std::vector<int32_t> destinations() const;
  std::vector<int32_t> in_degrees() const;  // (Nd,)
  int64_t max_in_degree() const { return max_in_degree_; }
  int64_t max_out_degree() const { return max_out_degree_; }

  // Long rows cut into chunks, for the GPU kernels (a row's serial loop would otherwise be the
  // kernel's time): rows of more than chunk_edges() edges are cut into chunks of chunk_edges()
  // edges, and row i owns chunks [row_chunk_ptr[i], row_chunk_ptr[i+1]); shorter rows own none.
  // The same for the transpose's rows. chunk_edges() depends on the edge count (8 on small
  // graphs up to 512 on large ones; 64 at least when no row is longer than 64 edges, so that no
  // row is cut), so a graph's chunks are fixed and runs reproducible.
  int chunk_edges() const { return chunk_edges_; }
  const Tensor& row_chunk_ptr() const { return row_chunk_ptr_; }      // (Nd+1,) i32
  const Tensor& t_row_chunk_ptr() const { return t_row_chunk_ptr_; }  // (Ns+1,) i32
  // The row that owns each chunk (w in [row_chunk_ptr[i], row_chunk_ptr[i+1]) -> i): a kernel
  // finds a chunk's row with one load, not a binary search over row_chunk_ptr.
  const Tensor& row_chunk_row() const { return row_chunk_row_; }      // (num_row_chunks,) i32
  const Tensor& t_row_chunk_row() const { return t_row_chunk_row_; }  // (num_t_row_chunks,) i32
  int64_t num_row_chunks() const { return num_row_chunks_; }          // row_chunk_ptr[Nd]
  int64_t num_t_row_chunks() const { return num_t_row_chunks_; }      // t_row_chunk_ptr[Ns]
  // The rows that are not cut (at most chunk_edges() edges), longest first and by index within a
  // length: the order in which the GPU kernels take them, so that the rows a warp takes together
  // are about as long as each other (a warp runs as long as its longest row). The same for the
  // transpose's rows.
  const Tensor& row_order() const { return row_order_; }      // (rows of at most chunk_edges(),) i32
  const Tensor& t_row_order() const { return t_row_order_; }  // (transpose's rows of as many,) i32
  int64_t count_self_loops() const { return num_self_loops_; }
  // True when every node i < min(Ns, Nd) has exactly one self loop (every node of a graph on one
  // node set; no other (i, i) can exist), as with_self_loops() leaves it (then with_self_loops()
  // is the graph itself). Both are counted when the graph is built.
  bool one_self_loop_per_node() const { return one_self_loop_per_node_; }

  // The same graph with self loops removed, then (i, i) added for every i < min(Ns, Nd) (GAT's
  // default, PyG's GATConv rule: the nodes both sets have), every row still sorted by source; the
  // graph itself when it already has one self loop per node.
  Graph with_self_loops() const;
  // The same, and where each of its edges comes from, as PyG's add_remaining_self_loops carries
  // edge weights: edge_origins (E',) gets, for every edge of the looped graph, the id of the same
  // edge in this graph; for node i's loop, the id of i's last self loop here, or -1 where i had
  // none (PyG gives that loop its fill value). GCNConv maps its edge weights through it. Throws a
  // gat::Error when the looped graph has more than kMaxNarrowEdges edges (ids int32 cannot hold).
  Graph with_self_loops(std::vector<int32_t>& edge_origins) const;
  // Copy of all index arrays to `device`. Throws a gat::Error when asked to take a graph of i64
  // offsets to CUDA: the CUDA kernels read i32 offsets only.
  Graph to(Device device) const;
  // Checks every invariant (monotone row pointers, indices in range, consistent sizes, the
  // transpose matches); throws gat::Error naming the first violation.
  void validate() const;

 private:
  // from_edges; release_input() is called once src and dst are no longer needed.
  static Graph build(int64_t num_src, int64_t num_dst, const std::vector<int32_t>& src,
                     const std::vector<int32_t>& dst, const GraphBuildOptions& options,
                     const std::function<void()>& release_input);
  // from_csr for either offset type.
  template <class Offset>
  static Graph csr_of(int64_t num_src, std::vector<Offset> row_ptr, std::vector<int32_t> col_idx);
  // Builds the transpose, edge_dst, the degree maxima, the self-loop counts, the chunk plans and row orders
  // of a checked CSR by destination whose rows are sorted by source (CPU tensors (Nd+1,) of
  // Offset, i32 or i64, and (E,) i32, taken as the graph's own) with sources in [0, num_src).
  template <class Offset>
  static Graph from_sorted_csr(int64_t num_src, Tensor row_ptr, Tensor col_idx);
  void set_plans(RowPlans plans);
  // with_self_loops(), filling *origins when it is not null.
  template <class Offset>
  Graph looped(std::vector<int32_t>* origins) const;

  int64_t num_src_nodes_ = 0, num_dst_nodes_ = 0;
  int64_t max_in_degree_ = 0;
  int64_t max_out_degree_ = 0;
  int chunk_edges_ = 0;
  int64_t num_row_chunks_ = 0, num_t_row_chunks_ = 0;
  int64_t num_self_loops_ = 0;
  bool one_self_loop_per_node_ = false;
  Tensor row_ptr_, edge_src_, t_row_ptr_, t_edge_dst_, t_edge_id_, edge_dst_;
  Tensor row_chunk_ptr_, t_row_chunk_ptr_, row_chunk_row_, t_row_chunk_row_;
  Tensor row_order_, t_row_order_;
};

// Calls f(Offset{}) with Offset the C++ type of the graph's offsets (row_ptr, t_row_ptr,
// t_edge_id): int32_t or int64_t. An op that reads offsets picks its code here once, so a graph
// of i32 offsets runs the int32 code and nothing else.
template <class F>
void dispatch_offsets(DType offset_dtype, F&& f) {
  if (offset_dtype == DType::i64) return f(int64_t{});
  f(int32_t{});
}
template <class F>
void dispatch_offsets(const Graph& graph, F&& f) {
  dispatch_offsets(graph.offset_dtype(), std::forward<F>(f));
}
// dispatch_float and dispatch_offsets in one: f(T{}, Offset{}).
template <class F>
void dispatch_float_offsets(DType dtype, const Graph& graph, const char* op, F&& f) {
  dispatch_float(dtype, op,
                 [&](auto zero) { dispatch_offsets(graph, [&](auto offset) { f(zero, offset); }); });
}

// Edge attributes given per input edge of Graph::from_edges (edge_attr (M, D): row k belongs to
// src[k] -> dst[k]) rearranged into the edge-id order of `graph`, the graph built from the same
// lists and options: (E, D), edge_attr's dtype and device. As PyG's coalesce and to_undirected
// (reduce "add"): an edge listed more than once gets the sum of its rows; with symmetrize, the
// reverse of j -> i gets j -> i's row, added to i -> j's own when that is listed too (a self loop
// is its own reverse and counts once). Input self loops that the options remove give nothing.
// Throws a gat::Error naming the problem when edge_attr is not (M, D) floats, when the options keep
// duplicates or add self loops (ops::self_loop_attr makes loops' attributes), or when an input
// edge is not in `graph` or an edge of `graph` is in no input (not the graph of these lists).
Tensor edge_attr_in_graph_order(const Graph& graph, const std::vector<int32_t>& src,
                                const std::vector<int32_t>& dst, const GraphBuildOptions& options,
                                const Tensor& edge_attr);

}  // namespace gat
