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
