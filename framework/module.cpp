#include "gat/framework/module.h"

namespace gat {

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out = parameters_;
  for (const auto& [name, child] : children_)
    for (auto& [sub, tensor] : child->named_parameters()) out.emplace_back(name + "." + sub, tensor);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out = buffers_;
  for (const auto& [name, child] : children_)
    for (auto& [sub, tensor] : child->named_buffers()) out.emplace_back(name + "." + sub, tensor);
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
  for (auto& [name, buffer] : named_buffers()) buffer.move_to_(device);
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

// Parameters, buffers and submodules share one namespace per module.
void Module::check_new_name(const char* what, const std::string& name) const {
  GAT_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module::", what, ": invalid name '", name,
            "' (non-empty, no '.')");
  for (const auto& [existing, tensor] : parameters_)
    GAT_CHECK(existing != name, "Module::", what, ": '", name, "' is already a parameter");
  for (const auto& [existing, tensor] : buffers_)
    GAT_CHECK(existing != name, "Module::", what, ": '", name, "' is already a buffer");
  for (const auto& [existing, child] : children_)
    GAT_CHECK(existing != name, "Module::", what, ": '", name, "' is already a submodule");
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name("register_parameter", name);
  value.set_requires_grad(true);
  parameters_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name("register_buffer", name);
  check_defined("Module::register_buffer", name.c_str(), value);
  buffers_.emplace_back(name, value);
  return value;
}

}  // namespace gat
