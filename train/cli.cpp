#include "gat/train/cli.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <limits>
#include <type_traits>

#include "gat/datasets/registry.h"
#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat/framework/quote.h"

namespace gat::cli {

namespace {

// `text` as a whole T (base-10 integer, or a decimal/scientific number), or false.
template <class T>
bool parse_whole(const std::string& text, T& value) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;  // from_chars takes no leading '+'
  const auto [ptr, ec] = std::from_chars(first, last, value);
  return first != last && ec == std::errc() && ptr == last;
}

// A CLI11 check that the value is a T within `range`: "'1e23' is not an integer in [1, 1000000000]".
template <class T>
CLI::Validator within(const Range<T>& range) {
  const char* kind = std::is_integral_v<T> ? "an integer" : "a number";
  return CLI::Validator(
      [range, kind](std::string& text) -> std::string {
        T value{};
        if (parse_whole(text, value) && range.contains(value)) return {};
        return detail::concat("'", text, "' is not ", kind, " in ", range.str());
      },
      range.str());
}

const CLI::Validator kNonEmpty(
    [](std::string& text) -> std::string { return text.empty() ? "the value is empty" : ""; }, "");

// --name bound to `value`, a T within `range`.
template <class T>
CLI::Option* add_number(CLI::App& app, const std::string& name, T& value, const std::string& description,
                        const Range<T>& range) {
  return app.add_option(name, value, description)->check(within(range));
}

// What --save, --log and --checkpoint may name.
const char* const kOutputPath =
    "new path or regular file, its own (not another output, not an input), checked before training; a "
    "symbolic link, directory, device or FIFO is refused";

// The flags that only training reads: refused with --load, which evaluates a checkpoint.
const char* const kTrainingOnly[] = {
    "--epochs",     "--patience",         "--lr",     "--weight-decay", "--seed",       "--runs",   "--log",
    "--checkpoint", "--checkpoint-every", "--resume", "--save",         "--batch-size", "--fanouts"};

// The flags that mean nothing to the inductive model and its runs (no dropout, one layer kind,
// dense features, f32 only, no CUDA graphs, no checkpoints): refused with a multi-graph dataset.
const char* const kNotInductive[] = {
    "--model",       "--dropout",  "--value-dropout", "--fill-value", "--sparse-below",     "--fanouts",
    "--save",        "--load",     "--log",           "--checkpoint", "--checkpoint-every", "--resume",
    "--cuda-graphs", "--precision"};

// The inductive model's defaults (the paper's PPI recipe) where the flags are left out, and its
// refusals.
void set_inductive(const CLI::App& app, Flags& flags) {
  for (const char* name : kNotInductive)
    if (app.get_option(name)->count() > 0)
      throw UsageError(detail::concat(name, " with --dataset ", flags.dataset,
                                      ": a multi-graph dataset trains the inductive model (3 GAT layers with "
                                      "skip connections, no dropout, not checkpointed); leave ",
                                      name, " out"));
  flags.inductive = true;
  InductiveGATConfig paper;
  if (app.count("--hidden") == 0) flags.model.hidden = paper.hidden;
  if (app.count("--heads") == 0) flags.model.heads = paper.heads;
  if (app.count("--output-heads") == 0) flags.model.output_heads = paper.output_heads;
  if (app.count("--lr") == 0) flags.train.lr = 0.005;
  if (app.count("--weight-decay") == 0) flags.train.weight_decay = 0.0;
  if (flags.batch_size > 0) flags.inductive_training.batch_size = flags.batch_size;
  flags.train.cuda_graphs = false;
}

// "25,10" -> {25, 10}: one fanout per layer of the model, each -1 (all in-edges) or a count.
std::vector<int64_t> parse_fanouts(const std::string& text) {
  std::vector<int64_t> fanouts;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int64_t value = 0;
    if (!parse_whole(item, value) || !NeighborSamplerOptions::kFanoutRange.contains(value))
      throw UsageError(detail::concat("--fanouts ", text, ": '", item, "' is not an integer in ",
                                      NeighborSamplerOptions::kFanoutRange.str(), " (-1: all in-edges)"));
    fanouts.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int64_t>(fanouts.size()) != GAT::kLayers)
    throw UsageError(detail::concat("--fanouts ", text, ": ", fanouts.size(), " fanouts, the model has ",
                                    GAT::kLayers, " layers (one each, the seeds' hop first)"));
  return fanouts;
}

