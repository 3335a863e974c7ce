// Embedding: a table of num_embeddings vectors of `dim` values, looked up by index (as
// torch.nn.Embedding without padding_idx, max_norm or sparse gradients).
//
//   Embedding words(1000, 64, init);
//   Tensor h = words.forward(ids);  // ids (B, L) i32 -> (B, L, 64)
//
// The lookup is ops::index_rows, so the gradient of the table is deterministic: the rows of a
// repeated index are added in ascending position, the same bits on the CPU and CUDA, no atomics.
#pragma once

#include <cstdint>

#include "gat/framework/module.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"

namespace gat {

class Embedding : public Module {
 public:
  // The table (num_embeddings, dim) drawn from N(0, 1) by `init` (torch's default), with
  // `dtype` on the CPU (Module::to moves it).
  Embedding(int64_t num_embeddings, int64_t dim, Generator& init, DType dtype = DType::f32);

  // index: any shape S of i32 values in [0, num_embeddings), on the table's device -> S + (dim,).
  // An index out of range is a gat::Error naming it and its position.
  Tensor forward(const Tensor& index) const;
  // index: a RowIndex built once (ops::index_rows.h) and reused across steps -> (K, dim).
  Tensor forward(const ops::RowIndex& index) const;

  int64_t num_embeddings() const { return weight.size(0); }
  int64_t dim() const { return weight.size(1); }

  Tensor weight;  // (num_embeddings, dim)
};

}  // namespace gat
