// gat_train: trains the two-layer GAT of Velickovic et al. (2018) on a node-classification
// dataset with the paper's recipe, over one or several seeds, and reports test accuracy.
//
//   gat_train --dataset cora --runs 10 --json
//   gat_train --dataset citeseer --save citeseer.safetensors
//   gat_train --load citeseer.safetensors            (evaluate a checkpoint, no training)
//   gat_train --dataset cora --info                  (dataset summary as one JSON line)
//   gat_train --dataset ppi --data-dir DIR           (the inductive model on PPI's raw files)
//
// Exit status: 0 on success, 2 for bad flags (with the usage), 1 for any other error (the
// message on stderr), including a failed write of stdout, the log or the checkpoint.
#include <omp.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gat/datasets/registry.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/io.h"
#include "gat/framework/process.h"
#include "gat/framework/progress.h"
#include "gat/framework/quote.h"
#include "gat/models/gat.h"
#include "gat/train/checkpoint.h"
#include "gat/train/cli.h"
#include "gat/train/inductive_training.h"
#include "gat/train/sampled_training.h"
#include "gat/train/trainer.h"

using namespace gat;
using cli::Flags;

namespace {

// The device allocations alive at the peak, [name, bytes per block, blocks], the most bytes
// first (empty on the CPU).
nlohmann::json peak_device_blocks() {
  nlohmann::json blocks = nlohmann::json::array();
  for (const cuda::PeakBlocks& b : cuda::peak_memory_breakdown())
    blocks.push_back({b.what, b.bytes, b.count});
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

// What a resumed run's log starts with: the lines of epochs 1..epoch of the log at `path` (later
// ones were written after the checkpoint, before the interruption). A last line cut short (no
// newline, not JSON: the disk filled up) is dropped; any other line that is not one of
// gat_train's is refused, and so is a log whose epochs do not run 1, 2, ... up to at least
// `epoch` (the log of another run). A log that does not exist yet starts empty.
std::string resumed_log(const std::string& path, int64_t epoch) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return "";
  const std::string text = io::read_regular_file(path);
  std::string kept;
  int64_t next = 1;  // the epoch the next line must have
  size_t line_number = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    const bool last_cut = end == std::string::npos;
    const std::string line = text.substr(at, last_cut ? std::string::npos : end - at);
    at = last_cut ? text.size() : end + 1;
    ++line_number;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    const bool ours = j.is_object() && j.contains("run") && j["run"] == 0 && j.contains("epoch") &&
                      j["epoch"].is_number_integer();
    if (!ours && last_cut) break;
    GAT_CHECK(ours, "--log ", path, ":", line_number, ": ", quote(line),
              " is not a line of gat_train's log of one run");
    GAT_CHECK(j["epoch"] == next, "--log ", path, ":", line_number, ": epoch ", j["epoch"].dump(),
              " where epoch ", next, " was due (not the log of the run that --resume continues)");
    if (next++ <= epoch) kept += line + '\n';
  }
  GAT_CHECK(next == 1 || next > epoch, "--log ", path, ": holds epochs 1..", next - 1,
            " but the checkpoint is at epoch ", epoch, " (not the log of the run that --resume continues)");
  return kept;
}

