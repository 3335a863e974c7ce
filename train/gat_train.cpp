// gat_train: trains the two-layer GAT of Velickovic et al. (2018) on a node-classification
// dataset with the paper's recipe, over one or several seeds, and reports test accuracy.
//
//   gat_train --dataset cora --runs 10 --json
//   gat_train --dataset citeseer --save citeseer.safetensors
//   gat_train --load citeseer.safetensors            (evaluate a checkpoint, no training)
//   gat_train --dataset cora --info                  (dataset summary as one JSON line)
//
// Exit status: 0 on success, 2 for bad flags (with the usage), 1 for any other error (the
// message on stderr), including a failed write of stdout, the log or the checkpoint.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <omp.h>
#include <sys/resource.h>

#include "gat/datasets/registry.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/io.h"
#include "gat/framework/progress.h"
#include "gat/models/gat.h"
#include "gat/train/checkpoint.h"
#include "gat/train/cli.h"
#include "gat/train/trainer.h"

using namespace gat;
using cli::Flags;

namespace {

// The device allocations alive at the peak, [name, bytes per block, blocks], the most bytes
// first (empty on the CPU).
nlohmann::json peak_device_blocks() {
  nlohmann::json blocks = nlohmann::json::array();
  for (const cuda::PeakBlocks& b : cuda::peak_memory_breakdown()) blocks.push_back({b.what, b.bytes, b.count});
  return blocks;
}

// The process's peak resident set so far, in bytes (Linux reports kilobytes).
long long peak_host_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<long long>(usage.ru_maxrss) * 1024;
}

Device resolve_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "auto") return cuda::available() ? Device::cuda : Device::cpu;
  GAT_CHECK(cuda::available(), "--device cuda: ", cuda::unavailable_reason());
  return Device::cuda;
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

// ---- the two modes ----

int evaluate_checkpoint(const Flags& flags, Device device) {
  const CheckpointInfo info = CheckpointInfo::from_metadata(io::load_safetensors(flags.load).metadata, flags.load);
  std::string dataset = flags.dataset;
  if (!flags.dataset_given) {
    GAT_CHECK(!info.dataset.empty(), "checkpoint ", flags.load, ": metadata names no dataset; pass --dataset");
    dataset = info.dataset;
  }
  const Dataset data = dataset_to(with_self_loops(load_training_dataset(dataset, flags.data_dir)), device);
  const GATConfig& config = info.model;
  GAT_CHECK(config.in_features == data.num_features() && config.num_classes == data.num_classes &&
                config.edge_dim == data.num_edge_features(),
            "checkpoint ", flags.load, ": a model of ", config.in_features, " features, ",
            config.num_classes, " classes and ", config.edge_dim, " edge features does not fit ", dataset, " (",
            data.num_features(), " features, ", data.num_classes, " classes, ", data.num_edge_features(),
            " edge features)");
  check_self_loop_features(data, config.fill_value);
  Generator init(0);  // overwritten by the checkpoint
  GAT model(config, init);
  model.to(device);
  io::load_into(model, flags.load);
  auto forward = [&](const Features& x, const Graph& g, Generator& gen) {
    return model.forward(x, g, gen, data.edge_attr);
  };
  const Evaluation e = evaluate(model, forward, data, Features::choose(data.x, flags.train.sparse_max_density));
  if (!flags.quiet)
    std::printf("%s: checkpoint %s: train acc %.4f, val acc %.4f (loss %.4f), test acc %.4f\n",
                dataset.c_str(), flags.load.c_str(), e.train.acc, e.val.acc, e.val.loss, e.test.acc);
  if (flags.json) {
    const nlohmann::json j = {{"dataset", dataset},     {"device", device_name(device)},
                              {"checkpoint", flags.load}, {"train_acc", e.train.acc},
                              {"val_acc", e.val.acc},    {"val_loss", e.val.loss},
                              {"test_acc", e.test.acc}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());  // paths: UTF-8
  }
  return 0;
}

