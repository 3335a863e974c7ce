// The node-classification training loop shared by gat_train and the tests.
//
// One epoch: a training step (forward in training mode, masked cross-entropy on the training
// nodes or TrainOptions::loss, backward, a step of Adam with torch's coupled L2 weight decay or
// of TrainOptions::make_optimizer's optimiser), then an evaluation in eval
// mode without autograd (validation loss and accuracy, test accuracy). Early stopping exactly as
// the GAT reference code (EarlyStopping, early_stopping.h): each epoch the rule may remember the
// epoch (its test accuracy and parameters) or stop. The model ends in eval mode holding the
// remembered parameters.
//
// Checkpoints to continue from (TrainOptions::checkpoints): after every `every`-th epoch the
// whole state of the run goes to one safetensors file (written atomically): the parameters,
// the optimiser's state, the epoch, the early-stopping state with the parameters it remembers, and the
// dropout generator's position. A run resumed from it (checkpoints.resume, with the same model,
// data, options and generator seed) continues exactly as if it had never stopped: the same
// parameters and the same per-epoch numbers, bit for bit. A checkpoint past max_epochs, or whose
// model's outputs on the data are not finite, is refused before the first resumed step.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gat/datasets/dataset.h"
#include "gat/framework/check.h"
#include "gat/framework/graph.h"
#include "gat/framework/io.h"
#include "gat/framework/module.h"
#include "gat/framework/optim.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"
#include "gat/framework/tensor.h"
#include "gat/models/gat.h"
#include "gat/train/early_stopping.h"

namespace gat {

// The model's forward pass: x (N, F) dense or sparse, graph, dropout generator -> logits (N, C).
using ForwardFn = std::function<Tensor(const Features& x, const Graph& graph, Generator& gen)>;
// The optimiser of a run, made once the model exists (parameter groups by name, any kind).
using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(Module& model)>;
// A training loss: the logits (N, C) of a training-mode forward pass and the data -> a scalar
// with autograd, whose backward gives the step's gradients.
using TrainLoss = std::function<Tensor(const Tensor& logits, const Dataset& data)>;

struct TrainCheckpoints {
  std::string path;  // write the run's state here after every `every`-th epoch (none if empty)
  int64_t every = 1;
  io::Metadata metadata;  // added to the file's metadata (e.g. the model's configuration)
  std::string resume;     // continue the run saved in this file (none if empty)
};

struct TrainOptions {
  double lr = 0.005;
  double weight_decay = 5e-4;  // L2 added to the gradient (torch.optim.Adam's weight_decay)
  int64_t max_epochs = 100000;
  int64_t patience = 100;
  // The features go to the model as a CsrMatrix when fewer than this fraction of data.x is
  // non-zero (Features::choose; 0 keeps them dense). Same numbers either way, up to rounding.
  double sparse_max_density = Features::kDefaultMaxDensity;
  // On CUDA: record the training step and the evaluation as CUDA graphs after the first epoch
  // and replay them (the same results as eager steps, bit for bit; eager when recording fails).
  bool cuda_graphs = true;
  TrainCheckpoints checkpoints;
  // Unset: Adam with lr and weight_decay above (gat_train's). Set: its optimiser (lr and
  // weight_decay above are then not used); a checkpoint holds its state, and a resumed run must
  // make the same kind over the same parameters.
  MakeOptimizer make_optimizer;
  // Unset: the masked cross-entropy on the training nodes, through its fused gradient
  // (ops::masked_cross_entropy_grad). Set: its backward instead. Either way the losses logged
  // and used by early stopping (EpochStats::loss, val_loss) are the masked cross-entropy.
  // On CUDA a loss that reads values back to the host cannot be recorded in a CUDA graph: the
  // steps then run eagerly (TrainResult::cuda_graphs_note says why).
  TrainLoss loss;

  // The values each field may take (validate() and gat_train's flags use them).
  static constexpr Range<double> kLrRange{0.0, 1000.0, true, false};
  static constexpr Range<double> kWeightDecayRange{0.0, 1000.0};
  static constexpr Range<int64_t> kEpochsRange{1,
                                               std::numeric_limits<int32_t>::max()};  // max_epochs, patience
  static constexpr Range<double> kDensityRange{0.0, 1.0};  // gat_train's --sparse-below (the
                                                           // library takes any value: > 1 is always sparse)

