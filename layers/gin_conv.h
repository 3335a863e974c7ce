// GINConv: the graph isomorphism network's layer (Xu et al. 2019) with PyTorch Geometric 2.8's
// GINConv options and parameter names.
//
//   out = nn((1 + eps) x_dst[i] + the sum over the edges j -> i of x_src[j])   (Nd, nn's width)
//         (the sum is 0 for a node without in-edges; one x is both x_src and x_dst)
//
// nn is any module with forward(const Tensor&) const or forward(const Tensor&, Generator&) const,
// as Sequential::add takes; usually a Sequential MLP. forward with a Generator passes it to nn
// where nn takes one (Dropout, a Sequential holding one); forward without refuses an nn that
// needs it. It is this layer's child "nn", so its parameters are named
// "nn.0.weight", ... as in PyG. eps is a (1,) tensor filled with options.eps: a parameter named
// "eps" with train_eps (it receives a gradient), else a buffer of that name, as in PyG.
//
// Bipartite input as PyG's: forward(x_src, x_dst, graph) for a graph of Ns sources and Nd
// destinations; x_src and x_dst have one width. No self loops are added; an edge listed twice
// counts twice (Graph's remove_duplicates = false keeps it). Everything goes through ops, so the
// layer runs unchanged on CPU and CUDA.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>

#include "gat/framework/graph.h"
#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"
#include "gat/layers/message_passing.h"
#include "gat/layers/sequential.h"

namespace gat {

struct GINConvOptions {
  double eps = 0.0;          // its initial value
  bool train_eps = false;    // eps a parameter
  DType dtype = DType::f32;  // of eps
};

class GINConv : public Module {
 public:
  template <class M>
  explicit GINConv(std::shared_ptr<M> nn, const GINConvOptions& options = {}) {
    static_assert(std::is_base_of_v<Module, M>, "GINConv: nn is not a Module");
    GAT_CHECK(nn != nullptr, "GINConv: null nn");
    register_module("nn", nn);
    constexpr bool takes_generator = detail::has_forward_v<M, const Tensor&, Generator&>;
    constexpr bool takes_tensor = detail::has_forward_v<M, const Tensor&>;
    static_assert(takes_generator || takes_tensor,
                  "GINConv: nn needs forward(const Tensor&) or forward(const Tensor&, Generator&)");
    nn_ = [nn](const Tensor& h, Generator* gen) {
      if constexpr (takes_generator) {
        if (gen) return Tensor(nn->forward(h, *gen));
      }
      if constexpr (takes_tensor) {
        return Tensor(nn->forward(h));  // a step that draws refuses here, naming itself
      } else {
        Generator refusing = Generator::refusing("GINConv's nn");  // runs while nothing is drawn
        return Tensor(nn->forward(h, refusing));
      }
    };
    init_eps(options);
  }

  // x (N, F) for a graph on one node set of N nodes -> nn's output for (N, F).
  Tensor forward(const Tensor& x, const Graph& graph) { return forward_sides(x, nullptr, graph, nullptr); }
  Tensor forward(const Tensor& x, const Graph& graph, Generator& gen) {
    return forward_sides(x, nullptr, graph, &gen);
  }
  // x_src (Ns, F), x_dst (Nd, F) -> nn's output for (Nd, F).
  Tensor forward(const Tensor& x_src, const Tensor& x_dst, const Graph& graph) {
    return forward_sides(x_src, &x_dst, graph, nullptr);
  }
  Tensor forward(const Tensor& x_src, const Tensor& x_dst, const Graph& graph, Generator& gen) {
    return forward_sides(x_src, &x_dst, graph, &gen);
  }

  Tensor eps;  // (1,)

 private:
  void init_eps(const GINConvOptions& options);
  Tensor forward_sides(const Tensor& x_src, const Tensor* x_dst, const Graph& graph, Generator* gen);

  std::function<Tensor(const Tensor&, Generator*)> nn_;
  EdgePlanCache plans_;
};

}  // namespace gat
