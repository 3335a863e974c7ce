// Trains the network of network.h on Cora and prints the test accuracy of its best epoch.
//
//   message_passing_network [DATA_DIR] [--epochs N] [--seed S]
//       DATA_DIR: the Planetoid files (ind.cora.*); or $GAT_DATA_DIR
#include <gat/framework/cuda_runtime.h>
#include <gat/train/trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "network.h"

namespace {

// A whole decimal number in [min, 10^9], else nullopt.
std::optional<long long> parse_count(const char* text, long long min) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < min || value > 1000000000) return std::nullopt;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("GAT_DATA_DIR");
  std::string data_dir = env ? env : "";
  example::RunOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--epochs" || arg == "--seed") && i + 1 < argc) {
      const long long min = arg == "--epochs" ? 1 : 0;
      const std::optional<long long> value = parse_count(argv[++i], min);
      if (!value)
        return std::fprintf(stderr,
                            "message_passing_network: %s takes a whole number from %lld to 10^9, not '%s'\n",
                            arg.c_str(), min, argv[i]),
               2;
      if (arg == "--epochs")
        options.epochs = *value;
      else
        options.seed = static_cast<uint64_t>(*value);
    } else if (arg[0] != '-') {
      data_dir = arg;
    } else {
      return std::fprintf(stderr, "usage: message_passing_network [DATA_DIR] [--epochs N] [--seed S]\n"), 2;
    }
  }
  if (data_dir.empty())
    return std::fprintf(stderr, "message_passing_network: give DATA_DIR or set GAT_DATA_DIR\n"), 2;
  try {
    const gat::Device device = gat::cuda::available() ? gat::Device::cuda : gat::Device::cpu;
    const gat::Dataset data = gat::dataset_to(gat::load_training_dataset("cora", data_dir), device);
    const example::RunResult r = example::train(data, options);
    std::printf("best epoch %lld: val_loss %.4f  val_acc %.4f  test_acc %.4f\n",
                static_cast<long long>(r.best_epoch), r.val_loss, r.val_acc, r.test_acc);
  } catch (const gat::Error& e) {
    std::fprintf(stderr, "message_passing_network: %s\n", e.what());
    return 1;
  }
  return 0;
}
