// Sequential: modules applied one after the other, each to the previous one's output (as
// torch.nn.Sequential). Its parameters are its children's, named "0.weight", "1.bias", ... (or
// by the names given to add).
//
//   Generator weights(0), dropout(1);
//   Sequential net;
//   net.add(std::make_shared<Dropout>(0.6))
//      .add(std::make_shared<GATConv>(conv1_options, weights))  // forward(x, graph, gen)
//      .add(std::make_shared<ELU>())
//      .add(std::make_shared<Linear>(64, 7, true, weights))
//      .add([](const Tensor& h) { return ops::log_softmax(h); });  // any function of a tensor
//   Tensor y = net.forward(x, graph, dropout);  // training: dropout draws the masks
//   net.eval();
//   Tensor z = net.forward(x, graph);  // eval: nothing is drawn, no generator needed
//
// A step's module has one or more of forward(x), forward(x, gen), forward(x, graph) and
// forward(x, graph, gen) (x a Tensor; a forward taking Features takes it too). Each step gets
// the graph when it takes one and the forward was given one, and the generator when it takes
// one. A step that takes only graph forms needs a graph (a gat::Error names it otherwise).
// Without a generator a step that takes one gets a refusing one (Generator::refusing): it runs
// while it draws nothing (eval mode) and throws, naming the step, when it would draw. A module
// with none of these forms is a compile-time error.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gat/framework/graph.h"
#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"

namespace gat {

namespace detail {
// Whether m.forward(args...) compiles for an M& m.
template <class Void, class M, class... Args>
struct has_forward : std::false_type {};
template <class M, class... Args>
struct has_forward<std::void_t<decltype(std::declval<M&>().forward(std::declval<Args>()...))>, M, Args...>
    : std::true_type {};
template <class M, class... Args>
constexpr bool has_forward_v = has_forward<void, M, Args...>::value;
}  // namespace detail

class Sequential : public Module {
 public:
  using Function = std::function<Tensor(const Tensor&)>;

  // Appends `module` under `name` (default: its position, "0", "1", ...). Returns *this.
  template <class M>
  Sequential& add(std::shared_ptr<M> module, std::string name = {}) {
    static_assert(std::is_base_of_v<Module, M>, "Sequential::add: not a Module");
    constexpr bool x = detail::has_forward_v<M, const Tensor&>;
    constexpr bool x_gen = detail::has_forward_v<M, const Tensor&, Generator&>;
    constexpr bool x_graph = detail::has_forward_v<M, const Tensor&, const Graph&>;
    constexpr bool x_graph_gen = detail::has_forward_v<M, const Tensor&, const Graph&, Generator&>;
    static_assert(x || x_gen || x_graph || x_graph_gen,
                  "Sequential::add: the module has no forward(x), forward(x, gen), forward(x, graph) or "
                  "forward(x, graph, gen)");
    GAT_CHECK(module != nullptr, "Sequential::add: null module");
    if (name.empty()) name = std::to_string(steps_.size());
    register_module(name, module);
    auto what = std::make_shared<const std::string>("Sequential step '" + name + "'");
    auto run = [module, what](const Tensor& h, const Graph* graph, Generator* gen) -> Tensor {
      Generator refusing = Generator::refusing(what->c_str());
      Generator& g = gen ? *gen : refusing;
      if constexpr ((x_graph || x_graph_gen) && (x || x_gen)) {
        return graph ? call(*module, h, *graph, g) : call(*module, h, g);
      } else if constexpr (x_graph || x_graph_gen) {
        GAT_CHECK(graph != nullptr, *what,
                  " needs a graph: call forward(x, graph) or forward(x, graph, gen)");
        return call(*module, h, *graph, g);
      } else {
        return call(*module, h, g);
      }
    };
    steps_.push_back(std::move(run));
    return *this;
  }
  // Appends a function without parameters (an op, a reshape, ...).
  Sequential& add(Function function);

  Tensor forward(const Tensor& x) const { return run(x, nullptr, nullptr); }
  Tensor forward(const Tensor& x, Generator& gen) const { return run(x, nullptr, &gen); }
  Tensor forward(const Tensor& x, const Graph& graph) const { return run(x, &graph, nullptr); }
  Tensor forward(const Tensor& x, const Graph& graph, Generator& gen) const { return run(x, &graph, &gen); }

  size_t size() const { return steps_.size(); }

 private:
  // One step: the previous output, the graph (or null), the generator (or null) -> its output.
  using Step = std::function<Tensor(const Tensor&, const Graph*, Generator*)>;
  // m's forward without a graph: the generator form when there is one, else forward(x).
  template <class M>
  static Tensor call(M& m, const Tensor& h, Generator& gen) {
    if constexpr (detail::has_forward_v<M, const Tensor&, Generator&>)
      return Tensor(m.forward(h, gen));
    else
      return Tensor(m.forward(h));
  }
  // The same with the graph.
  template <class M>
  static Tensor call(M& m, const Tensor& h, const Graph& graph, Generator& gen) {
    if constexpr (detail::has_forward_v<M, const Tensor&, const Graph&, Generator&>)
      return Tensor(m.forward(h, graph, gen));
    else
      return Tensor(m.forward(h, graph));
  }
  Tensor run(const Tensor& x, const Graph* graph, Generator* gen) const;

  std::vector<Step> steps_;
};

}  // namespace gat
