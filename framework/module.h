// Module: named parameters and submodules, training and evaluation modes, device moves.
//
// A layer derives from Module, registers its parameters and children in its constructor and
// offers its own forward(...) (signatures differ between layers, so there is no virtual one).
//
//   struct MyLayer : Module {
//     Tensor weight;
//     MyLayer() { weight = register_parameter("weight", Tensor::zeros({4, 4})); }
//   };
//
// Parameter names are dotted paths ("conv1.lin.weight"), as in PyTorch's state_dict. Buffers
// (register_buffer) are state that is saved and moved with the parameters but not trained:
// BatchNorm1d's running statistics.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/tensor.h"

namespace gat {

class Module {
 public:
  virtual ~Module() = default;

  // Every parameter of this module and its children, depth first, registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Every buffer of this module and its children, in the same order, with the same dotted names.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;

  // Every parameter and buffer by its dotted name, as copies (on their devices, no autograd): a
  // state kept in memory (the best epoch's, say) does not change with later training.
  std::map<std::string, Tensor> state_dict() const;
  // Copies `state` into the parameters and buffers (on whatever device they live). The names,
  // shapes and dtypes must match exactly and every floating-point value must be finite; the
  // first difference is reported (missing tensor, unexpected tensor, shape A vs B, dtype A vs B,
  // a NaN or infinity at an index) and nothing is copied then. Errors start with `where` and
  // call the state `source` ("tensor 'w' has shape (3) in <source> vs (2) in the module").
  void load_state_dict(const std::map<std::string, Tensor>& state,
                       const std::string& where = "Module::load_state_dict",
                       const std::string& source = "the state");

  void train(bool on = true);  // this module and every child
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad();                // drops every parameter's gradient
  void to(Device device);          // moves every parameter and buffer in place (handles stay valid)
  int64_t num_parameters() const;  // total elements

 protected:
  // Marks `value` as requiring grad and returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor value);
  // Registers `value` (no gradient) as a buffer and returns the same handle.
  Tensor register_buffer(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    check_new_name("register_module", name);
    children_.emplace_back(name, module);
    return module;
  }

 private:
  void check_new_name(const char* what, const std::string& name) const;

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace gat
