#include "gat/train/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include "gat/framework/detail/metadata_fields.h"

namespace gat {

namespace {

constexpr const char* kFormat = "format";
constexpr const char* kFormatName = "gat_train";
constexpr const char* kDataset = "dataset";

template <class T>
using FieldOf = detail::MetadataField<CheckpointInfo, T>;

// CheckpointInfo's numeric fields.
const detail::AnyMetadataField<CheckpointInfo> kNumericFields[] = {
    FieldOf<uint64_t>{"seed", &CheckpointInfo::seed, {0, std::numeric_limits<uint64_t>::max()}},
    FieldOf<int64_t>{"best_epoch", &CheckpointInfo::best_epoch, TrainOptions::kEpochsRange},
    FieldOf<double>{"test_acc", &CheckpointInfo::test_acc, {0.0, 1.0}},
};

// FNV-1a, 64 bits.
class Fnv1a {
 public:
  void add(const void* bytes, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(bytes);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ b[i]) * 0x100000001b3ULL;
  }
  // The tensor's dtype, shape and bytes (an undefined tensor adds a marker of its own).
  void add(const Tensor& t) {
    const int64_t marker = t.defined() ? static_cast<int64_t>(t.dtype()) : -1;
    add(&marker, sizeof marker);
    if (!t.defined()) return;
    const int64_t dims = t.dim();
    add(&dims, sizeof dims);
    for (int64_t d : t.shape()) add(&d, sizeof d);
    const Tensor host = t.to(Device::cpu);
    add(host.raw_data(), host.nbytes());
  }
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash_));
    return text;
  }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

io::Metadata CheckpointInfo::to_metadata() const {
  io::Metadata m = model.to_metadata();
  m[kFormat] = kFormatName;
  if (!dataset.empty()) m[kDataset] = dataset;
  if (!dataset_digest.empty()) m[kDatasetDigestKey] = dataset_digest;
  detail::for_each_field(kNumericFields, [&](const auto& f) { detail::write_field(f, *this, m); });
  return m;
}

CheckpointInfo CheckpointInfo::from_metadata(const io::Metadata& metadata, const std::string& where) {
  const io::MetadataReader read(metadata, where);
  check_checkpoint_format(metadata, where);
  GAT_CHECK(!is_run_checkpoint(metadata), where, ": a run checkpoint (written by --checkpoint after epoch ",
            metadata.at(kCheckpointEpochKey),
            "), not a model saved by --save: continue the run with --resume (and the run's flags), or let "
            "it finish with --save to evaluate its model");
  CheckpointInfo info;
  if (read.has(kDataset)) info.dataset = read.text(kDataset);
  if (read.has(kDatasetDigestKey)) info.dataset_digest = read.text(kDatasetDigestKey);
  info.model = GATConfig::from_metadata(metadata, where);
  detail::for_each_field(kNumericFields, [&](const auto& f) {
    detail::read_field(f, read, info);
    detail::check_field(f, where + ": metadata ", info);
  });
  return info;
}

bool CheckpointInfo::operator==(const CheckpointInfo& o) const {
  return dataset == o.dataset && dataset_digest == o.dataset_digest && model == o.model && seed == o.seed &&
         best_epoch == o.best_epoch && test_acc == o.test_acc;
}

bool is_run_checkpoint(const io::Metadata& metadata) { return metadata.count(kCheckpointEpochKey) > 0; }

void check_checkpoint_format(const io::Metadata& metadata, const std::string& where) {
  const io::MetadataReader read(metadata, where);
  GAT_CHECK(read.has(kFormat) && read.text(kFormat) == kFormatName, where, ": metadata '", kFormat,
            "' is not '", kFormatName, "' (not a gat_train checkpoint)");
}

