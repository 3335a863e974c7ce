// The early-stopping rule (train/early_stopping.h) on scripted validation sequences, ties
// especially (common on Cora, where the accuracy of 500 nodes repeats), and the trainer around it:
// it stops where the rule says and ends holding the remembered epoch's parameters. Fast: the rule
// needs no training, the trainer test trains a 2-layer GAT on a 200-node graph for a few epochs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gat/models/gat.h"
#include "gat/train/early_stopping.h"
#include "gat/train/trainer.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

struct Epoch {
  double val_acc, val_loss;
  bool remember, stop;  // what the reference rule decides
};

// Feeds the epochs to a fresh rule and checks every decision.
void expect_decisions(const std::string& what, int64_t patience, const std::vector<Epoch>& epochs) {
  EarlyStopping rule(patience);
  for (size_t k = 0; k < epochs.size(); ++k) {
    const EarlyStopping::Decision d = rule.update(epochs[k].val_acc, epochs[k].val_loss);
    EXPECT_EQ(d.remember, epochs[k].remember) << what << ": epoch " << k + 1 << " remember";
    EXPECT_EQ(d.stop, epochs[k].stop) << what << ": epoch " << k + 1 << " stop";
  }
}

}  // namespace

TEST(EarlyStopping, AnAccuracyTieWithAWorseLossResetsThePatience) {
  // The reference's Cora script: `val_acc >= best_acc or val_loss <= best_loss` resets the wait. With `>`
  // the tie at epoch 3 would count as a bad epoch and training would stop there.
  expect_decisions("accuracy tie", 2,
                   {{0.50, 1.00, true, false},
                    {0.40, 1.10, false, false},   // wait 1
                    {0.50, 1.20, false, false},   // accuracy tie: progress, wait 0, not the best
                    {0.40, 1.30, false, false},   // wait 1
                    {0.40, 1.30, false, true}});  // wait 2 == patience
}

TEST(EarlyStopping, ALossTieWithAWorseAccuracyResetsThePatience) {
  expect_decisions("loss tie", 2,
                   {{0.50, 1.00, true, false},
                    {0.40, 1.10, false, false},
                    {0.30, 1.00, false, false},   // loss tie: progress, wait 0
                    {0.40, 1.10, false, false},
                    {0.40, 1.10, false, true}});
}

TEST(EarlyStopping, AnEpochTyingBothBestsIsRememberedInsteadOfTheEarlierOne) {
  // `val_acc >= best_acc and val_loss <= best_loss`: the later of two equal epochs is kept (with
  // `>` on either side the earlier one would stay, seed 1 on Cora then keeps epoch 214, not 215).
  expect_decisions("both tie", 3,
                   {{0.50, 1.00, true, false},
                    {0.50, 1.00, true, false},    // both tie: the new best
                    {0.60, 1.00, true, false},    // better accuracy, loss tie
                    {0.60, 0.90, true, false},    // accuracy tie, better loss
                    {0.60, 0.95, false, false},   // accuracy tie only: progress, not the best
                    {0.55, 0.90, false, false}}); // loss tie only: progress, not the best
}

TEST(EarlyStopping, BestsAreRunningMaxAndMinNotTheRememberedEpochs) {
  EarlyStopping rule(5);
  rule.update(0.50, 1.00);
  rule.update(0.70, 1.20);  // progress on accuracy only: best_acc 0.7, best_loss stays 1.0
  EXPECT_EQ(rule.best_acc(), 0.70);
  EXPECT_EQ(rule.best_loss(), 1.00);
  rule.update(0.60, 0.80);  // progress on loss only
  EXPECT_EQ(rule.best_acc(), 0.70);
  EXPECT_EQ(rule.best_loss(), 0.80);
  // Neither best reached on its own: an epoch must match both running bests to be remembered.
  EXPECT_FALSE(rule.update(0.70, 0.85).remember);
  EXPECT_TRUE(rule.update(0.70, 0.80).remember);
}

