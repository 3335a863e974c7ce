// What gat_train records in a checkpoint beside the parameters (safetensors metadata, all text):
// the model's configuration, the dataset (its name and a digest of its content), the seed and the
// remembered epoch's test accuracy; a run checkpoint (--checkpoint) also the training flags that
// shape the run's numbers (training_metadata). Reading validates every value, so a checkpoint can
// only rebuild a model gat_train could train, and flag_differences says which flags disagree with
// a checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "gat/datasets/dataset.h"
#include "gat/framework/io.h"
#include "gat/models/gat.h"
#include "gat/train/trainer.h"

namespace gat {

struct CheckpointInfo {
  std::string dataset;         // recorded_dataset_name(--dataset); empty: not recorded
  std::string dataset_digest;  // dataset_digest() of the data trained on; empty: not recorded (older files)
  GATConfig model;
  uint64_t seed = 0;       // of the run that was saved
  int64_t best_epoch = 0;  // the remembered epoch (1-based)
  double test_acc = 0;     // at that epoch, in [0, 1]

  // Every field, plus "format": "gat_train"; from_metadata(to_metadata()) == *this.
  io::Metadata to_metadata() const;
  // Errors name `where` (the file) and the key: not written by gat_train, a key missing, a value
  // of the wrong type or out of its range (GATConfig::validate, TrainOptions' epochs, [0, 1]).
  static CheckpointInfo from_metadata(const io::Metadata& metadata, const std::string& where);

  bool operator==(const CheckpointInfo& o) const;
};

// Whether a file gat_train wrote is a run checkpoint (--checkpoint: the state of a run, which
// --resume continues) rather than a model (--save, which --load evaluates): it records the epoch
// it was written after (kCheckpointEpochKey).
bool is_run_checkpoint(const io::Metadata& metadata);

// Refuses metadata whose "format" is not "gat_train" (a file gat_train did not write): the one
// check of --load's model (CheckpointInfo::from_metadata) and of --resume's run checkpoint.
void check_checkpoint_format(const io::Metadata& metadata, const std::string& where);

// What a run checkpoint says of the run's progress, each value already read in its own range.
struct RunProgress {
  int64_t epoch = 0;       // epochs completed
  Tensor optimizer_steps;  // "optimizer.step": (P,) i32, steps per parameter (not checked if another form)
  int64_t best_epoch = 0;  // the remembered epoch, 0 before the first
  int64_t wait = 0;        // epochs since early stopping's last progress
  bool stopped = false;    // early stopping ended the run
  double best_acc = 0.0;   // early stopping's best validation accuracy and loss so far
  double best_loss = 0.0;  // (+infinity before the first finite one)
  double val_acc = 0.0;    // of the remembered epoch
  double val_loss = 0.0;
  double test_acc = 0.0;
};

// Refuses, naming `where` and the values, a progress that no run with this patience reaches, so
// that a hand-edited or mixed-up checkpoint cannot resume into numbers that mean nothing:
//   - every optimiser step count is the epoch (one step per epoch, every parameter has a gradient);
//   - best_epoch <= epoch; stopped exactly when wait == patience;
//   - wait <= epoch - best_epoch (the remembered epoch was progress);
//   - best_epoch == 0 (nothing remembered) exactly when best_loss is infinite, and then the
//     remembered epoch's val_acc, val_loss and test_acc are 0;
//   - else best_acc >= val_acc and best_loss <= val_loss (the bests only improve).
void check_run_progress(const RunProgress& progress, int64_t patience, const std::string& where);

// The metadata key of dataset_digest().
constexpr const char* kDatasetDigestKey = "dataset_digest";

// 16 hex digits that tell datasets apart: FNV-1a (64 bits) over the shapes and bytes of the
// features, labels, the three splits, the graph's CSR and the edge features. Datasets of the
// same shape but other content differ; the same content gives the same digest on any machine.
// (Copies what lives on a device to the host.)
std::string dataset_digest(const Dataset& data);

// How a checkpoint names the dataset that --dataset gave as `name`: a folder by its absolute path
// (so that --load finds it again from any working folder), anything else (cora,
// synthetic:...) as it was given.
std::string recorded_dataset_name(const std::string& name);

// The training options that shape a run's numbers, as metadata: lr, weight_decay, patience,
// sparse_below (not max_epochs: a resumed run may go on longer).
io::Metadata training_metadata(const TrainOptions& options);

// For each key of `wanted` whose value in `saved` differs or is missing, "<flag> <wanted value>
// (<whose>: <saved value>)", joined by ", " (empty when every key agrees). A key is named by its
// gat_train flag (layer: --model, sparse_below: --sparse-below, ...) or, for what the dataset
// decides (in_features, num_classes, edge_dim, dataset_digest), as the dataset's.
std::string flag_differences(const io::Metadata& saved, const io::Metadata& wanted, const std::string& whose);

}  // namespace gat
