#include "gat/layers/embedding.h"

#include "gat/framework/init.h"
#include "gat/framework/ops/reshape.h"

namespace gat {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Generator& init, DType dtype) {
  GAT_CHECK(num_embeddings > 0 && dim > 0, "Embedding: num_embeddings ", num_embeddings, " and dim ", dim,
            " must be positive");
  weight = register_parameter("weight", init::normal({num_embeddings, dim}, 1.0, init, dtype));
}

Tensor Embedding::forward(const Tensor& index) const {
  check_dtype("Embedding", "index", index, DType::i32);
  Shape out_shape = index.shape();
  out_shape.push_back(dim());
  const Tensor rows = ops::index_rows(weight, ops::reshape(index, {index.numel()}));
  return ops::reshape(rows, out_shape);
}

Tensor Embedding::forward(const ops::RowIndex& index) const { return ops::index_rows(weight, index); }

}  // namespace gat
