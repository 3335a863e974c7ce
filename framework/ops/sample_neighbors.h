// sample_neighbors(row_ptr, edge_src, dst_nodes, draw): one hop of neighbour sampling, on the
// CPU or on CUDA with the same bits (NeighborSampler, framework/neighbor_sampler.h, chains the
// hops into a batch's blocks). Not differentiable: it makes indices.
//
//   row_ptr (N+1,) i32, edge_src (E,) i32: a graph on N nodes, CSR by destination (edge_src[e]
//   is the source of edge e); dst_nodes (Nd,) i32: distinct nodes in [0, N), on the same device
//   -> SampledLayer on that device:
//      row_ptr (Nd+1,) i32, col (Es,) i32, edge_ids (Es,) i32, src_nodes (Ns,) i32
//
// Destination i (node dst_nodes[i]) keeps count_i of its in-edges (detail/neighbor_draws.h): all
// of them (fanout -1); fanout draws with replacement (none when it has no in-edge); without,
// min(fanout, degree) distinct ones (Floyd's sample). Draw k of node v is Philox word pair
// (seed, stream, v << 32 | k / 2), so each node's draws are independent of every other's.
//
// Local ids: local i < Nd is dst_nodes[i]; the sources after them are the new nodes, in the order
// in which the drawn edges first name them (rows in order; within a row, without replacement by
// increasing offset, with replacement in draw order). src_nodes[l] is the node of local id l.
// The block row i's edges are [row_ptr[i], row_ptr[i+1]), sorted by (col, edge id): col is the
// local source of each edge, edge_ids its id in the graph.
//
// Waits for the device once (CUDA): the outputs are sized by a bound, Nd x fanout, and the counts
// of edges and sources are read together at the end. With fanout -1, or a bound past 2^24 edges,
// the edge count is read first: twice. On the CPU the edge count is read first (no wait). The
// outputs are views of the first Es and Ns entries of those buffers.
//
// Errors (a gat::Error naming sample_neighbors): a tensor not (.,) i32, the three not on one
// device, a fanout below -1, a block of 2^31 - 1 edges or more, or of more than 2^31 - 1
// destinations and edges together (32-bit local ids). On the CPU also a node of dst_nodes outside
// [0, N), or whose row of row_ptr is not in order inside [0, E]. On CUDA those are the caller's to
// check (NeighborSampler checks its seeds; later hops' come from the op). row_ptr and edge_src are
// trusted otherwise (a Graph's arrays, which Graph checks); a repeated destination gives its row
// twice.
#pragma once

#include <cstdint>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

struct NeighborDraw {
  int64_t fanout = -1;  // in-edges kept per destination; -1: all
  bool replace = false;
  uint64_t seed = 0;
  uint64_t stream = 0;  // the hop's Philox stream
};

struct SampledLayer {
  Tensor row_ptr;    // (Nd+1,) i32
  Tensor col;        // (Es,) i32 local source of each edge
  Tensor edge_ids;   // (Es,) i32 the graph's id of each edge
  Tensor src_nodes;  // (Ns,) i32 the node of each local id; the first Nd are dst_nodes
};

SampledLayer sample_neighbors(const Tensor& row_ptr, const Tensor& edge_src, const Tensor& dst_nodes,
                              const NeighborDraw& draw);

// The kernels (docs/design.md, the op pattern), in the order the op runs them:
//   sampled_row_ends: row_ends (Nd+1,) i32, row_ends[0] = 0 and row_ends[i+1] = count_0 + ... +
//                     count_i, held at 2^31 - 1 where the sum reaches it (the op then refuses);
//   sample_edges:     edge_ids (capacity,), capacity >= Es: row i's draws as graph edge ids in
//                     draw order, at [row_ends[i], row_ends[i+1]) (the slots after Es are left
//                     as they are);
//   relabel_sources:  col (capacity,): the local source of each edge e < Es; src_nodes
//                     (Nd+capacity,) of which the first Ns get the node of each local id (the rest
//                     is left as it is); sizes (2,) = (Es, Ns); then each row's (col, edge_ids)
//                     sorted by col, then edge id (edge_ids is read and rewritten). Es is
//                     row_ends[Nd], read where the kernels run: the host need not know it.
GAT_DECLARE_KERNEL_FN(sampled_row_ends, (const Tensor& row_ptr, const Tensor& dst_nodes,
                                         const NeighborDraw& draw, Tensor& row_ends))
GAT_DECLARE_KERNEL_FN(sample_edges, (const Tensor& row_ptr, const Tensor& dst_nodes, const Tensor& row_ends,
                                     const NeighborDraw& draw, Tensor& edge_ids))
GAT_DECLARE_KERNEL_FN(relabel_sources,
                      (const Tensor& edge_src, const Tensor& dst_nodes, const Tensor& row_ends,
                       Tensor& edge_ids, Tensor& col, Tensor& src_nodes, Tensor& sizes))

}  // namespace gat::ops
