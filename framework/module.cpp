#include "gat/framework/module.h"

#include <algorithm>

#include "gat/framework/quote.h"

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

namespace {

// Parameters, then buffers.
std::vector<std::pair<std::string, Tensor>> named_state(const Module& module) {
  auto state = module.named_parameters();
  for (auto& named : module.named_buffers()) state.push_back(std::move(named));
  return state;
}

}  // namespace

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> state;
  for (const auto& [name, tensor] : named_state(*this)) state.emplace(name, tensor.clone());
  return state;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, const std::string& where,
                             const std::string& source) {
  const auto own = named_state(*this);
  for (const auto& [name, p] : own) {
    auto it = state.find(name);
    GAT_CHECK(it != state.end(), where, ": missing tensor ", quote(name), " (the module has ", p.describe(),
              ")");
    const Tensor& t = it->second;
    GAT_CHECK(t.shape() == p.shape(), where, ": tensor '", name, "' has shape ", shape_str(t.shape()), " in ",
              source, " vs ", shape_str(p.shape()), " in the module");
    GAT_CHECK(t.dtype() == p.dtype(), where, ": tensor '", name, "' has dtype ", dtype_name(t.dtype()),
              " in ", source, " vs ", dtype_name(p.dtype()), " in the module");
    const int64_t bad = first_non_finite(t);
    GAT_CHECK(bad < 0, where, ": tensor '", name, "' holds a NaN or infinity (at flat index ", bad,
              "): not a trained model");
  }
  for (const auto& entry : state) {  // (no structured binding: C++17 lambdas cannot capture one)
    const bool known =
        std::any_of(own.begin(), own.end(), [&](const auto& np) { return np.first == entry.first; });
    GAT_CHECK(known, where, ": unexpected tensor ", quote(entry.first), " ", entry.second.describe(),
              " (the module has no such parameter or buffer)");
  }
  for (const auto& [name, p] : own) {
    Tensor dst = p;
    dst.copy_(state.at(name));
  }
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