int train_runs(const Flags& flags, Device device) {
  if (!flags.save.empty()) io::check_save_path(flags.save);  // before the training, not after it
  if (!flags.checkpoint.empty()) io::check_save_path(flags.checkpoint);
  GAT_CHECK(flags.runs == 1 || (flags.checkpoint.empty() && flags.resume.empty()),
            "--checkpoint and --resume follow one run: --runs must be 1");
  std::ofstream log;
  if (!flags.log.empty()) {
    if (!flags.resume.empty()) {
      const io::Metadata meta = io::load_safetensors(flags.resume).metadata;
      truncate_log_after(flags.log, io::MetadataReader(meta, "--resume " + flags.resume).integer(kCheckpointEpochKey));
    }
    log.open(flags.log, flags.resume.empty() ? std::ios::trunc : std::ios::app);
    GAT_CHECK(log.is_open(), "--log: cannot open ", flags.log, " for writing: ", std::strerror(errno));
  }
  // The looped graph once, on the host, the only graph copied to the device (GAT's layers add
  // self loops: given a graph that has them, they keep no copy).
  const Dataset data = dataset_to(with_self_loops(load_training_dataset(flags.dataset, flags.data_dir)), device);
  GATConfig config = flags.model;
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.edge_dim = data.num_edge_features();
  config.validate(flags.dataset);
  GAT_CHECK(!flags.fill_value_given || config.edge_dim > 0, "--fill-value ", flags.fill_value, ": ", flags.dataset,
            " has no edge features (the value makes the self loops' edge features)");
  check_self_loop_features(data, config.fill_value);
  if (!flags.resume.empty()) {  // the parameters' names and shapes would disagree further down
    const GATConfig saved =
        GATConfig::from_metadata(io::load_safetensors(flags.resume).metadata, "--resume " + flags.resume);
    GAT_CHECK(saved.layer == config.layer, "--resume ", flags.resume, ": the run trained ",
              attention_layer_name(saved.layer), " layers, these flags ask for ", attention_layer_name(config.layer),
              " (--model)");
    // Any other field that differs would go on training another model than the run's, silently.
    const io::Metadata run = saved.to_metadata();
    std::string differences;
    for (const auto& [key, value] : config.to_metadata())
      if (run.at(key) != value)
        differences += detail::concat(differences.empty() ? "" : ", ", key, " ", value, " (the run's: ", run.at(key), ")");
    GAT_CHECK(differences.empty(), "--resume ", flags.resume, ": these flags ask for another model than the run's: ",
              differences, "; give the interrupted run's flags");
  }
  TrainOptions options = flags.train;
  options.checkpoints.path = flags.checkpoint;
  options.checkpoints.every = flags.checkpoint_every;
  options.checkpoints.metadata = CheckpointInfo{flags.dataset, config, flags.seed, 0, 0}.to_metadata();
  options.checkpoints.resume = flags.resume;
  const Features x = Features::choose(data.x, flags.train.sparse_max_density);  // once for all the runs
  std::vector<TrainResult> results;
  for (int64_t run = 0; run < flags.runs; ++run) {
    const uint64_t seed = flags.seed + static_cast<uint64_t>(run);
    Generator gen(seed);
    GAT model(config, gen);
    model.to(device);
    auto forward = [&](const Features& x, const Graph& g, Generator& gn) {
      return model.forward(x, g, gn, data.edge_attr);
    };
    EpochProgress epoch_lines(options.max_epochs);
    auto on_epoch = [&](const EpochStats& s) {
      if (log.is_open()) {
        const nlohmann::json j = {{"run", run},         {"epoch", s.epoch},       {"loss", s.loss},
                                  {"train_acc", s.train_acc}, {"val_acc", s.val_acc}, {"val_loss", s.val_loss},
                                  {"test_acc", s.test_acc},   {"ms", s.ms},         {"step_ms", s.step_ms}};
        log << j.dump() << '\n' << std::flush;
        GAT_CHECK(log.good(), "--log: writing ", flags.log, " failed: ", std::strerror(errno));
      }
      if (progress::enabled() && epoch_lines.due(s.epoch)) {
        char line[256];
        std::snprintf(line, sizeof line, "run %lld/%lld epoch %5lld  loss %.4f  train %.4f  val %.4f (loss %.4f)  test %.4f  %.2f ms",
                      static_cast<long long>(run + 1), static_cast<long long>(flags.runs),
                      static_cast<long long>(s.epoch), s.loss, s.train_acc, s.val_acc, s.val_loss,
                      s.test_acc, s.step_ms);
        progress::line(line);
      }
    };
    const TrainResult r = train_node_classifier(model, forward, data, x, options, gen, on_epoch);
    results.push_back(r);
    if (r.cuda_graphs_note.rfind("not recorded", 0) == 0 || r.cuda_graphs_note.rfind("dropped", 0) == 0)
      std::fprintf(stderr, "gat_train: CUDA graphs %s; the steps ran eagerly\n", r.cuda_graphs_note.c_str());
    if (!flags.quiet)
      std::printf("run %lld/%lld seed %llu: test acc %.4f at epoch %lld (val acc %.4f, loss %.4f), "
                  "%lld epochs, %.2f ms/step\n",
                  static_cast<long long>(run + 1), static_cast<long long>(flags.runs),
                  static_cast<unsigned long long>(seed), r.test_acc, static_cast<long long>(r.best_epoch),
                  r.val_acc, r.val_loss, static_cast<long long>(r.epochs), r.train_step_ms);
    if (run == 0 && !flags.save.empty())
      io::save(model, flags.save, CheckpointInfo{flags.dataset, config, seed, r.best_epoch, r.test_acc}.to_metadata());
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
        {"nodes", data.graph.num_nodes()}, {"edges", data.graph.num_edges() - data.graph.count_self_loops()},  // the dataset's, without the added loops
        {"peak_device_bytes", cuda::peak_memory_allocated()}, {"peak_host_bytes", peak_host_bytes()},
        {"peak_device_blocks", peak_device_blocks()},
        {"config", {{"model", attention_layer_name(config.layer)}, {"hidden", config.hidden}, {"heads", config.heads}, {"output_heads", config.output_heads},
                    {"dropout", config.dropout}, {"value_dropout", config.value_dropout}, {"lr", flags.train.lr},
                    {"weight_decay", flags.train.weight_decay}, {"patience", flags.train.patience},
                    {"max_epochs", flags.train.max_epochs}, {"edge_dim", config.edge_dim},
                    {"fill_value", config.fill_value.name()}}}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());  // paths: UTF-8
  }
  return 0;
}

