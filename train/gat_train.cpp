// gat_train: trains the two-layer GAT of Velickovic et al. (2018) on a node-classification
// dataset with the paper's recipe, over one or several seeds, and reports test accuracy.
//
//   gat_train --dataset cora --runs 10 --json
//   gat_train --dataset citeseer --save citeseer.safetensors
//   gat_train --load citeseer.safetensors            (evaluate a checkpoint, no training)
//   gat_train --dataset cora --info                  (dataset summary as one JSON line)
//   gat_train --dataset cora --checkpoint run.safetensors --log run.jsonl   (the run's state
//   gat_train --dataset cora --resume run.safetensors --log run.jsonl        after each epoch;
//                                                    continued after an interruption)
//
// Exit status: 0 on success, 2 for bad flags (with the usage), 1 for any other error (the
// message on stderr).

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "gat/datasets/registry.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/io.h"
#include "gat/models/gat.h"
#include "gat/train/trainer.h"

using namespace gat;

namespace {

struct Flags {
  std::string dataset = "cora";
  std::string data_dir;
  std::string device = "auto";
  int64_t epochs = 100000;
  int64_t patience = 100;
  double lr = 0.005;
  double weight_decay = 5e-4;
  int64_t hidden = 8;
  int64_t heads = 8;
  int64_t output_heads = 1;
  double dropout = 0.6;
  double value_dropout = GATConfig{}.value_dropout;
  double sparse_below = TrainOptions{}.sparse_max_density;
  uint64_t seed = 0;
  int64_t runs = 1;
  int threads = 0;  // 0: OpenMP's default (OMP_NUM_THREADS, else every core)
  std::string save, load, log;
  std::string checkpoint, resume;  // run checkpoints (train/trainer.h)
  int64_t checkpoint_every = 1;
  bool json = false, info = false, quiet = false;
  bool cuda_graphs = TrainOptions{}.cuda_graphs;
};

Device resolve_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "auto") return cuda::available() ? Device::cuda : Device::cpu;
  GAT_CHECK(cuda::available(), "--device cuda: ", cuda::unavailable_reason());
  return Device::cuda;
}

// ---- checkpoint metadata: what is needed to rebuild the model ----

io::Metadata checkpoint_metadata(const std::string& dataset, const GATConfig& c, uint64_t seed,
                                 const TrainResult& r) {
  auto str = [](auto v) { return nlohmann::json(v).dump(); };
  return {{"format", "gat_train"},
          {"dataset", dataset},
          {"in_features", str(c.in_features)},
          {"num_classes", str(c.num_classes)},
          {"hidden", str(c.hidden)},
          {"heads", str(c.heads)},
          {"output_heads", str(c.output_heads)},
          {"dropout", str(c.dropout)},
          {"value_dropout", str(c.value_dropout)},
          {"negative_slope", str(c.negative_slope)},
          {"seed", str(seed)},
          {"best_epoch", str(r.best_epoch)},
          {"test_acc", str(r.test_acc)}};
}

double metadata_number(const io::Metadata& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  GAT_CHECK(it != meta.end(), "checkpoint ", path, ": metadata has no '", key,
            "' (not written by gat_train?)");
  try {
    const nlohmann::json v = nlohmann::json::parse(it->second);
    if (v.is_number()) return v.get<double>();
  } catch (const nlohmann::json::exception&) {
  }
  GAT_FAIL("checkpoint ", path, ": metadata '", key, "' = '", it->second, "' is not a number");
}

GATConfig config_from_metadata(const io::Metadata& meta, const std::string& path) {
  auto count = [&](const char* key) {
    const double v = metadata_number(meta, key, path);
    GAT_CHECK(v >= 1 && v == std::floor(v), "checkpoint ", path, ": metadata '", key, "' = ", v,
              " is not a positive integer");
    return static_cast<int64_t>(v);
  };
  GATConfig c;
  c.in_features = count("in_features");
  c.num_classes = count("num_classes");
  c.hidden = count("hidden");
  c.heads = count("heads");
  c.output_heads = count("output_heads");
  c.dropout = metadata_number(meta, "dropout", path);
  c.negative_slope = metadata_number(meta, "negative_slope", path);
  return c;
}

// A resumed run's log: the lines of the epochs the checkpoint has done are kept, later ones (written
// after the checkpoint, before the interruption) dropped; the resumed epochs append to it.
void truncate_log_after(const std::string& path, int64_t epoch) {
  std::ifstream in(path);
  std::vector<std::string> kept;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    GAT_CHECK(!j.is_discarded() && j.contains("epoch"), "--log: ", path, ": line '", line,
              "' is not a gat_train log line");
    if (j["epoch"].get<int64_t>() <= epoch) kept.push_back(line);
  }
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& line : kept) out << line << '\n';
  GAT_CHECK(out.good(), "--log: rewriting ", path, " failed");
}

