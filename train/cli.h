// gat_train's command line: argv -> Flags, or a UsageError that says which flag is wrong and why.
// The program (train/gat_train.cpp) prints the error with usage() and exits 2; tests and the
// flag-parser fuzzer (tests/fuzz/cli_fuzz.cpp) call parse() directly.
//
// The model's and the training loop's settings live in their own structs, whose defaults are the
// flags' defaults and whose ranges (GATConfig::k*Range, TrainOptions::k*Range) are the flags'
// ranges. The environment is read by the program and passed in (Environment), never here.
#pragma once

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>

#include "gat/framework/check.h"
#include "gat/framework/process.h"
#include "gat/models/gat.h"
#include "gat/train/inductive_training.h"
#include "gat/train/sampled_training.h"
#include "gat/train/trainer.h"

namespace gat::cli {

struct Flags {
  std::string dataset = "cora";
  bool dataset_given = false;  // --dataset was given (with --load: else the checkpoint's dataset)
  std::string data_dir;        // empty: the library's default (datasets/registry.h)
  std::string device = "auto";
  std::string model_name = "gat";   // --model: gat | gatv2, parsed into model.layer
  std::string fill_value = "mean";  // --fill-value, parsed into model.fill_value
  std::string precision = "f32";    // --precision: f32 | bf16, parsed into model.precision
  bool fill_value_given = false;    // (the dataset must then have edge features)
  GATConfig model;     // layer, hidden, heads, output_heads, dropout, value_dropout, precision; in_features
                       // and num_classes come from the dataset
  TrainOptions train;  // lr, weight_decay, max_epochs, patience, sparse_max_density, cuda_graphs
  uint64_t seed = 0;   // of the first run; run r uses seed + r
  int64_t runs = 1;
  std::string save, load, log;     // empty: not asked for (an empty flag value is refused)
  std::string checkpoint, resume;  // run checkpoints (TrainOptions::checkpoints); empty: none
  int64_t checkpoint_every = 1;
  // --batch-size > 0: sampled training (train/sampled_training.h) with sampled.loader's
  // batch_size and fanouts (--fanouts, PyG's order); 0: full batch.
  int64_t batch_size = 0;
  std::string fanouts = "25,10";
  SampledTraining sampled;
  // --dataset names a multi-graph dataset (is_multigraph_dataset: ppi, synthetic-ppi:..., a PPI
  // folder): the inductive model (models/inductive_gat.h) trained by train_inductive with
  // --batch-size graphs per step (default 2), --hidden, --heads and --output-heads as its layers'
  // (defaults 256, 4 and 6), --lr and --weight-decay defaulting to 0.005 and 0.
  bool inductive = false;
  InductiveTraining inductive_training;
  int threads = 0;  // OpenMP threads; 0: OpenMP's default (OMP_NUM_THREADS, else every core)
  bool json = false, info = false, quiet = false;
  bool help = false;            // --help: print usage() and exit 0
  std::set<std::string> given;  // the flags on the command line, by their long names ("--hidden")

  static constexpr Range<int64_t> kRunsRange{1, 10000};
  static constexpr Range<int> kThreadsRange{1, process::kMaxThreads};
};

// What the program read from its environment for the defaults.
struct Environment {
  bool cuda_graphs = true;       // GAT_CUDA_GRAPHS (cuda_graphs_enabled)
  std::string data_dir_default;  // shown in the usage as --data-dir's default
};

// False when `value` (GAT_CUDA_GRAPHS, any case) is 0, off, false or no; true when it is unset,
// empty, 1, on, true or yes; a UsageError for anything else.
bool cuda_graphs_enabled(const char* value);

// A bad command line: what() names the flag, the value and what it may be.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// argv[0] is the program name. The dataset's recipe (recipe_for, train/trainer.h) gives
// --output-heads, --lr and --weight-decay where they are left out; --model gatv2 makes
// --value-dropout 0 (and refuses another value). Every number is parsed whole (no "1e23" for an integer, no
// NaN or infinity) and checked against its range; paths may not be empty; --seed + --runs - 1 must fit;
// --load refuses the flags only training reads (--epochs, --lr, --log, --save, --resume, ...);
// --fanouts needs --batch-size, which refuses --checkpoint and --resume (sampled runs are not
// resumable). A multi-graph dataset (Flags::inductive) refuses the flags of the node-classification
// model and runs (kNotInductive in cli.cpp: --model, the dropouts, --fanouts, checkpoints, ...).
Flags parse(int argc, const char* const* argv, const Environment& env = {});

// The usage text (flags, their defaults and ranges).
std::string usage(const Environment& env = {});

}  // namespace gat::cli
