#include "gat/train/checkpoint.h"

#include "gat/train/trainer.h"

namespace gat {

namespace {

constexpr const char* kFormat = "format";
constexpr const char* kFormatName = "gat_train";
constexpr const char* kDataset = "dataset";
constexpr const char* kSeed = "seed";
constexpr const char* kBestEpoch = "best_epoch";
constexpr const char* kTestAcc = "test_acc";

}  // namespace

io::Metadata CheckpointInfo::to_metadata() const {
  io::Metadata m = model.to_metadata();
  m[kFormat] = kFormatName;
  if (!dataset.empty()) m[kDataset] = dataset;
  m[kSeed] = io::metadata_number(seed);
  m[kBestEpoch] = io::metadata_number(best_epoch);
  m[kTestAcc] = io::metadata_number(test_acc);
  return m;
}

CheckpointInfo CheckpointInfo::from_metadata(const io::Metadata& metadata, const std::string& where) {
  const io::MetadataReader read(metadata, where);
  GAT_CHECK(read.has(kFormat) && read.text(kFormat) == kFormatName, where, ": metadata '", kFormat,
            "' is not '", kFormatName, "' (not a gat_train checkpoint)");
  CheckpointInfo info;
  if (read.has(kDataset)) info.dataset = read.text(kDataset);
  info.model = GATConfig::from_metadata(metadata, where);
  info.seed = read.unsigned_integer(kSeed);
  info.best_epoch = read.integer(kBestEpoch);
  check_in_range(where + ": metadata " + kBestEpoch, info.best_epoch, TrainOptions::kEpochsRange);
  info.test_acc = read.number(kTestAcc);
  check_in_range(where + ": metadata " + kTestAcc, info.test_acc, Range<double>{0.0, 1.0});
  return info;
}

bool CheckpointInfo::operator==(const CheckpointInfo& o) const {
  return dataset == o.dataset && model == o.model && seed == o.seed && best_epoch == o.best_epoch &&
         test_acc == o.test_acc;
}

}  // namespace gat
