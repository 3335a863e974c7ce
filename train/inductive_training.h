// Inductive training on whole graphs (the GAT paper's PPI recipe): every epoch takes the training
// graphs in a shuffled order, `batch_size` graphs per step as one batch (batch_graphs), the mean
// binary cross-entropy with logits over every (node, label) of the batch, one optimiser step per
// batch; then the validation and test graphs are scored (micro-F1 of logits > 0, ops::micro_f1,
// and their mean BCE), and early stopping runs on the validation micro-F1 and loss
// (EarlyStopping, the remembered epoch's parameters restored at the end, as the full-batch
// trainer does).
//
// Data flow: the graphs stay on the host; each step's batch is built there and copied to the
// device, its self loops added once for the three layers. The validation and test batches are
// built and copied once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gat/datasets/multigraph.h"
#include "gat/models/inductive_gat.h"
#include "gat/train/trainer.h"

namespace gat {

struct InductiveTraining {
  int64_t batch_size = 2;  // graphs per step (the paper's 2)
  uint64_t seed = 0;       // of the graphs' order in each epoch
  static constexpr Range<int64_t> kBatchSizeRange{1, int64_t{1} << 20};
};

// The scores of a split: the mean BCE over all its (node, label) pairs and the micro-F1, the
// model in eval mode without autograd, batch_size graphs at a time.
SplitMetrics evaluate_graphs(InductiveGAT& model, const std::vector<GraphData>& graphs, int64_t batch_size,
                             Device device);

// Trains `model` (on `device`) on data.train, scoring data.val and data.test every epoch.
// EpochStats and TrainResult as the trainer's (trainer.h), with micro-F1 where those say
// accuracy: train_acc is the epoch's training batches' (each scored right after its own forward
// pass, before its step); step_ms is the epoch's steps with the building of their batches, and
// TrainResult::train_step_ms the mean of one step. options: lr, weight_decay (or make_optimizer), max_epochs,
// patience. Refused (gat::Error): options.loss and run checkpoints (options.checkpoints), a split without
// graphs, graphs whose widths are not the model's.
TrainResult train_inductive(InductiveGAT& model, const MultiGraphDataset& data, const TrainOptions& options,
                            const InductiveTraining& inductive, Device device,
                            const std::function<void(const EpochStats&)>& on_epoch = {});

}  // namespace gat