// The output flags' paths: each checked before any work (a regular file or a new path, never a
// link, device or FIFO, in a folder where a file can be created), each different from the others
// and from every input the run reads: the --resume checkpoint (except that --checkpoint may be it:
// it is read whole before the first write, and replaced atomically), and the dataset's files.
void check_outputs(const Flags& flags) {
  const std::pair<const char*, std::string> outputs[] = {
      {"--save", flags.save}, {"--checkpoint", flags.checkpoint}, {"--log", flags.log}};
  const bool dataset_folder = dataset_is_folder(flags.dataset);
  const std::string planetoid_dir = flags.data_dir.empty() ? default_data_dir() : flags.data_dir;
  for (size_t i = 0; i < std::size(outputs); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path.empty()) continue;
    io::check_save_path(path, flag);
    io::check_file_creatable_beside(path, flag);
    for (size_t k = i + 1; k < std::size(outputs); ++k)
      GAT_CHECK(outputs[k].second.empty() || !io::same_file(path, outputs[k].second), flag, " ", path,
                " and ", outputs[k].first, " ", outputs[k].second,
                " are the same file: each output needs a path of its own");
    GAT_CHECK(
        flags.resume.empty() || std::string(flag) == "--checkpoint" || !io::same_file(path, flags.resume),
        flag, " ", path, " is the --resume checkpoint, an input of this run");
    GAT_CHECK(!dataset_folder || !io::inside_folder(path, flags.dataset), flag, " ", path,
              " is inside the dataset's folder ", flags.dataset, ", an input of this run");
    const std::filesystem::path at(path);
    const std::string folder = at.has_parent_path() ? at.parent_path().string() : ".";
    GAT_CHECK(dataset_folder || at.filename().string().rfind("ind.", 0) != 0 ||
                  !io::same_file(folder, planetoid_dir),
              flag, " ", path, " is a Planetoid file of the data folder ", planetoid_dir,
              ", an input of this run");
  }
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

// The dataset `name`, as training uses it (Dataset::preprocessing applied) or as it is stored
// (--info). An error names where the name came from (`source`: a flag, or the checkpoint) and the
// name before what the loader says.
Dataset load_named(const char* source, const std::string& name, const std::string& data_dir, bool training) {
  try {
    return training ? load_training_dataset(name, data_dir) : load_dataset(name, data_dir);
  } catch (const Error& e) {
    throw Error(detail::concat(source, " ", quote(name), ": ", e.what()));
  }
}

// ---- the two modes ----

// The metadata keys of the model flags, by flag.
const std::pair<const char*, const char*> kModelFlagKeys[] = {
    {"--model", "layer"},           {"--hidden", "hidden"},
    {"--heads", "heads"},           {"--output-heads", "output_heads"},
    {"--dropout", "dropout"},       {"--value-dropout", "value_dropout"},
    {"--fill-value", "fill_value"}, {"--precision", "precision"}};

// --load: the model, the dataset and the parameters come from the checkpoint. Model flags that
// are given must agree with it. The dataset is --dataset if given, else the checkpoint's (a
// folder is recorded by its absolute path, so it is found from any working folder), which must
// still hold what the model was trained on (its digest).
int evaluate_checkpoint(const Flags& flags, Device device) {
  const io::Safetensors file = io::load_safetensors(flags.load);
  const CheckpointInfo info = CheckpointInfo::from_metadata(file.metadata, "--load " + flags.load);
  const io::Metadata saved = info.model.to_metadata(), asked = flags.model.to_metadata();
  io::Metadata given;
  for (const auto& [flag, key] : kModelFlagKeys)
    if (flags.given.count(flag)) given[key] = asked.at(key);
  const std::string differences = flag_differences(saved, given, "the checkpoint's");
  GAT_CHECK(differences.empty(), "--load ", flags.load,
            ": these flags differ from the checkpoint's model: ", differences,
            "; leave them out (the checkpoint's model is evaluated)");
  std::string dataset = flags.dataset;
  if (!flags.dataset_given) {
    GAT_CHECK(!info.dataset.empty(), "checkpoint ", flags.load,
              ": metadata names no dataset; pass --dataset");
    dataset = info.dataset;
  }
  Dataset host = load_named(flags.dataset_given ? "--dataset" : "the checkpoint's dataset", dataset,
                            flags.data_dir, true);
  GAT_CHECK(flags.dataset_given || info.dataset_digest.empty() || dataset_digest(host) == info.dataset_digest,
            "--load ", flags.load, ": the dataset ", dataset,
            " is not the one the model was trained on (content digest ", dataset_digest(host),
            ", the checkpoint's: ", info.dataset_digest, "); pass --dataset to evaluate on it all the same");
  const Dataset data = dataset_to(with_self_loops(std::move(host)), device);  // frees the unlooped graph
  const GATConfig& config = info.model;
  GAT_CHECK(config.in_features == data.num_features() && config.num_classes == data.num_classes &&
                config.edge_dim == data.num_edge_features(),
            "checkpoint ", flags.load, ": a model of ", config.in_features, " features, ", config.num_classes,
            " classes and ", config.edge_dim, " edge features does not fit ", dataset, " (",
            data.num_features(), " features, ", data.num_classes, " classes, ", data.num_edge_features(),
            " edge features)");
  check_self_loop_features(data, config.fill_value);
  Generator init(0);  // overwritten by the checkpoint
  GAT model(config, init);
  model.to(device);
  io::load_into(model, file, flags.load);
  auto forward = [&](const Features& x, const Graph& g, Generator& gen) {
    return model.forward(x, g, gen, data.edge_attr);
  };
  const Evaluation e =
      evaluate(model, forward, data, Features::choose(data.x, flags.train.sparse_max_density));
  check_finite_evaluation(e, "--load " + flags.load + " on " + dataset);
  if (!flags.quiet)
    std::printf("%s: checkpoint %s: train acc %.4f, val acc %.4f (loss %.4f), test acc %.4f\n",
                dataset.c_str(), flags.load.c_str(), e.train.acc, e.val.acc, e.val.loss, e.test.acc);
  if (flags.json) {
    const nlohmann::json j = {{"dataset", dataset},       {"device", device_name(device)},
                              {"checkpoint", flags.load}, {"train_acc", e.train.acc},
                              {"val_acc", e.val.acc},     {"val_loss", e.val.loss},
                              {"test_acc", e.test.acc}};
    std::printf("%s\n",
                j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());  // paths: UTF-8
  }
  return 0;
}

