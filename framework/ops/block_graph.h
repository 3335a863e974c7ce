// block_graph(row_ptr, col, num_src): a sampled block's Graph with the self loops the layers add,
// built where its arrays are. It is Graph::from_csr(num_src, row_ptr, col).with_self_loops(),
// every array and count the same, bit for bit. The mini-batch loader builds its CUDA blocks with
// it, so a block's arrays never go through the host. Not differentiable: it makes indices.
//
//   row_ptr (Nd+1,) i32, col (Es,) i32: a CSR by destination of Nd destinations whose rows are
//   sorted by source (as ops::sample_neighbors makes them), sources in [0, num_src), Nd <= num_src
//   -> a Graph of num_src sources and Nd destinations on their device: row i without its loops
//      (i, i) and with one (i, i) in its sorted place; the transpose, row plans and counts.
//
// On CUDA the host waits once, to read the counts the Graph keeps on the host (its edges, degree
// maxima, chunk length, chunks and uncut rows). On the CPU it is the expression above.
//
// Errors (a gat::Error naming block_graph): a tensor not (.,) i32, the two not on one device, an
// empty row_ptr, Nd above num_src, num_src or Es + Nd above 2^31 - 1. The CSR itself is the
// caller's to check on CUDA (on the CPU Graph::from_csr checks it): monotone row pointers from 0
// to Es, sorted rows, sources in range.
#pragma once

#include <cstdint>

#include "gat/framework/graph.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Graph block_graph(const Tensor& row_ptr, const Tensor& col, int64_t num_src);

// block_graph.cu. The arrays' sizes are known on the device only, so this kernel allocates
// them itself (buffers of Es + Nd edges, cut to the counts it reads back).
namespace cuda_impl {
Graph block_graph(const Tensor& row_ptr, const Tensor& col, int64_t num_src);
}  // namespace cuda_impl

}  // namespace gat::ops
