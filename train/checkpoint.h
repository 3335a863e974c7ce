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