// Mean and sample standard deviation over the runs.
std::pair<double, double> mean_std(const std::vector<double>& v) {
  double m = 0, ss = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) ss += (x - m) * (x - m);
  return {m, v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0};
}

// A checkpoint's metadata: CheckpointInfo's and the training flags that shape the run.
io::Metadata checkpoint_metadata(const CheckpointInfo& info, const TrainOptions& options) {
  io::Metadata meta = info.to_metadata();
  for (const auto& [key, value] : training_metadata(options)) meta[key] = value;
  return meta;
}

// Refuses a --resume whose run differs from what these flags and this dataset would train: the
// layer kind first (the parameters' names differ), then every model flag, the training flags
// that shape the run, the seed and the dataset's content, all differences in one message.
void check_resumed_run(const Flags& flags, const io::Metadata& run, const io::Metadata& wanted) {
  const std::string where = "--resume " + flags.resume;
  const GATConfig saved = GATConfig::from_metadata(run, where);
  GAT_CHECK(saved.layer == flags.model.layer, where, ": the run trained ", attention_layer_name(saved.layer),
            " layers, these flags ask for ", attention_layer_name(flags.model.layer), " (--model)");
  const std::string differences = flag_differences(run, wanted, "the run's");
  GAT_CHECK(differences.empty(), where, ": these flags differ from the run's: ", differences,
            "; give the interrupted run's flags and dataset (only --epochs may differ)");
}

// The epochs of a run whose training or validation loss was not finite (logged as null). Early
// stopping never remembers them, so such a run (fresh or resumed) ends with an earlier epoch's
// result; report() says so on stderr rather than leaving it to the log.
class NonFiniteEpochs {
 public:
  void add(const EpochStats& s) {
    if (std::isfinite(s.loss) && std::isfinite(s.val_loss)) return;
    if (count_++ == 0) first_ = s.epoch;
  }
  void report(int64_t run, const TrainResult& r) const {
    if (count_ == 0) return;
    std::fprintf(
        stderr,
        "gat_train: run %lld: the loss was not finite in %lld epoch(s), the first epoch %lld (logged as "
        "null): the outputs overflowed or turned NaN; the result is epoch %lld's, the last remembered\n",
        static_cast<long long>(run) + 1, static_cast<long long>(count_), static_cast<long long>(first_),
        static_cast<long long>(r.best_epoch));
  }

