// gat_train's flag parser from a test: the arguments as a user types them after "gat_train".
#pragma once

#include <string>
#include <vector>

#include "gat/train/cli.h"

namespace gat::testing {

inline cli::Flags parse(std::vector<std::string> args, const cli::Environment& env = {}) {
  args.insert(args.begin(), "gat_train");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return cli::parse(static_cast<int>(argv.size()), argv.data(), env);
}

// The UsageError's message for `args`, or "" when they parse.
inline std::string usage_error(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const cli::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace gat::testing
