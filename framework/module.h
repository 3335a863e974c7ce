// Module: named parameters and submodules, train/eval mode, device moves.
//
// A layer derives from Module, registers its parameters and children in its constructor and
// offers its own forward(...) (signatures differ between layers, so there is no virtual one).
//
//   struct MyLayer : Module {
//     Tensor weight;
//     MyLayer() { weight = register_parameter("weight", Tensor::zeros({4, 4})); }
//   };
//
// Parameter names are dotted paths ("conv1.lin.weight"), as in PyTorch's state_dict.
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

  void train(bool on = true);  // this module and every child
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad();            // drops every parameter's gradient
  void to(Device device);      // moves every parameter in place (handles stay valid)
  int64_t num_parameters() const;  // total elements

 protected:
  // Marks `value` as requiring grad and returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace gat
