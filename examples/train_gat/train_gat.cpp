// The paper's GAT on Cora, as a program that uses gat as a library: load the data, train with
// early stopping (Adam lr 0.005, L2 5e-4, patience 100), evaluate, save the parameters.
//
//   train_gat [DATA_DIR] [--epochs N] [--out gat_cora.safetensors]
// DATA_DIR holds the Planetoid files (ind.cora.x, ...); without it, $GAT_DATA_DIR. --out is
// checked before training, and may not lie inside DATA_DIR.
#include <gat/framework/cuda_runtime.h>
#include <gat/framework/io.h>
#include <gat/models/gat.h>
#include <gat/train/trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  const char* env = std::getenv("GAT_DATA_DIR");
  std::string data_dir = env ? env : "", out = "gat_cora.safetensors";
  gat::TrainOptions options;  // the paper's recipe
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--epochs" && i + 1 < argc) {
      // The whole argument, a number: atoll read "abc" as 0 (reported as "max_epochs 0") and
      // "1x" as 1. train() checks the range.
      const char* text = argv[++i];
      char* end = nullptr;
      errno = 0;
      options.max_epochs = std::strtoll(text, &end, 10);
      if (end == text || *end != '\0' || errno != 0)
        return std::fprintf(stderr, "train_gat: --epochs '%s' is not a whole number\n", text), 2;
    } else if (arg == "--out" && i + 1 < argc)
      out = argv[++i];
    else if (arg[0] != '-')
      data_dir = arg;
    else
      return std::fprintf(stderr, "usage: train_gat [DATA_DIR] [--epochs N] [--out PATH]\n"), 2;
  }
  if (data_dir.empty()) return std::fprintf(stderr, "train_gat: give DATA_DIR or set GAT_DATA_DIR\n"), 2;
  try {
    // The output is checked before any work, and kept out of the data folder: `--out
    // DATA_DIR/ind.cora.x` trained, then replaced the Planetoid file with the model (as root even
    // in a read-only folder), and a bad path (a device, /proc) failed only after training.
    gat::io::check_save_path(out, "--out");
    gat::io::check_file_creatable_beside(out, "--out");
    if (gat::io::inside_folder(out, data_dir))
      return std::fprintf(stderr,
                          "train_gat: --out %s is inside the data folder %s; save the model elsewhere\n",
                          out.c_str(), data_dir.c_str()),
             2;
    const gat::Device device = gat::cuda::available() ? gat::Device::cuda : gat::Device::cpu;
    const gat::Dataset data = gat::dataset_to(gat::load_training_dataset("cora", data_dir), device);

    gat::GATConfig config;  // hidden 8 x 8 heads, dropout 0.6
    config.in_features = data.num_features();
    config.num_classes = data.num_classes;
    gat::Generator init(0), dropout(1);
    gat::GAT model(config, init);
    model.to(device);
    auto forward = [&](const gat::Features& x, const gat::Graph& graph, gat::Generator& gen) {
      return model.forward(x, graph, gen);
    };

    const gat::TrainResult result =
        gat::train_node_classifier(model, forward, data, options, dropout, [](const gat::EpochStats& s) {
          if (s.epoch % 50 == 0)
            std::printf("epoch %4lld  loss %.4f  val_acc %.4f\n", static_cast<long long>(s.epoch), s.loss,
                        s.val_acc);
        });
    // The model now holds the parameters of the epoch early stopping chose.
    const gat::Evaluation eval = gat::evaluate(model, forward, data);
    std::printf("best epoch %lld of %lld: val_acc %.4f  test_acc %.4f\n",
                static_cast<long long>(result.best_epoch), static_cast<long long>(result.epochs),
                eval.val.acc, eval.test.acc);
    gat::io::save(model, out, {{"dataset", "cora"}});
    std::printf("saved %s\n", out.c_str());
  } catch (const gat::Error& e) {
    std::fprintf(stderr, "train_gat: %s\n", e.what());
    return 1;
  }
  return 0;
}