void check_run_progress(const RunProgress& p, int64_t patience, const std::string& where) {
  const Tensor& steps = p.optimizer_steps;
  if (steps.defined() && steps.dtype() == DType::i32 && steps.dim() == 1) {
    const Tensor host = steps.to(Device::cpu);
    for (int64_t i = 0; i < host.numel(); ++i)
      GAT_CHECK(host.data<int32_t>()[i] == p.epoch, where, ": the optimiser took ", host.data<int32_t>()[i],
                " steps for parameter ", i, " in ", p.epoch, " epochs (", kCheckpointEpochKey,
                "; one step an epoch): the optimiser's state is not this run's");
  }
  GAT_CHECK(p.best_epoch <= p.epoch, where, ": the remembered epoch ", p.best_epoch,
            " (trainer.best_epoch) is after ", "the last epoch run, ", p.epoch);
  GAT_CHECK((p.wait == patience) == p.stopped, where, ": metadata 'trainer.wait' ", p.wait,
            (p.stopped ? " is not" : " is"), " the patience ", patience, " of a run that ",
            (p.stopped ? "stopped" : "goes on"));
  GAT_CHECK(p.wait <= p.epoch - p.best_epoch, where, ": ", p.wait,
            " epochs without progress (trainer.wait) since the remembered epoch ", p.best_epoch, " of ",
            p.epoch);
  GAT_CHECK((p.best_epoch == 0) == std::isinf(p.best_loss), where,
            ": the best validation loss (trainer.best_loss) is ", p.best_loss, ", yet ",
            p.best_epoch == 0 ? std::string("no epoch was remembered")
                              : detail::concat("epoch ", p.best_epoch, " was remembered"),
            " (a finite loss is remembered at once)");
  if (p.best_epoch == 0) {
    GAT_CHECK(p.val_acc == 0 && p.val_loss == 0 && p.test_acc == 0, where,
              ": the remembered epoch's numbers (trainer.val_acc ", p.val_acc, ", val_loss ", p.val_loss,
              ", test_acc ", p.test_acc, ") are not 0 though no epoch was remembered");
  } else {
    GAT_CHECK(p.best_acc >= p.val_acc && p.best_loss <= p.val_loss, where, ": early stopping's bests (",
              "trainer.best_acc ", p.best_acc, ", best_loss ", p.best_loss,
              ") are worse than the remembered epoch's (trainer.val_acc ", p.val_acc, ", val_loss ",
              p.val_loss, ")");
  }
}

std::string dataset_digest(const Dataset& data) {
  Fnv1a hash;
  for (const Tensor* t : {&data.x, &data.y, &data.train_index, &data.val_index, &data.test_index,
                          &data.graph.row_ptr(), &data.graph.edge_src(), &data.edge_attr})
    hash.add(*t);
  const int64_t sources = data.graph.num_src_nodes();
  hash.add(&sources, sizeof sources);
  return hash.hex();
}

std::string recorded_dataset_name(const std::string& name) {
  std::error_code error;
  if (!std::filesystem::is_directory(name, error)) return name;
  const std::filesystem::path absolute = std::filesystem::absolute(name, error).lexically_normal();
  return error ? name : absolute.string();
}

io::Metadata training_metadata(const TrainOptions& options) {
  return {{"lr", io::metadata_number(options.lr)},
          {"weight_decay", io::metadata_number(options.weight_decay)},
          {"patience", io::metadata_number(options.patience)},
          {"sparse_below", io::metadata_number(options.sparse_max_density)}};
}

std::string flag_differences(const io::Metadata& saved, const io::Metadata& wanted,
                             const std::string& whose) {
  static const std::map<std::string, std::string> kNames = {
      {"layer", "--model"},
      {"in_features", "the dataset's in_features"},
      {"num_classes", "the dataset's num_classes"},
      {"edge_dim", "the dataset's edge_dim"},
      {kDatasetDigestKey, "the dataset's content digest"},
      {"dtype", "dtype"},
      {"negative_slope", "negative_slope"}};
  std::string differences;
  for (const auto& [key, value] : wanted) {
    auto it = saved.find(key);
    if (it != saved.end() && it->second == value) continue;
    auto named = kNames.find(key);
    std::string flag = "--" + key;
    for (char& c : flag) c = c == '_' ? '-' : c;
    differences +=
        detail::concat(differences.empty() ? "" : ", ", named == kNames.end() ? flag : named->second, " ",
                       value, " (", whose, ": ", it == saved.end() ? "not recorded" : it->second, ")");
  }
  return differences;
}

}  // namespace gat