 private:
  int64_t count_ = 0, first_ = 0;
};

// A run's closing line: its test score at the remembered epoch ("acc", or "micro-F1" for the
// inductive model, whose TrainResult holds micro-F1 where it holds accuracy).
void print_run(const Flags& flags, int64_t run, uint64_t seed, const TrainResult& r, const char* score) {
  std::printf(
      "run %lld/%lld seed %llu: test %s %.4f at epoch %lld (val %s %.4f, loss %.4f), %lld epochs, %.2f "
      "ms/step\n",
      static_cast<long long>(run) + 1, static_cast<long long>(flags.runs),
      static_cast<unsigned long long>(seed), score, r.test_acc, static_cast<long long>(r.best_epoch), score,
      r.val_acc, r.val_loss, static_cast<long long>(r.epochs), r.train_step_ms);
}

int train_runs(const Flags& flags, Device device) {
  check_outputs(flags);  // before anything is read or written
  GAT_CHECK(flags.runs == 1 || (flags.checkpoint.empty() && flags.resume.empty()),
            "--checkpoint and --resume follow one run: --runs must be 1");
  io::Metadata resumed;                // the --resume checkpoint's metadata
  std::string log_start;               // what the log starts with (a resumed run's earlier lines)
  std::optional<double> resumed_rate;  // the optimiser's saved rate
  if (!flags.resume.empty()) {
    const io::Safetensors file = io::load_safetensors(flags.resume);
    resumed = file.metadata;
    check_checkpoint_format(resumed, "--resume " + flags.resume);
    GAT_CHECK(is_run_checkpoint(resumed), "--resume ", flags.resume, ": holds no run state (no metadata '",
              kCheckpointEpochKey,
              "'): not a run checkpoint written by --checkpoint (a model saved by --save is evaluated with "
              "--load)");
    const auto rate = file.tensors.find(std::string(io::kOptimizerPrefix) + "lr");
    if (rate != file.tensors.end() && rate->second.dtype() == DType::f64 && rate->second.numel() == 1)
      resumed_rate = rate->second.item();  // (any other form is refused with the optimiser's state)
    const int64_t epoch =
        io::MetadataReader(resumed, "--resume " + flags.resume).integer(kCheckpointEpochKey);
    check_in_range("--resume " + flags.resume + ": metadata " + kCheckpointEpochKey, epoch,
                   TrainOptions::kEpochsRange);
    if (!flags.log.empty()) log_start = resumed_log(flags.log, epoch);
  }
  // The looped graph once, on the host, the only graph copied to the device (GAT's layers add
  // self loops: given a graph that has them, they keep no copy). The graph without loops is freed
  // once the looped one is built: kept, it would be a second graph through the whole run.
  // Sampled training keeps the dataset on the host, its graph without loops (the layers add
  // them to each block): only the batches go to the device.
  Dataset host = load_named("--dataset", flags.dataset, flags.data_dir, true);
  const std::string digest = dataset_digest(host);
  const bool sampled = flags.batch_size > 0;
  if (sampled && host.edge_attr.defined())
    check_self_loop_features(with_self_loops(host), flags.model.fill_value);
  const Dataset data = sampled ? std::move(host) : dataset_to(with_self_loops(std::move(host)), device);
  GATConfig config = flags.model;
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.edge_dim = data.num_edge_features();
  config.validate(flags.dataset);
  GAT_CHECK(!flags.fill_value_given || config.edge_dim > 0, "--fill-value ", flags.fill_value, ": ",
            flags.dataset, " has no edge features (the value makes the self loops' edge features)");
  if (!sampled) check_self_loop_features(data, config.fill_value);
  TrainOptions options = flags.train;
  const CheckpointInfo run_info{recorded_dataset_name(flags.dataset), digest, config, flags.seed, 0, 0};
  if (!flags.resume.empty()) {
    io::Metadata wanted = config.to_metadata();
    for (const auto& [key, value] : training_metadata(options)) wanted[key] = value;
    const io::Metadata info = run_info.to_metadata();
    for (const char* key : {"seed", kDatasetDigestKey}) wanted[key] = info.at(key);
    check_resumed_run(flags, resumed, wanted);
    // gat_train never changes the rate during a run: the optimiser's must be the recorded --lr.
    GAT_CHECK(!resumed_rate || *resumed_rate == options.lr, "--resume ", flags.resume,
              ": the optimiser's saved rate 'optimizer.lr' ", *resumed_rate, " is not the run's --lr ",
              options.lr, " (gat_train keeps the rate of a run fixed)");
  }
  options.checkpoints.path = flags.checkpoint;
  options.checkpoints.every = flags.checkpoint_every;
  options.checkpoints.metadata = checkpoint_metadata(run_info, options);
  options.checkpoints.resume = flags.resume;
  // Once for all the runs (sampled runs gather dense rows of data.x).
  const Features x = sampled ? Features(data.x) : Features::choose(data.x, flags.train.sparse_max_density);
  // The log is written from the first epoch's end on: nothing is replaced before every check
  // passed (a refused --resume, a missing dataset) and the training started.
  std::unique_ptr<io::OutputFile> log;
  auto open_log = [&] {
    if (flags.log.empty() || log) return;
    log = std::make_unique<io::OutputFile>(flags.log, "--log");
    log->write(log_start);
    log->commit();
  };
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
    NonFiniteEpochs non_finite;
    auto on_epoch = [&](const EpochStats& s) {
      non_finite.add(s);
      if (!flags.log.empty()) {
        open_log();
        const nlohmann::json j = {{"run", run},
                                  {"epoch", s.epoch},
                                  {"loss", s.loss},
                                  {"train_acc", s.train_acc},
                                  {"val_acc", s.val_acc},
                                  {"val_loss", s.val_loss},
                                  {"test_acc", s.test_acc},
                                  {"ms", s.ms},
                                  {"step_ms", s.step_ms}};
        log->write(j.dump() + "\n");
      }
      if (progress::enabled() && epoch_lines.due(s.epoch)) {
        char line[256];
        std::snprintf(
            line, sizeof line,
            "run %lld/%lld epoch %5lld  loss %.4f  train %.4f  val %.4f (loss %.4f)  test %.4f  %.2f ms",
            static_cast<long long>(run) + 1, static_cast<long long>(flags.runs),
            static_cast<long long>(s.epoch), s.loss, s.train_acc, s.val_acc, s.val_loss, s.test_acc,
            s.step_ms);
        progress::line(line);
      }
    };
    SampledTraining sampling = flags.sampled;
    sampling.loader.seed = seed;
    const TrainResult r =
        sampled ? train_node_classifier_sampled(model, data, options, sampling, device, gen, on_epoch)
                : train_node_classifier(model, forward, data, x, options, gen, on_epoch);
    open_log();  // a resumed run that had no epoch left still drops the lines after its checkpoint
    non_finite.report(run, r);
    results.push_back(r);
    if (r.cuda_graphs_note.rfind("not recorded", 0) == 0 || r.cuda_graphs_note.rfind("dropped", 0) == 0)
      std::fprintf(stderr, "gat_train: CUDA graphs %s; the steps ran eagerly\n", r.cuda_graphs_note.c_str());
    if (!flags.quiet) print_run(flags, run, seed, r, "acc");
    if (run == 0 && !flags.save.empty()) {
      CheckpointInfo saved = run_info;
      saved.seed = seed;
      saved.best_epoch = r.best_epoch;
      saved.test_acc = r.test_acc;
      io::save(model, flags.save, checkpoint_metadata(saved, options));
    }
  }

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
    std::printf(
        "%s on %s: test accuracy %.2f +- %.2f %% over %lld run(s); %.0f epochs on average; "
        "%.2f ms per training step\n",
        flags.dataset.c_str(), device_name(device), 100 * acc_mean, 100 * acc_std,
        static_cast<long long>(flags.runs), epochs_mean, step_ms_mean);
  if (flags.json) {
    const nlohmann::json j = {
        {"dataset", flags.dataset},
        {"device", device_name(device)},
        {"runs", flags.runs},
        {"seed", flags.seed},
        {"test_acc_mean", acc_mean},
        {"test_acc_std", acc_std},
        {"test_accs", accs},
        {"epochs_mean", epochs_mean},
        {"epochs", epochs},
        {"best_epochs", best_epochs},
        {"train_step_ms", step_ms_mean},
        {"train_step_ms_per_run", step_ms},
        {"threads", omp_get_max_threads()},
        {"cuda_graphs", graph_notes},
        {"nodes", data.graph.num_nodes()},
        {"edges",
         data.graph.num_edges() - data.graph.count_self_loops()},  // the dataset's, without the added loops
        {"peak_device_bytes", cuda::peak_memory_allocated()},
        {"peak_host_bytes", peak_host_bytes()},
        {"peak_device_blocks", peak_device_blocks()},
        {"config",
         {{"model", attention_layer_name(config.layer)},
          {"hidden", config.hidden},
          {"heads", config.heads},
          {"output_heads", config.output_heads},
          {"dropout", config.dropout},
          {"value_dropout", config.value_dropout},
          {"precision", dtype_name(config.precision)},
          {"lr", flags.train.lr},
          {"weight_decay", flags.train.weight_decay},
          {"patience", flags.train.patience},
          {"max_epochs", flags.train.max_epochs},
          {"edge_dim", config.edge_dim},
          {"fill_value", config.fill_value.name()},
          {"batch_size", flags.batch_size},
          {"fanouts", sampled ? flags.sampled.loader.fanouts : std::vector<int64_t>{}}}}};
    std::printf("%s\n",
                j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());  // paths: UTF-8
  }
  return 0;
}

