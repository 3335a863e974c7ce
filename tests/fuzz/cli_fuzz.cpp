// libFuzzer target for gat_train's flag parser (train/cli.h): the input is the argument list,
// arguments separated by NUL bytes. Every input must end in Flags that pass the structs' own
// validation, or a cli::UsageError; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gat/train/cli.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"gat_train"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  if (!current.empty()) args.push_back(current);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    const gat::cli::Flags flags = gat::cli::parse(static_cast<int>(argv.size()), argv.data());
    if (flags.help) return 0;
    gat::GATConfig config = flags.model;  // what a dataset would complete
    config.in_features = 1;
    config.num_classes = 1;
    config.validate();  // a flag the parser let through must be a value the model accepts
    flags.train.validate();
  } catch (const gat::cli::UsageError&) {
  }
  return 0;
}