// Which epochs get a progress line on stderr, terminal or pipe alike: every epoch of a run of
// at most kEveryEpochUpTo epochs, else the first and then at most one a second.
class EpochProgress {
 public:
  static constexpr int64_t kEveryEpochUpTo = 100;
  explicit EpochProgress(int64_t max_epochs) : every_epoch_(max_epochs <= kEveryEpochUpTo) {}
  bool due(int64_t epoch) {
    const auto now = std::chrono::steady_clock::now();
    if (!every_epoch_ && epoch > 1 && now - last_ < std::chrono::seconds(1)) return false;
    last_ = now;
    return true;
  }

 private:
  bool every_epoch_;
  std::chrono::steady_clock::time_point last_;
};

// The dataset's recipe (train/trainer.h) for every hyperparameter the command line leaves out.
void apply_recipe(Flags& flags, const CLI::App& app) {
  const Recipe recipe = recipe_for(flags.dataset);
  if (app.count("--output-heads") == 0) flags.output_heads = recipe.output_heads;
  if (app.count("--lr") == 0) flags.lr = recipe.lr;
  if (app.count("--weight-decay") == 0) flags.weight_decay = recipe.weight_decay;
}

// ---- the two modes ----

int evaluate_checkpoint(const Flags& flags, bool dataset_given, Device device) {
  const io::Metadata meta = io::load_safetensors(flags.load).metadata;
  std::string dataset = flags.dataset;
  if (!dataset_given) {
    auto it = meta.find("dataset");
    GAT_CHECK(it != meta.end(), "checkpoint ", flags.load, ": metadata names no dataset; pass --dataset");
    dataset = it->second;
  }
  const Dataset data = dataset_to(load_training_dataset(dataset, flags.data_dir), device);
  const GATConfig config = config_from_metadata(meta, flags.load);
  GAT_CHECK(config.in_features == data.num_features() && config.num_classes == data.num_classes,
            "checkpoint ", flags.load, ": a model of ", config.in_features, " features and ",
            config.num_classes, " classes does not fit ", dataset, " (", data.num_features(),
            " features, ", data.num_classes, " classes)");
  Generator init(0);  // overwritten by the checkpoint
  GAT model(config, init);
  model.to(device);
  io::load_into(model, flags.load);
  auto forward = [&](const Features& x, const Graph& g, Generator& gen) { return model.forward(x, g, gen); };
  const Evaluation e = evaluate(model, forward, data, Features::choose(data.x, flags.sparse_below));
  if (!flags.quiet)
    std::printf("%s: checkpoint %s: train acc %.4f, val acc %.4f (loss %.4f), test acc %.4f\n",
                dataset.c_str(), flags.load.c_str(), e.train.acc, e.val.acc, e.val.loss, e.test.acc);
  if (flags.json) {
    const nlohmann::json j = {{"dataset", dataset},     {"device", device_name(device)},
                              {"checkpoint", flags.load}, {"train_acc", e.train.acc},
                              {"val_acc", e.val.acc},    {"val_loss", e.val.loss},
                              {"test_acc", e.test.acc}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

int train_runs(const Flags& flags, Device device) {
  const Dataset data = dataset_to(load_training_dataset(flags.dataset, flags.data_dir), device);
  GATConfig config;
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.hidden = flags.hidden;
  config.heads = flags.heads;
  config.output_heads = flags.output_heads;
  config.dropout = flags.dropout;
  config.value_dropout = flags.value_dropout;
  TrainOptions options;
  options.lr = flags.lr;
  options.weight_decay = flags.weight_decay;
  options.max_epochs = flags.epochs;
  options.patience = flags.patience;
  options.cuda_graphs = flags.cuda_graphs;
  options.checkpoints.path = flags.checkpoint;
  options.checkpoints.every = flags.checkpoint_every;
  options.checkpoints.metadata = checkpoint_metadata(flags.dataset, config, flags.seed, TrainResult{});
  options.checkpoints.resume = flags.resume;
  GAT_CHECK(flags.runs == 1 || (flags.checkpoint.empty() && flags.resume.empty()),
            "--checkpoint and --resume follow one run: --runs must be 1");

  std::ofstream log;
  if (!flags.log.empty()) {
    if (!flags.resume.empty()) {
      const io::Metadata meta = io::load_safetensors(flags.resume).metadata;
      const auto it = meta.find(kCheckpointEpochKey);
      GAT_CHECK(it != meta.end(), "--resume: ", flags.resume, " is not a run checkpoint (no '",
                kCheckpointEpochKey, "')");
      truncate_log_after(flags.log, std::stoll(it->second));
    }
    log.open(flags.log, flags.resume.empty() ? std::ios::trunc : std::ios::app);
    GAT_CHECK(log.is_open(), "--log: cannot open ", flags.log, " for writing");
  }
  const Features x = Features::choose(data.x, flags.sparse_below);  // once for all the runs
  std::vector<TrainResult> results;
  for (int64_t run = 0; run < flags.runs; ++run) {
    const uint64_t seed = flags.seed + static_cast<uint64_t>(run);
    Generator gen(seed);
    GAT model(config, gen);
    model.to(device);
    auto forward = [&](const Features& x, const Graph& g, Generator& gn) { return model.forward(x, g, gn); };
    EpochProgress progress(flags.epochs);
    auto on_epoch = [&](const EpochStats& s) {
      if (log.is_open()) {
        const nlohmann::json j = {{"run", run},         {"epoch", s.epoch},       {"loss", s.loss},
                                  {"train_acc", s.train_acc}, {"val_acc", s.val_acc}, {"val_loss", s.val_loss},
                                  {"test_acc", s.test_acc},   {"ms", s.ms},         {"step_ms", s.step_ms}};
        log << j.dump() << '\n' << std::flush;
        GAT_CHECK(log.good(), "--log: writing ", flags.log, " failed");
      }
      if (!flags.quiet && progress.due(s.epoch))
        std::fprintf(stderr, "run %lld/%lld epoch %5lld  loss %.4f  train %.4f  val %.4f (loss %.4f)  test %.4f  %.2f ms\n",
                    static_cast<long long>(run + 1), static_cast<long long>(flags.runs),
                    static_cast<long long>(s.epoch), s.loss, s.train_acc, s.val_acc, s.val_loss,
                    s.test_acc, s.step_ms);
    };
    const TrainResult r = train_node_classifier(model, forward, data, x, options, gen, on_epoch);
    results.push_back(r);
    if (r.cuda_graphs_note.rfind("not recorded", 0) == 0)
      std::fprintf(stderr, "gat_train: CUDA graphs %s; the steps ran eagerly\n", r.cuda_graphs_note.c_str());
    if (!flags.quiet)
      std::printf("run %lld/%lld seed %llu: test acc %.4f at epoch %lld (val acc %.4f, loss %.4f), "
                  "%lld epochs, %.2f ms/step\n",
                  static_cast<long long>(run + 1), static_cast<long long>(flags.runs),
                  static_cast<unsigned long long>(seed), r.test_acc, static_cast<long long>(r.best_epoch),
                  r.val_acc, r.val_loss, static_cast<long long>(r.epochs), r.train_step_ms);
    if (run == 0 && !flags.save.empty())
      io::save(model, flags.save, checkpoint_metadata(flags.dataset, config, seed, r));
  }

  // Mean and sample standard deviation over the runs.
  auto mean_std = [](const std::vector<double>& v) {
    double m = 0, ss = 0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    for (double x : v) ss += (x - m) * (x - m);
    return std::pair<double, double>{m, v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0};
  };
  std::vector<double> accs, epochs, best_epochs, step_ms;
  std::vector<std::string> graph_notes;
  for (const TrainResult& r : results) {
    accs.push_back(r.test_acc);
    epochs.push_back(static_cast<double>(r.epochs));
    best_epochs.push_back(static_cast<double>(r.best_epoch));
    step_ms.push_back(r.train_step_ms);
    graph_notes.push_back(r.cuda_graphs_note);
  }
  const auto [acc_mean, acc_std] = mean_std(accs);
  const double epochs_mean = mean_std(epochs).first, step_ms_mean = mean_std(step_ms).first;
  if (!flags.quiet)
    std::printf("%s on %s: test accuracy %.2f +- %.2f %% over %lld run(s); %.0f epochs on average; "
                "%.2f ms per training step\n",
                flags.dataset.c_str(), device_name(device), 100 * acc_mean, 100 * acc_std,
                static_cast<long long>(flags.runs), epochs_mean, step_ms_mean);
  if (flags.json) {
    const nlohmann::json j = {
        {"dataset", flags.dataset},  {"device", device_name(device)},
        {"runs", flags.runs},        {"seed", flags.seed},
        {"test_acc_mean", acc_mean}, {"test_acc_std", acc_std},
        {"test_accs", accs},         {"epochs_mean", epochs_mean},
        {"epochs", epochs},          {"best_epochs", best_epochs},
        {"train_step_ms", step_ms_mean}, {"train_step_ms_per_run", step_ms},
        {"threads", omp_get_max_threads()}, {"cuda_graphs", graph_notes},
        {"config", {{"hidden", flags.hidden}, {"heads", flags.heads}, {"output_heads", flags.output_heads},
                    {"dropout", flags.dropout}, {"value_dropout", flags.value_dropout}, {"lr", flags.lr}, {"weight_decay", flags.weight_decay},
                    {"patience", flags.patience}, {"max_epochs", flags.epochs}}}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines show up live in logs and pipes
  Flags flags;
  CLI::App app{"Train the two-layer GAT (Velickovic et al. 2018) on a node-classification dataset."};
  app.option_defaults()->always_capture_default();
  app.add_option("--dataset", flags.dataset,
                 "cora | citeseer | pubmed | synthetic:<nodes>:<avg_degree>:<seed> | a directory "
                 "(with --load: the checkpoint's dataset unless given)");
  app.add_option("--data-dir", flags.data_dir,
                 "folder of the Planetoid raw files; the missing ones are downloaded there")
      ->default_str("$GAT_DATA_DIR, else $XDG_CACHE_HOME/gat/planetoid or ~/.cache/gat/planetoid");
  app.add_option("--device", flags.device, "where to train")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--epochs", flags.epochs, "maximum epochs (early stopping ends sooner)")
      ->check(CLI::PositiveNumber);
  app.add_option("--patience", flags.patience, "epochs without improvement before stopping")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", flags.lr, "Adam learning rate (PubMed: 0.01)")->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", flags.weight_decay, "L2 weight decay (PubMed: 0.001)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--hidden", flags.hidden, "features per head in the first layer")->check(CLI::PositiveNumber);
  app.add_option("--heads", flags.heads, "heads of the first layer")->check(CLI::PositiveNumber);
  app.add_option("--output-heads", flags.output_heads, "heads of the output layer (8 for PubMed)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dropout", flags.dropout, "feature and attention dropout rate")
      ->check(CLI::Range(0.0, 0.999999));
  app.add_option("--value-dropout", flags.value_dropout,
                 "dropout on the projected features where they are aggregated, as the GAT authors' "
                 "code does (0: as PyG's GATConv)")
      ->check(CLI::Range(0.0, 0.999999));
  app.add_option("--sparse-below", flags.sparse_below,
                 "pass the features as a sparse CSR matrix when fewer than this fraction is non-zero "
                 "(0: always dense; same results up to rounding)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--cuda-graphs,!--no-cuda-graphs", flags.cuda_graphs,
               "on CUDA, record the training step and evaluation as CUDA graphs and replay them "
               "(the same results, less host work per epoch; default on unless "
               "GAT_CUDA_GRAPHS=0)");
  app.add_option("--seed", flags.seed, "seed of the first run");
  app.add_option("--runs", flags.runs, "runs with seeds seed, seed+1, ...; reports mean +- std")
      ->check(CLI::PositiveNumber);
  app.add_option("--save", flags.save, "write the first run's trained parameters (safetensors)");
  auto* load = app.add_option("--load", flags.load, "evaluate this checkpoint instead of training");
  app.add_option("--log", flags.log, "one JSON line per epoch to this file");
  app.add_flag("--json", flags.json, "print a JSON summary as the last line");
  app.add_flag("--info", flags.info, "print the dataset summary as one JSON line and exit");
  app.add_flag("--quiet", flags.quiet, "no progress lines");
  app.add_option("--checkpoint", flags.checkpoint,
                 "write the run's whole state (parameters, optimiser, early stopping, epoch, dropout "
                 "generator) to this file during training, to continue it with --resume");
  app.add_option("--checkpoint-every", flags.checkpoint_every, "epochs between --checkpoint writes (also "
                 "written at the last epoch)")->check(CLI::PositiveNumber);
  auto* resume = app.add_option("--resume", flags.resume,
                                "continue the run saved by --checkpoint in this file, bit for bit (give the "
                                "same flags as the interrupted run; --log appends to its log)");
  app.add_option("--threads", flags.threads, "OpenMP threads (default: OMP_NUM_THREADS, else every core)")
      ->check(CLI::Range(1, 4096));
  load->excludes(app.get_option("--save"));
  load->excludes(resume);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "gat_train: " << e.what() << "\n\n" << app.help();
    return 2;
  }

  apply_recipe(flags, app);
  if (flags.threads > 0) omp_set_num_threads(flags.threads);

  try {
    if (flags.info) {
      std::printf("%s\n", dataset_summary(load_dataset(flags.dataset, flags.data_dir)).c_str());
      return 0;
    }
    const Device device = resolve_device(flags.device);
    if (!flags.load.empty()) return evaluate_checkpoint(flags, app.count("--dataset") > 0, device);
    return train_runs(flags, device);
  } catch (const std::exception& e) {  // gat::Error and anything from the libraries beneath
    std::cerr << "gat_train: " << e.what() << "\n";
    return 1;
  }
}
