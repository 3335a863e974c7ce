#include "gat/layers/gin_conv.h"

#include <cmath>

#include "gat/framework/ops/arithmetic.h"

namespace gat {

void GINConv::init_eps(const GINConvOptions& options) {
  GAT_CHECK(std::isfinite(options.eps), "GINConv: eps ", options.eps, " is not finite");
  const Tensor value = Tensor::full({1}, options.eps, options.dtype);
  eps = options.train_eps ? register_parameter("eps", value) : register_buffer("eps", value);
}

Tensor GINConv::forward_sides(const Tensor& x_src, const Tensor* x_dst, const Graph& graph, Generator* gen) {
  check_dim("GINConv", x_dst ? "x_src" : "x", x_src, 2);
  const int64_t width = x_src.size(1);  // x_dst must have it too: the two are added
  check_message_inputs("GINConv", x_src, x_dst, graph, width, width);
  const Tensor& root = x_dst ? *x_dst : x_src;                                    // (Nd, F)
  const Tensor h = sum_neighbours(x_src, plans_.of(graph)) + root * (1.0 + eps);  // (Nd, F)
  return nn_(h, gen);
}

}  // namespace gat
