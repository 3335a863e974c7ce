// ModuleList and ModuleDict: modules held by position or by key, their parameters registered as
// the children's (torch.nn.ModuleList / ModuleDict): "0.weight", "1.weight", ... or
// "<key>.weight", in the order the modules were added. They have no forward: the module that
// owns one calls its children.
//
//   struct Deep : Module {
//     std::shared_ptr<ModuleList> layers = register_module("layers", std::make_shared<ModuleList>());
//     Deep(Generator& init) {
//       for (int i = 0; i < 4; ++i) layers->append(std::make_shared<Linear>(16, 16, true, init));
//     }
//     Tensor forward(Tensor h) const {
//       for (size_t i = 0; i < layers->size(); ++i) h = ops::relu(layers->get<Linear>(i)->forward(h));
//       return h;
//     }
//   };  // parameters "layers.0.weight", "layers.0.bias", "layers.1.weight", ...
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/check.h"
#include "gat/framework/module.h"

namespace gat {

namespace detail {
// `module` as an M, or a gat::Error naming `what` when it is another kind of module.
template <class M>
std::shared_ptr<M> module_as(const std::shared_ptr<Module>& module, const std::string& what) {
  auto typed = std::dynamic_pointer_cast<M>(module);
  GAT_CHECK(typed != nullptr, what, " is not of the requested module type");
  return typed;
}
}  // namespace detail

class ModuleList : public Module {
 public:
  // Appends `module` as child "<size()>". Returns *this.
  ModuleList& append(std::shared_ptr<Module> module);

  size_t size() const { return modules_.size(); }
  // The i-th module (i < size(), else a gat::Error), as a Module or as the type it was added as.
  const std::shared_ptr<Module>& operator[](size_t i) const;
  template <class M>
  std::shared_ptr<M> get(size_t i) const {
    return detail::module_as<M>((*this)[i], "ModuleList: module " + std::to_string(i));
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

class ModuleDict : public Module {
 public:
  // Adds `module` as child `key` (non-empty, no '.', not already a key: else a gat::Error).
  // Returns *this.
  ModuleDict& insert(const std::string& key, std::shared_ptr<Module> module);

  size_t size() const { return modules_.size(); }
  bool contains(const std::string& key) const;
  // The module under `key` (a gat::Error naming the key when there is none), as a Module or as
  // the type it was added as.
  const std::shared_ptr<Module>& at(const std::string& key) const;
  template <class M>
  std::shared_ptr<M> get(const std::string& key) const {
    return detail::module_as<M>(at(key), "ModuleDict: module '" + key + "'");
  }
  std::vector<std::string> keys() const;           // in insertion order
  auto begin() const { return modules_.begin(); }  // (key, module) pairs in insertion order
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules_;
};

}  // namespace gat
