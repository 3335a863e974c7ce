#include "gat/framework/module.h"

namespace gat {

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out = parameters_;
  for (const auto& [name, child] : children_)
    for (auto& [sub, tensor] : child->named_parameters()) out.emplace_back(name + "." + sub, tensor);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.zero_grad();
}

void Module::to(Device device) {
  for (Tensor& p : parameters()) p.move_to_(device);
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  GAT_CHECK(!name.empty() && name.find('.') == std::string::npos,
            "Module::register_parameter: invalid name '", name, "' (non-empty, no '.')");
  for (const auto& [existing, tensor] : parameters_)
    GAT_CHECK(existing != name, "Module::register_parameter: '", name, "' is already registered");
  for (const auto& [existing, child] : children_)
    GAT_CHECK(existing != name, "Module::register_parameter: '", name, "' is already a submodule");
  value.set_requires_grad(true);
  parameters_.emplace_back(name, value);
  return value;
}

}  // namespace gat