// Binds every flag to `flags` (whose values are the defaults the usage shows).
void add_flags(CLI::App& app, Flags& flags, const Environment& env) {
  app.option_defaults()->always_capture_default();
  GATConfig& m = flags.model;
  TrainOptions& t = flags.train;
  app.add_option(
         "--dataset", flags.dataset,
         "cora | citeseer | pubmed | synthetic:<nodes>:<avg_degree>:<seed>[:<edge_dim>] | a directory "
         "(with --load: the checkpoint's dataset unless given); multi-graph, for the inductive model: ppi "
         "(its raw files in --data-dir, downloaded there when missing) | "
         "synthetic-ppi:<graphs>:<nodes>:<seed>[:<features>:<labels>] | a "
         "directory of PPI's raw files")
      ->check(kNonEmpty);
  app.add_option("--data-dir", flags.data_dir,
                 "folder of the Planetoid or PPI raw files (default: $GAT_DATA_DIR, else the per-user cache "
                 "$XDG_CACHE_HOME/gat/planetoid or gat/ppi); missing files are downloaded there")
      ->default_str(env.data_dir_default)
      ->check(kNonEmpty);
  app.add_option("--device", flags.device, "where to train")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--model", flags.model_name,
                 "the attention layer: gat (GATConv, Velickovic et al. 2018) or gatv2 (GATv2Conv, "
                 "Brody et al. 2022; no value dropout)")
      ->check(CLI::IsMember({"gat", "gatv2"}));
  app.add_option("--precision", flags.precision,
                 "bf16: features, activations and their gradients stored in bf16 and computed in f32, "
                 "parameters f32 (docs/precision.md)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  add_number(app, "--epochs", t.max_epochs, "maximum epochs (early stopping ends sooner)",
             TrainOptions::kEpochsRange);
  add_number(app, "--patience", t.patience, "epochs without improvement before stopping",
             TrainOptions::kEpochsRange);
  add_number(app, "--lr", t.lr, "Adam learning rate", TrainOptions::kLrRange);
  add_number(app, "--weight-decay", t.weight_decay, "L2 weight decay", TrainOptions::kWeightDecayRange);
  add_number(app, "--hidden", m.hidden, "features per head in the first layer", GATConfig::kHiddenRange);
  add_number(app, "--heads", m.heads, "heads of the first layer", GATConfig::kHeadsRange);
  add_number(app, "--output-heads", m.output_heads, "heads of the output layer (8 for PubMed)",
             GATConfig::kHeadsRange);
  add_number(app, "--dropout", m.dropout,
             "feature and attention dropout rate (at most 0.999: kept values are scaled by 1/(1-p))",
             GATConfig::kDropoutRange);
  add_number(app, "--value-dropout", m.value_dropout,
             "dropout on the projected features where they are aggregated, as the GAT authors' code does "
             "(0: as PyG's GATConv)",
             GATConfig::kDropoutRange);
  app.add_option("--fill-value", flags.fill_value,
                 "the self loops' edge features from each node's in-edges': mean, add (sum), min, max, "
                 "mul or a number (PyG's fill_value; only for a dataset with edge features)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return ops::SelfLoopFill::try_parse(text)
                       ? ""
                       : "'" + text + "' is not " + ops::SelfLoopFill::kAccepted;
          },
          "FILL"));
  add_number(app, "--sparse-below", t.sparse_max_density,
             "pass the features as a sparse CSR matrix when fewer than this fraction is non-zero (0: always "
             "dense; same results up to rounding)",
             TrainOptions::kDensityRange);
  app.add_flag("--cuda-graphs,!--no-cuda-graphs", t.cuda_graphs,
               "on CUDA, record the training step and evaluation as CUDA graphs and replay them "
               "(the same results, less host work per epoch; default on unless "
               "GAT_CUDA_GRAPHS=0)");
  add_number(app, "--seed", flags.seed, "seed of the first run",
             Range<uint64_t>{0, std::numeric_limits<uint64_t>::max()});
  add_number(app, "--runs", flags.runs, "runs with seeds seed, seed+1, ...; reports mean +- std",
             Flags::kRunsRange);
  app.add_option("--save", flags.save,
                 std::string("write the first run's trained parameters (safetensors) to this ") + kOutputPath)
      ->check(kNonEmpty);
  app.add_option("--log", flags.log,
                 std::string("one JSON line per epoch (with --resume: the run's log, continued) to this ") +
                     kOutputPath)
      ->check(kNonEmpty);
  app.add_option(
         "--checkpoint", flags.checkpoint,
         "write the run's whole state (parameters, optimiser, early stopping, epoch, dropout "
         "generator, the dataset's digest, the flags that shape the run) during training, to continue "
         "it with --resume, to this " +
             std::string(kOutputPath))
      ->check(kNonEmpty);
  add_number(app, "--checkpoint-every", flags.checkpoint_every,
             "epochs between --checkpoint writes (also written at the last epoch)",
             TrainOptions::kEpochsRange);
  app.add_option("--resume", flags.resume,
                 "continue the run saved by --checkpoint in this file, bit for bit: the dataset and the "
                 "flags that shape the run (model, --lr, --weight-decay, --patience, --sparse-below, "
                 "--seed) must be the run's (the differences are listed); --epochs may differ")
      ->check(kNonEmpty);
  add_number(app, "--batch-size", flags.batch_size,
             "train on sampled neighbourhoods of this many training nodes per step (PyG's NeighborLoader); "
             "evaluation stays exact (layer-wise over all in-edges); 0: full batch. With a multi-graph "
             "dataset: graphs per step (0: 2)",
             Range<int64_t>{0, NeighborLoaderOptions::kBatchSizeRange.hi});
  app.add_option("--fanouts", flags.fanouts,
                 "with --batch-size: in-edges sampled per node and layer, the seeds' hop first, -1 for all "
                 "(PyG's num_neighbors)");
  auto* load = app.add_option("--load", flags.load,
                              "evaluate this checkpoint instead of training; model flags, if given, must "
                              "match it")
                   ->check(kNonEmpty);
  for (const char* name : kTrainingOnly) load->excludes(app.get_option(name));
  add_number(app, "--threads", flags.threads, "OpenMP threads (default: OMP_NUM_THREADS, else every core)",
             Flags::kThreadsRange)
      ->default_str("OMP_NUM_THREADS");  // (the usage said =0, a value the flag refuses)
  app.add_flag("--json", flags.json, "print a JSON summary as the last line");
  auto* info = app.add_flag("--info", flags.info,
                            "print the dataset summary as one JSON line and exit (no training: training "
                            "flags and --load are refused)");
  // Silently ignored, a --save, --log or --checkpoint would write nothing and a --resume continue
  // nothing, with exit status 0.
  for (const char* name : kTrainingOnly) info->excludes(app.get_option(name));
  info->excludes(load);
  app.add_flag("--quiet", flags.quiet, "no progress lines");
}

