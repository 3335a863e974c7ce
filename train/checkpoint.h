// What gat_train records in a checkpoint beside the parameters (safetensors metadata, all text):
// the model's configuration, the dataset, the seed and the remembered epoch's test accuracy.
// Reading validates every value, so a checkpoint can only rebuild a model gat_train could train.
#pragma once

#include <cstdint>
#include <string>

#include "gat/framework/io.h"
#include "gat/models/gat.h"

namespace gat {

struct CheckpointInfo {
  std::string dataset;     // the --dataset it was trained on; empty: not recorded
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

}  // namespace gat