// Reports a failed write of stdout (a full disk, a closed pipe, /dev/full): exit status 1.
int check_stdout(int status) {
  const bool flushed = std::fflush(stdout) == 0;
  if (flushed && !std::ferror(stdout)) return status;
  std::fprintf(stderr, "gat_train: writing the output to stdout failed%s%s\n", flushed ? "" : ": ",
               flushed ? "" : std::strerror(errno));
  return status == 0 ? 1 : status;
}

int run(const Flags& flags) {
  if (flags.info) {
    std::printf("%s\n", dataset_summary(load_dataset(flags.dataset, flags.data_dir)).c_str());
    return 0;
  }
  const Device device = resolve_device(flags.device);
  if (!flags.load.empty()) return evaluate_checkpoint(flags, device);
  return train_runs(flags, device);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines show up live in logs and pipes
  cli::Environment env;  // the environment is read here, and only here
  env.cuda_graphs = cli::cuda_graphs_enabled(std::getenv("GAT_CUDA_GRAPHS"));
  try {
    env.data_dir_default = default_data_dir();
  } catch (const Error&) {  // no home: only a Planetoid dataset without --data-dir needs the folder
    env.data_dir_default = "none (no HOME)";
  }
  Flags flags;
  try {
    flags = cli::parse(argc, argv, env);
  } catch (const cli::UsageError& e) {
    std::cerr << "gat_train: " << e.what() << "\n\n" << cli::usage(env);
    return 2;
  }
  if (flags.help) {
    std::printf("%s", cli::usage(env).c_str());
    return check_stdout(0);
  }
  if (flags.threads > 0) omp_set_num_threads(flags.threads);
  progress::enable(!flags.quiet);
  int status = 1;
  try {
    status = run(flags);
  } catch (const std::bad_alloc&) {
    std::cerr << "gat_train: out of memory (the dataset or the model is too large for this machine)\n";
  } catch (const std::exception& e) {  // gat::Error and anything from the libraries beneath
    std::cerr << "gat_train: " << e.what() << "\n";
  }
  return check_stdout(status);
}
