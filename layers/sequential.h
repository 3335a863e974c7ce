// Sequential: modules applied one after the other, each to the previous one's output (as
// torch.nn.Sequential). Its parameters are its children's, named "0.weight", "1.bias", ... (or
// by the names given to add).
//
//   Generator init(0), dropout(1);
//   Sequential mlp;
//   mlp.add(std::make_shared<Linear>(64, 32, true, init))
//      .add(std::make_shared<ELU>())
//      .add(std::make_shared<Dropout>(0.5))
//      .add(std::make_shared<LayerNorm>(32))
//      .add([](const Tensor& h) { return ops::leaky_relu(h, 0.2); });  // any function of a tensor
//   Tensor y = mlp.forward(x, dropout);  // dropout draws the masks
//
// A module fits when it has forward(const Tensor&) (Linear, LayerNorm, BatchNorm1d, the
// activations of layers/activation.h) or forward(const Tensor&, Generator&) (Dropout); GATConv,
// which also takes a graph, does not (wrap it in a module of your own). forward(x) without a
// Generator throws when it reaches a module that needs one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"

namespace gat {

namespace detail {
template <class M, class = void>
struct forward_takes_generator : std::false_type {};
template <class M>
struct forward_takes_generator<M, std::void_t<decltype(std::declval<const M&>().forward(
                                      std::declval<const Tensor&>(), std::declval<Generator&>()))>>
    : std::true_type {};
template <class M, class = void>
struct forward_takes_tensor : std::false_type {};
template <class M>
struct forward_takes_tensor<
    M, std::void_t<decltype(std::declval<const M&>().forward(std::declval<const Tensor&>()))>>
    : std::true_type {};
}  // namespace detail

class Sequential : public Module {
 public:
  using Function = std::function<Tensor(const Tensor&)>;

  // Appends `module` under `name` (default: its position, "0", "1", ...). Returns *this.
  template <class M>
  Sequential& add(std::shared_ptr<M> module, std::string name = {}) {
    static_assert(std::is_base_of_v<Module, M>, "Sequential::add: not a Module");
    GAT_CHECK(module != nullptr, "Sequential::add: null module");
    if (name.empty()) name = std::to_string(steps_.size());
    register_module(name, module);
    if constexpr (detail::forward_takes_generator<M>::value) {
      steps_.push_back({name, [module, name](const Tensor& x, Generator* gen) {
                          GAT_CHECK(gen != nullptr, "Sequential: step '", name,
                                    "' draws random numbers: call forward(x, generator)");
                          return Tensor(module->forward(x, *gen));
                        }});
    } else {
      static_assert(detail::forward_takes_tensor<M>::value,
                    "Sequential::add: the module needs forward(const Tensor&) const or "
                    "forward(const Tensor&, Generator&) const");
      steps_.push_back({name, [module](const Tensor& x, Generator*) { return Tensor(module->forward(x)); }});
    }
    return *this;
  }
  // Appends a function without parameters (an op, a reshape, ...).
  Sequential& add(Function function);

  Tensor forward(const Tensor& x) const;
  Tensor forward(const Tensor& x, Generator& gen) const;

  size_t size() const { return steps_.size(); }

 private:
  struct Step {
    std::string name;
    std::function<Tensor(const Tensor&, Generator*)> run;
  };
  Tensor run(const Tensor& x, Generator* gen) const;

  std::vector<Step> steps_;
};

}  // namespace gat