  // Throws a gat::Error naming the first field outside its range.
  void validate() const;
};

// The metadata key of a run checkpoint that holds its last completed epoch.
constexpr const char* kCheckpointEpochKey = "trainer.epoch";

struct EpochStats {
  int64_t epoch = 0;     // 1-based
  double loss = 0;       // training loss of the step (training mode, dropout on)
  double train_acc = 0;  // of the same forward pass
  double val_loss = 0;   // eval mode
  double val_acc = 0;
  double test_acc = 0;
  // forward + backward + optimizer step: on CUDA the device time between events queued around
  // it (from the epoch's start in the second, which records the graphs), on the CPU the wall clock
  double step_ms = 0;
  double ms = 0;  // the whole epoch (step and evaluation)
};

struct TrainResult {
  double test_acc = 0;  // of the remembered epoch
  double val_acc = 0;   // of the remembered epoch
  double val_loss = 0;
  int64_t best_epoch = 0;    // the remembered epoch (1-based)
  int64_t epochs = 0;        // epochs run
  double train_step_ms = 0;  // mean forward + backward + optimizer step
  // "recorded" (epochs after the first replayed CUDA graphs), "off" (not asked for, or not on
  // CUDA), "not recorded: <why>" (eager steps throughout), or "dropped at epoch K: <why>"
  // (replays until the device had no memory for one, eager steps from epoch K on).
  std::string cuda_graphs_note;
};

struct SplitMetrics {
  double loss = 0;
  double acc = 0;
};
struct Evaluation {
  SplitMetrics train, val, test;
};

// Eval mode, no autograd; the model is left in eval mode. `x` replaces data.x (e.g. its sparse
// form); without it the features are Features::choose(data.x).
Evaluation evaluate(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x);
Evaluation evaluate(Module& model, const ForwardFn& forward, const Dataset& data);

// Refuses a model whose train, validation or test loss in `e` is not finite: finite parameters
// can still overflow (3e38 weights), and the accuracies of NaN outputs mean nothing. The one check
// of a loaded model (--load) and of a resumed run's (train_node_classifier, before its first step).
void check_finite_evaluation(const Evaluation& e, const std::string& where);

// The evaluation of logits (N, C) made by the caller, on data's device (data.y's and the
// splits'): the losses and accuracies of the train, validation and test nodes.
Evaluation evaluate_logits(const Tensor& logits, const Dataset& data);

// The optimiser of a run: options.make_optimizer's, or Adam with options.lr and weight_decay.
std::unique_ptr<Optimizer> make_run_optimizer(Module& model, const TrainOptions& options);
// Epoch stats.epoch's evaluation into stats (val_loss, val_acc, test_acc) and early stopping's
// decision on it. A remembered epoch's numbers go to result and its parameters are copied into
// `best` (params' length; an undefined entry is made by the first copy). result.epochs counts it.
EarlyStopping::Decision judge_epoch(EpochStats& stats, const Evaluation& eval, EarlyStopping& stopping,
                                    TrainResult& result, const std::vector<Tensor>& params,
                                    std::vector<Tensor>& best);
// What an epoch loop without run checkpoints keeps from epoch to epoch (the sampled and the
// inductive loops): the run's optimiser, the parameters and the remembered epoch's copies, early
// stopping and the result so far (cuda_graphs_note "off": their steps run eagerly).
struct EpochLoop {
  EpochLoop(Module& model, const TrainOptions& options);
  // judge_epoch on this loop's state.
  EarlyStopping::Decision judge(EpochStats& stats, const Evaluation& eval);

  std::unique_ptr<Optimizer> optimizer;
  std::vector<Tensor> params, best_params;
  EarlyStopping stopping;
  TrainResult result;
};
// The end of a run: throws unless some epoch was remembered (a finite validation loss), naming
// the likely causes (the largest |value| of x, the rate lr); then the remembered parameters back
// into the model's.
void restore_best(const TrainResult& result, const Tensor& x, double lr, const std::vector<Tensor>& params,
                  const std::vector<Tensor>& best);

// Trains model's parameters on data (every tensor and the graph on the model's device).
// `gen` supplies the dropout streams. on_epoch, if given, sees every epoch. The features are
// Features::choose(data.x, options.sparse_max_density).
TrainResult train_node_classifier(Module& model, const ForwardFn& forward, const Dataset& data,
                                  const TrainOptions& options, Generator& gen,
                                  const std::function<void(const EpochStats&)>& on_epoch = {});
// The same on features made by the caller (data.x's values, dense or sparse, on data's device):
// made once for several runs (Features::choose copies data.x to the host and builds its sparse
// form there). options.sparse_max_density is not used.
TrainResult train_node_classifier(Module& model, const ForwardFn& forward, const Dataset& data,
                                  const Features& x, const TrainOptions& options, Generator& gen,
                                  const std::function<void(const EpochStats&)>& on_epoch = {});

// What the paper (Velickovic et al. 2018, section 3.3) does differently per dataset; the rest
// (hidden 8, heads 8, dropout 0.6, patience 100) is GATConfig's and TrainOptions' defaults.
struct Recipe {
  int64_t output_heads = GATConfig{}.output_heads;
  double lr = TrainOptions{}.lr;
  double weight_decay = TrainOptions{}.weight_decay;
};
// pubmed: 8 output heads, lr 0.01, weight decay 0.001; anything else: the defaults. Any case.
// (Preprocessing is the dataset's own: Dataset::preprocessing.)
Recipe recipe_for(const std::string& dataset);

// load_dataset(name, data_dir) (datasets/registry.h) with the preprocessing its loader asks for
// (Dataset::preprocessing: the Planetoid graphs get row-normalised features, as in the paper).
Dataset load_training_dataset(const std::string& name, const std::string& data_dir = "");

// The dataset with its graph replaced by graph.with_self_loops() (existing loops removed, one
// per node), as GAT's layers (GATConvOptions::add_self_loops) use it: built once and passed to
// the model, it is the only graph kept; the layers would otherwise keep a looped copy each.
// Edge features follow (ops::self_loop_attr), the loops' rows 0 until a layer fills them.
// Given the dataset by std::move, it frees the graph without loops (nothing else keeps it).
Dataset with_self_loops(Dataset data);
// The same for a graph and its edge features (undefined: none): graph.with_self_loops() and
// edge_attr with the loops' placeholder rows.
std::pair<Graph, Tensor> with_self_loops(const Graph& graph, const Tensor& edge_attr);

// A copy of the dataset with every tensor and the graph on `device`.
Dataset dataset_to(const Dataset& data, Device device);

}  // namespace gat
