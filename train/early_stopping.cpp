#include "gat/train/early_stopping.h"

#include <algorithm>

#include "gat/framework/check.h"

namespace gat {

EarlyStopping::EarlyStopping(int64_t patience) : patience_(patience) {
  GAT_CHECK(patience >= 1, "EarlyStopping: patience ", patience, " must be at least 1");
}

void EarlyStopping::restore(double best_acc, double best_loss, int64_t wait) {
  GAT_CHECK(wait >= 0 && wait <= patience_, "EarlyStopping::restore: wait ", wait, " outside [0, ", patience_,
            "]");
  best_acc_ = best_acc;
  best_loss_ = best_loss;
  wait_ = wait;
}

EarlyStopping::Decision EarlyStopping::update(double val_acc, double val_loss) {
  Decision d;
  if (val_acc >= best_acc_ || val_loss <= best_loss_) {
    d.remember = val_acc >= best_acc_ && val_loss <= best_loss_;
    best_acc_ = std::max(best_acc_, val_acc);
    best_loss_ = std::min(best_loss_, val_loss);
    wait_ = 0;
  } else {
    d.stop = ++wait_ == patience_;
  }
  return d;
}

}  // namespace gat
