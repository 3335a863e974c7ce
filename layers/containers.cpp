#include "gat/layers/containers.h"

#include "gat/framework/quote.h"

namespace gat {

ModuleList& ModuleList::append(std::shared_ptr<Module> module) {
  GAT_CHECK(module != nullptr, "ModuleList::append: null module");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
  return *this;
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  GAT_CHECK(i < modules_.size(), "ModuleList: index ", i, " out of range (", modules_.size(), " modules)");
  return modules_[i];
}

ModuleDict& ModuleDict::insert(const std::string& key, std::shared_ptr<Module> module) {
  GAT_CHECK(module != nullptr, "ModuleDict::insert: null module for key ", quote(key));
  register_module(key, module);  // checks the key: non-empty, no '.', new
  modules_.emplace_back(key, std::move(module));
  return *this;
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [name, module] : modules_)
    if (name == key) return true;
  return false;
}

const std::shared_ptr<Module>& ModuleDict::at(const std::string& key) const {
  for (const auto& entry : modules_)
    if (entry.first == key) return entry.second;
  GAT_FAIL("ModuleDict: no module ", quote(key), " (", modules_.size(), " keys)");
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [name, module] : modules_) out.push_back(name);
  return out;
}

}  // namespace gat