TEST(EarlyStopping, StopsAfterExactlyPatienceEpochsWithoutProgress) {
  for (int64_t patience : {1, 3}) {
    EarlyStopping rule(patience);
    EXPECT_TRUE(rule.update(0.5, 1.0).remember);
    for (int64_t k = 1; k < patience; ++k) {
      EXPECT_FALSE(rule.update(0.4, 1.5).stop) << "patience " << patience << " bad epoch " << k;
      EXPECT_EQ(rule.wait(), k);
    }
    EXPECT_TRUE(rule.update(0.4, 1.5).stop) << "patience " << patience;
  }
}

TEST(EarlyStopping, ANanLossIsNeverProgressAndAFirstFiniteEpochIsRemembered) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EarlyStopping rule(2);
  EXPECT_TRUE(rule.update(0.0, 5.0).remember);  // accuracy 0 ties the start value
  EXPECT_FALSE(rule.update(0.0, nan).remember);  // accuracy tie: progress, but NaN is no best
  EXPECT_EQ(rule.best_loss(), 5.0);
  EXPECT_EQ(rule.wait(), 0);
  EarlyStopping fresh(1);
  EXPECT_TRUE(fresh.update(0.3, 2.0).remember);
  EXPECT_TRUE(fresh.update(0.2, nan).stop);
}

TEST(EarlyStopping, RejectsAPatienceBelowOne) {
  try {
    EarlyStopping rule(0);
    FAIL() << "patience 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("patience 0 must be at least 1"), std::string::npos) << e.what();
  }
}

// The trainer on a small graph: it stops where the rule stops, remembers the epoch the rule
// remembers, and ends holding that epoch's parameters (not the last epoch's).
TEST(Trainer, StopsByTheRuleAndRestoresTheRememberedEpochsParameters) {
  const Dataset data = small_training_dataset();
  Generator gen(2);
  GATConfig config;
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.hidden = 4;
  config.heads = 2;
  GAT model(config, gen);
  auto forward = [&](const Features& f, const Graph& g, Generator& gn) { return model.forward(f, g, gn); };
  TrainOptions options;
  options.max_epochs = 200;
  options.patience = 4;
  options.lr = 0.05;  // learns (and then overfits) within a few dozen epochs
  std::vector<EpochStats> epochs;
  std::vector<std::vector<std::vector<float>>> params_after;  // [epoch - 1][parameter]
  const TrainResult result =
      train_node_classifier(model, forward, data, options, gen, [&](const EpochStats& s) {
        epochs.push_back(s);
        params_after.emplace_back();
        for (const Tensor& p : model.parameters()) params_after.back().push_back(p.to_vector<float>());
      });

  // The rule replayed on the logged epochs gives the trainer's best epoch and stopping epoch.
  EarlyStopping rule(options.patience);
  int64_t best = 0, stopped = 0;
  for (const EpochStats& s : epochs) {
    const EarlyStopping::Decision d = rule.update(s.val_acc, s.val_loss);
    if (d.remember) best = s.epoch;
    if (d.stop) stopped = s.epoch;
  }
  ASSERT_EQ(result.epochs, static_cast<int64_t>(epochs.size()));
  EXPECT_EQ(stopped, result.epochs) << "the trainer did not stop where the rule stops";
  EXPECT_EQ(result.best_epoch, best);
  ASSERT_LT(result.best_epoch, result.epochs) << "the run must end after its best epoch to show the restore";
  const EpochStats& kept = epochs[static_cast<size_t>(result.best_epoch - 1)];
  EXPECT_EQ(result.test_acc, kept.test_acc);
  EXPECT_EQ(result.val_acc, kept.val_acc);
  EXPECT_EQ(result.val_loss, kept.val_loss);

  // The model holds the remembered epoch's parameters, bit for bit, and evaluates as it did.
  const std::vector<Tensor> params = model.parameters();
  const auto& want = params_after[static_cast<size_t>(result.best_epoch - 1)];
  ASSERT_EQ(params.size(), want.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].to_vector<float>(), want[i]) << "parameter " << i;
  EXPECT_NE(params_after.back(), want) << "the last epoch's parameters equal the best's: no restore shown";
  EXPECT_FALSE(model.is_training());
  const Evaluation eval = evaluate(model, forward, data);
  EXPECT_EQ(eval.val.acc, kept.val_acc);
  EXPECT_EQ(eval.val.loss, kept.val_loss);
  EXPECT_EQ(eval.test.acc, kept.test_acc);
}
