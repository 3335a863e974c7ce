// Early stopping exactly as the GAT reference code (Velickovic et al., its Cora script), fed one
// epoch's validation accuracy and loss at a time:
//
//   if val_acc >= best_acc or val_loss <= best_loss:
//       if val_acc >= best_acc and val_loss <= best_loss:
//           remember this epoch (its test accuracy and parameters)
//       best_acc = max(best_acc, val_acc); best_loss = min(best_loss, val_loss); wait = 0
//   else:
//       wait += 1; stop when wait == patience
//
// Ties count as progress on both tests (>=, <=): on Cora the validation accuracy often repeats,
// and a tie resets the patience and moves the remembered epoch forward. A NaN loss is never
// progress. best_acc starts at 0 and best_loss at +infinity, so the first finite epoch is
// remembered.
#pragma once

#include <cstdint>
#include <limits>

namespace gat {

class EarlyStopping {
 public:
  // patience >= 1: the epochs without progress after which training stops.
  explicit EarlyStopping(int64_t patience);

  struct Decision {
    bool remember = false;  // this epoch is the new best: keep its parameters and test accuracy
    bool stop = false;      // `patience` epochs in a row made no progress: training ends here
  };
  Decision update(double val_acc, double val_loss);

  double best_acc() const { return best_acc_; }
  double best_loss() const { return best_loss_; }
  int64_t wait() const { return wait_; }  // epochs since the last progress

  // Continues from a saved state (a resumed run): the bests so far and the epochs since progress
  // (0 <= wait <= patience; patience when the saved run had stopped).
  void restore(double best_acc, double best_loss, int64_t wait);

 private:
  int64_t patience_;
  double best_acc_ = 0.0;
  double best_loss_ = std::numeric_limits<double>::infinity();
  int64_t wait_ = 0;
};

}  // namespace gat