// The inductive model's runs on a multi-graph dataset (Flags::inductive): the test micro-F1 of
// each run's remembered epoch, their mean and deviation.
int train_inductive_runs(const Flags& flags, Device device) {
  const MultiGraphDataset data = load_multigraph_dataset(flags.dataset, flags.data_dir);
  InductiveGATConfig config;
  config.in_features = data.num_features;
  config.num_labels = data.num_labels;
  config.hidden = flags.model.hidden;
  config.heads = flags.model.heads;
  config.output_heads = flags.model.output_heads;
  std::vector<double> f1s, epochs, step_ms;
  for (int64_t run = 0; run < flags.runs; ++run) {
    const uint64_t seed = flags.seed + static_cast<uint64_t>(run);
    Generator init(seed);
    InductiveGAT model(config, init);
    model.to(device);
    InductiveTraining inductive = flags.inductive_training;
    inductive.seed = seed;
    EpochProgress epoch_lines(flags.train.max_epochs);
    auto on_epoch = [&](const EpochStats& s) {
      if (!progress::enabled() || !epoch_lines.due(s.epoch)) return;
      char line[256];
      std::snprintf(
          line, sizeof line,
          "run %lld/%lld epoch %5lld  loss %.4f  train F1 %.4f  val F1 %.4f (loss %.4f)  test F1 %.4f  "
          "%.2f ms",
          static_cast<long long>(run) + 1, static_cast<long long>(flags.runs),
          static_cast<long long>(s.epoch), s.loss, s.train_acc, s.val_acc, s.val_loss, s.test_acc, s.step_ms);
      progress::line(line);
    };
    const TrainResult r = train_inductive(model, data, flags.train, inductive, device, on_epoch);
    f1s.push_back(r.test_acc);
    epochs.push_back(static_cast<double>(r.epochs));
    step_ms.push_back(r.train_step_ms);
    if (!flags.quiet) print_run(flags, run, seed, r, "micro-F1");
  }
  const auto [f1_mean, f1_std] = mean_std(f1s);
  if (!flags.quiet)
    std::printf(
        "%s on %s: test micro-F1 %.2f +- %.2f %% over %lld run(s); %.0f epochs on average; %.2f ms per "
        "step\n",
        flags.dataset.c_str(), device_name(device), 100 * f1_mean, 100 * f1_std,
        static_cast<long long>(flags.runs), mean_std(epochs).first, mean_std(step_ms).first);
  if (flags.json) {
    const nlohmann::json j = {{"dataset", flags.dataset},
                              {"device", device_name(device)},
                              {"runs", flags.runs},
                              {"seed", flags.seed},
                              {"test_micro_f1_mean", f1_mean},
                              {"test_micro_f1_std", f1_std},
                              {"test_micro_f1s", f1s},
                              {"epochs", epochs},
                              {"train_step_ms", mean_std(step_ms).first},
                              {"threads", omp_get_max_threads()},
                              {"graphs", {data.train.size(), data.val.size(), data.test.size()}},
                              {"peak_device_bytes", cuda::peak_memory_allocated()},
                              {"peak_host_bytes", peak_host_bytes()},
                              {"config",
                               {{"model", "inductive_gat"},
                                {"hidden", config.hidden},
                                {"heads", config.heads},
                                {"output_heads", config.output_heads},
                                {"lr", flags.train.lr},
                                {"weight_decay", flags.train.weight_decay},
                                {"patience", flags.train.patience},
                                {"max_epochs", flags.train.max_epochs},
                                {"batch_size", flags.inductive_training.batch_size}}}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  return 0;
}

int run(const Flags& flags) {
  if (flags.inductive) {
    if (!flags.info) return train_inductive_runs(flags, resolve_device(flags.device));
    std::printf("%s\n", dataset_summary(load_multigraph_dataset(flags.dataset, flags.data_dir)).c_str());
    return 0;
  }
  if (flags.info) {
    const Dataset data = load_named("--dataset", flags.dataset, flags.data_dir, false);
    std::printf("%s\n", dataset_summary(data).c_str());
    return 0;
  }
  const Device device = resolve_device(flags.device);
  if (!flags.load.empty()) return evaluate_checkpoint(flags, device);
  return train_runs(flags, device);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines show up live in logs and pipes
  process::ignore_write_signals();
  process::size_thread_stacks();
  cli::Environment env;  // the environment is read here, and only here
  try {
    env.cuda_graphs = cli::cuda_graphs_enabled(std::getenv("GAT_CUDA_GRAPHS"));
  } catch (const cli::UsageError& e) {
    std::cerr << "gat_train: " << cut_long_words(e.what()) << "\n";
    return 1;
  }
  try {
    env.data_dir_default = default_data_dir();
  } catch (const Error&) {  // no home: only a Planetoid dataset without --data-dir needs the folder
    env.data_dir_default = "none (no HOME)";
  }
  Flags flags;
  try {
    flags = cli::parse(argc, argv, env);
  } catch (const cli::UsageError& e) {
    std::cerr << "gat_train: " << cut_long_words(e.what()) << "\n\n" << cli::usage(env);
    return 2;
  } catch (const std::exception& e) {  // anything else a check of the flags met: an error, never an abort
    std::cerr << "gat_train: " << cut_long_words(e.what()) << "\n";
    return 1;
  }
  if (flags.help) {
    std::printf("%s", cli::usage(env).c_str());
    return process::check_stdout(0, "gat_train");
  }
  if (flags.threads > 0) omp_set_num_threads(flags.threads);
  if (const std::string why = process::unfit_environment(); !why.empty()) {
    std::cerr << "gat_train: " << why << "\n";
    return 1;
  }
  progress::enable(!flags.quiet);
  int status = 1;
  try {
    status = run(flags);
  } catch (const std::bad_alloc&) {
    std::cerr << "gat_train: out of memory (the dataset or the model is too large for this machine)\n";
  } catch (const std::exception& e) {  // gat::Error and anything from the libraries beneath
    std::cerr << "gat_train: " << cut_long_words(e.what()) << "\n";
  }
  return process::check_stdout(status, "gat_train");
}
