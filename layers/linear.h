// Linear: y = x W (+ b), the fully connected layer.
//
// W is stored (in, out), the transpose of torch's (out, in), so the forward pass is one matmul
// with no transpose. Initialised as PyG's Linear(weight_initializer="glorot",
// bias_initializer="zeros"): W uniform in [-a, a), a = sqrt(6 / (in + out)); b = 0, or with
// LinearBiasInit::fan_in, as PyG's Linear without a bias_initializer (GATv2Conv's lin_l, lin_r):
// b uniform in [-1/sqrt(in), 1/sqrt(in)), drawn after W. LinearWeightInit::fan_in draws W as PyG's
// Linear without a weight_initializer (SAGEConv's): kaiming_uniform with a = sqrt(5), which is
// uniform in [-1/sqrt(in), 1/sqrt(in)).
// x may be sparse (a CsrMatrix, via Features): the product is then ops::sparse_matmul.
#pragma once

#include <cstdint>

#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"
#include "gat/framework/tensor.h"

namespace gat {

enum class LinearBiasInit { zeros, fan_in };
enum class LinearWeightInit { glorot, fan_in };

// x (N, in), dense or sparse, times w (in, out) -> (N, out): ops::sparse_matmul for a sparse x,
// else ops::matmul (Linear's product, and GATConv's attention terms from the folded weight).
// With an active x_dropout, x through that dropout first: a sparse x takes both in one op
// (ops::sparse_dropout_matmul), a dense one ops::dropout then the product.
Tensor features_matmul(const Features& x, const Tensor& w, const DropoutKey& x_dropout = {});

class Linear : public Module {
 public:
  // `init` draws the weight; parameters are created with `dtype` on the CPU (Module::to moves them).
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& init, DType dtype = DType::f32,
         LinearBiasInit bias_init = LinearBiasInit::zeros,
         LinearWeightInit weight_init = LinearWeightInit::glorot);

  // x: (N, in), dense or sparse -> (N, out); x through dropout with x_dropout first when it is
  // active (features_matmul).
  Tensor forward(const Features& x, const DropoutKey& x_dropout = {}) const;

  int64_t in_features() const { return weight.size(0); }
  int64_t out_features() const { return weight.size(1); }

  Tensor weight;  // (in, out)
  Tensor bias;    // (out,), undefined without bias
};

}  // namespace gat
