// The chunk length of a graph's row plans (Graph::chunk_edges), written once for the plans Graph
// makes on the host (graph.cpp) and those ops::block_graph makes on CUDA.
#pragma once

#include <cstdint>

#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat::detail {

// The chunk length of a graph of E edges whose longest row (either way) has `longest` edges.
// 512 leaves large graphs' typical rows whole. On a small graph the GPU is nearly idle and the
// longest serial loop is a kernel's whole time (Cora: 13,264 edges, 2,708 rows, the longest of
// 169 edges), so the chunks shrink with E, down to 8 edges. A graph whose rows all fit in 64
// edges is not cut at all: the chunk and merge launches would cost more than the shorter loops
// save, and the 384-node benchmark graph keeps its single launch.
GAT_HOST_DEVICE int chunk_edges_for(int64_t E, int64_t longest) {
  constexpr int kMaxChunk = 512, kMinChunk = 8, kWholeRows = 64;
  int chunk = kMinChunk;
  while (chunk < kMaxChunk && static_cast<int64_t>(chunk) * 2 * 2048 <= E) chunk *= 2;
  return longest <= kWholeRows && chunk < kWholeRows ? kWholeRows : chunk;
}

}  // namespace gat::detail