const char* const kDescription =
    "Train the two-layer GAT (Velickovic et al. 2018) on a node-classification dataset, or its three-layer "
    "inductive network on a multi-graph dataset (PPI).";

}  // namespace

bool cuda_graphs_enabled(const char* value) {
  if (!value) return true;
  std::string v = value;
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v.empty() || v == "1" || v == "on" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "off" || v == "false" || v == "no") return false;
  // (OFF, or no, used to leave the graphs on without a word)
  throw UsageError(
      detail::concat("GAT_CUDA_GRAPHS=", quote(value),
                     " is not 0, off, false, no (eager steps) or 1, on, true, yes (CUDA graphs)"));
}

Flags parse(int argc, const char* const* argv, const Environment& env) {
  Flags flags;
  flags.train.cuda_graphs = env.cuda_graphs;
  CLI::App app{kDescription, argc > 0 && argv[0] ? argv[0] : "gat_train"};
  add_flags(app, flags, env);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    flags.help = true;
    return flags;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  for (const CLI::Option* option : app.get_options())
    if (option->count() > 0) flags.given.insert(option->get_name());
  flags.dataset_given = app.count("--dataset") > 0;
  flags.fill_value_given = app.count("--fill-value") > 0;
  flags.model.fill_value = ops::SelfLoopFill::parse(flags.fill_value);
  if (flags.precision == dtype_name(DType::bf16)) flags.model.precision = DType::bf16;
  if (flags.model_name == attention_layer_name(AttentionLayer::gatv2)) {
    flags.model.layer = AttentionLayer::gatv2;
    if (app.count("--value-dropout") == 0) flags.model.value_dropout = 0.0;
    if (flags.model.value_dropout != 0.0)
      throw UsageError(detail::concat("--value-dropout ", flags.model.value_dropout,
                                      " with --model gatv2: GATv2Conv has no value dropout"));
  }
  if (flags.seed > std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(flags.runs - 1))
    throw UsageError(detail::concat("--seed ", flags.seed, " with --runs ", flags.runs,
                                    ": the last run's seed would pass 2^64 - 1"));
  bool multigraph = false;
  try {
    multigraph = is_multigraph_dataset(flags.dataset);
  } catch (const Error& e) {  // a folder that cannot be looked into
    throw UsageError(detail::concat("--dataset ", flags.dataset, ": ", e.what()));
  }
  if (multigraph) {
    set_inductive(app, flags);
    return flags;
  }
  // Without --checkpoint nothing is written every N epochs: the flag would be ignored.
  if (app.count("--checkpoint-every") > 0 && flags.checkpoint.empty())
    throw UsageError(detail::concat("--checkpoint-every ", flags.checkpoint_every,
                                    " without --checkpoint: it sets how often --checkpoint writes the run"));
  if (app.count("--fanouts") > 0 && flags.batch_size == 0)
    throw UsageError("--fanouts " + flags.fanouts +
                     " without --batch-size: fanouts are for sampled training");
  if (flags.batch_size > 0) {
    if (!flags.checkpoint.empty() || !flags.resume.empty())
      throw UsageError(
          detail::concat("--batch-size ", flags.batch_size,
                         " with --checkpoint or --resume: sampled runs write no run checkpoints "
                         "(the batches' position is not saved); --save keeps the trained model"));
    flags.sampled.loader.batch_size = flags.batch_size;
    flags.sampled.loader.fanouts = parse_fanouts(flags.fanouts);
  }
  const Recipe recipe = recipe_for(flags.dataset);
  if (app.count("--output-heads") == 0) flags.model.output_heads = recipe.output_heads;
  if (app.count("--lr") == 0) flags.train.lr = recipe.lr;
  if (app.count("--weight-decay") == 0) flags.train.weight_decay = recipe.weight_decay;
  return flags;
}

std::string usage(const Environment& env) {
  Flags flags;
  flags.train.cuda_graphs = env.cuda_graphs;
  CLI::App app{kDescription, "gat_train"};
  add_flags(app, flags, env);
  return app.help();
}

}  // namespace gat::cli
