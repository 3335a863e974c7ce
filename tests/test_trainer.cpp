// The early-stopping rule (train/early_stopping.h) on scripted validation sequences, ties
// especially (common on Cora, where the accuracy of 500 nodes repeats), and the trainer around it:
// it stops where the rule says and ends holding the remembered epoch's parameters; its run
// checkpoints hold the run's state exactly, a run resumed mid-patience is the uninterrupted one bit
// for bit, and a checkpoint's impossible values are refused. Fast: the rule needs no training, the
// trainer tests train a 2-layer GAT on a 200-node graph for a few epochs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gat/framework/io.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/optim.h"
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
                    {0.30, 1.00, false, false},  // loss tie: progress, wait 0
                    {0.40, 1.10, false, false},
                    {0.40, 1.10, false, true}});
}

TEST(EarlyStopping, AnEpochTyingBothBestsIsRememberedInsteadOfTheEarlierOne) {
  // `val_acc >= best_acc and val_loss <= best_loss`: the later of two equal epochs is kept (with
  // `>` on either side the earlier one would stay, seed 1 on Cora then keeps epoch 214, not 215).
  expect_decisions("both tie", 3,
                   {{0.50, 1.00, true, false},
                    {0.50, 1.00, true, false},     // both tie: the new best
                    {0.60, 1.00, true, false},     // better accuracy, loss tie
                    {0.60, 0.90, true, false},     // accuracy tie, better loss
                    {0.60, 0.95, false, false},    // accuracy tie only: progress, not the best
                    {0.55, 0.90, false, false}});  // loss tie only: progress, not the best
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
  EXPECT_TRUE(rule.update(0.0, 5.0).remember);   // accuracy 0 ties the start value
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

namespace {

// A run of the trainer on small_training_dataset (a 2-layer GAT of 2 heads of 4, seed 2): every
// epoch's numbers and the parameters after it.
struct SmallRun {
  std::vector<EpochStats> epochs;
  std::vector<std::vector<std::vector<float>>> params_after;  // [epoch - first][parameter]
  TrainResult result;
  std::vector<std::vector<float>> final_params;
  bool training_after = true;  // the model's mode after training
  Evaluation eval_after;       // the model evaluated after training
};

TrainOptions small_options() {
  TrainOptions options;
  options.max_epochs = 200;
  options.patience = 4;
  options.lr = 0.05;  // learns (and then overfits) within a few dozen epochs
  return options;
}

SmallRun train_small(const TrainOptions& options) {
  const Dataset data = small_training_dataset();
  Generator gen(2);
  GATConfig config;
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.hidden = 4;
  config.heads = 2;
  GAT model(config, gen);
  auto forward = [&](const Features& f, const Graph& g, Generator& gn) { return model.forward(f, g, gn); };
  SmallRun run;
  run.result = train_node_classifier(model, forward, data, options, gen, [&](const EpochStats& s) {
    run.epochs.push_back(s);
    run.params_after.emplace_back();
    for (const Tensor& p : model.parameters()) run.params_after.back().push_back(p.to_vector<float>());
  });
  for (const Tensor& p : model.parameters()) run.final_params.push_back(p.to_vector<float>());
  run.training_after = model.is_training();
  run.eval_after = evaluate(model, forward, data);
  return run;
}

// The first epoch of `run` after which early stopping waits (no progress for 1..patience-1
// epochs) with an earlier remembered epoch: where a checkpoint must carry the counter.
int64_t first_epoch_mid_patience(const SmallRun& run, int64_t patience) {
  EarlyStopping rule(patience);
  for (const EpochStats& s : run.epochs) {
    const EarlyStopping::Decision d = rule.update(s.val_acc, s.val_loss);
    if (rule.wait() > 0 && !d.stop) return s.epoch;
  }
  return 0;
}

void expect_same_epoch(const EpochStats& a, const EpochStats& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.loss, b.loss) << "epoch " << a.epoch;
  EXPECT_EQ(a.train_acc, b.train_acc) << "epoch " << a.epoch;
  EXPECT_EQ(a.val_loss, b.val_loss) << "epoch " << a.epoch;
  EXPECT_EQ(a.val_acc, b.val_acc) << "epoch " << a.epoch;
  EXPECT_EQ(a.test_acc, b.test_acc) << "epoch " << a.epoch;
}

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

// The uninterrupted run of small_options(), trained once for the tests that compare with it.
const SmallRun& straight_run() {
  static const SmallRun run = train_small(small_options());
  return run;
}

}  // namespace

// The trainer on a small graph: it stops where the rule stops, remembers the epoch the rule
// remembers, and ends holding that epoch's parameters (not the last epoch's).
TEST(Trainer, StopsByTheRuleAndRestoresTheRememberedEpochsParameters) {
  const SmallRun& run = straight_run();
  const TrainOptions options = small_options();
  const std::vector<EpochStats>& epochs = run.epochs;
  const TrainResult& result = run.result;

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
  const auto& want = run.params_after[static_cast<size_t>(result.best_epoch - 1)];
  EXPECT_EQ(run.final_params, want);
  EXPECT_NE(run.params_after.back(), want)
      << "the last epoch's parameters equal the best's: no restore shown";
  EXPECT_FALSE(run.training_after);
  const Evaluation& eval = run.eval_after;
  EXPECT_EQ(eval.val.acc, kept.val_acc);
  EXPECT_EQ(eval.val.loss, kept.val_loss);
  EXPECT_EQ(eval.test.acc, kept.test_acc);
}

// A run stopped mid-patience (early stopping's counter > 0, the remembered epoch earlier) and
// resumed from its checkpoint is the uninterrupted run, every epoch's numbers and the final
// parameters bit for bit: the counter, the bests and the remembered parameters travel.
TEST(Trainer, AResumeMidPatienceIsTheUninterruptedRunBitForBit) {
  TempDir dir("gat_test_trainer");
  const SmallRun& straight = straight_run();
  const int64_t cut = first_epoch_mid_patience(straight, small_options().patience);
  ASSERT_GT(cut, 0) << "the run never waits: no mid-patience checkpoint to test";
  ASSERT_LT(cut, straight.result.epochs);

  TrainOptions first = small_options();
  first.max_epochs = cut;
  first.checkpoints.path = dir.file("run.safetensors");
  first.checkpoints.every = 1000;  // written once, at the last epoch
  const SmallRun before = train_small(first);
  const io::Metadata meta = io::load_safetensors(first.checkpoints.path).metadata;
  EXPECT_GT(std::stoll(meta.at("trainer.wait")), 0);
  EXPECT_LT(std::stoll(meta.at("trainer.best_epoch")), cut);

  TrainOptions second = small_options();
  second.checkpoints.resume = first.checkpoints.path;
  const SmallRun after = train_small(second);
  ASSERT_EQ(before.epochs.size() + after.epochs.size(), straight.epochs.size());
  for (size_t k = 0; k < straight.epochs.size(); ++k)
    expect_same_epoch(k < before.epochs.size() ? before.epochs[k] : after.epochs[k - before.epochs.size()],
                      straight.epochs[k]);
  EXPECT_EQ(after.result.best_epoch, straight.result.best_epoch);
  EXPECT_EQ(after.result.epochs, straight.result.epochs);
  EXPECT_EQ(after.result.test_acc, straight.result.test_acc);
  EXPECT_EQ(after.result.val_acc, straight.result.val_acc);
  EXPECT_EQ(after.result.val_loss, straight.result.val_loss);
  EXPECT_EQ(after.final_params, straight.final_params);
}

// A checkpoint holds the run's state exactly: the parameters after its epoch, the remembered
// epoch's parameters and numbers, early stopping's bests and counter, the optimiser's rate and
// step counts, every number to the bit of the in-memory values.
TEST(Trainer, ACheckpointHoldsTheRunsStateExactly) {
  TempDir dir("gat_test_trainer");
  const SmallRun& straight = straight_run();
  const int64_t cut = first_epoch_mid_patience(straight, small_options().patience);
  ASSERT_GT(cut, 0);
  TrainOptions options = small_options();
  options.max_epochs = cut;
  options.checkpoints.path = dir.file("run.safetensors");
  const SmallRun run = train_small(options);
  const io::Safetensors file = io::load_safetensors(options.checkpoints.path);
  const io::MetadataReader read(file.metadata, "checkpoint");

  EarlyStopping rule(options.patience);
  int64_t best = 0;
  for (const EpochStats& s : run.epochs)
    if (rule.update(s.val_acc, s.val_loss).remember) best = s.epoch;
  ASSERT_GT(best, 0);
  const EpochStats& kept = run.epochs[static_cast<size_t>(best - 1)];
  EXPECT_EQ(read.integer(kCheckpointEpochKey), cut);
  EXPECT_EQ(read.integer("trainer.best_epoch"), best);
  EXPECT_EQ(read.integer("trainer.wait"), rule.wait());
  EXPECT_EQ(read.number("trainer.best_acc"), rule.best_acc());
  EXPECT_EQ(read.number("trainer.best_loss"), rule.best_loss());
  EXPECT_EQ(read.number("trainer.test_acc"), kept.test_acc);
  EXPECT_EQ(read.number("trainer.val_acc"), kept.val_acc);
  EXPECT_EQ(read.number("trainer.val_loss"), kept.val_loss);
  EXPECT_EQ(read.text("trainer.stopped"), "0");

  GATConfig config;  // the names of the parameters, in order
  const Dataset data = small_training_dataset();
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  config.hidden = 4;
  config.heads = 2;
  Generator init(0);
  GAT model(config, init);
  const auto named = model.named_parameters();
  const auto& last = run.params_after.back();
  const auto& remembered = run.params_after[static_cast<size_t>(best - 1)];
  ASSERT_EQ(named.size(), last.size());
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(floats(file.tensors.at(named[i].first)), last[i]) << named[i].first;
    EXPECT_EQ(floats(file.tensors.at("trainer.best." + std::to_string(i))), remembered[i]) << named[i].first;
  }
  EXPECT_EQ(file.tensors.at("optimizer.lr").item(), options.lr);
  EXPECT_EQ(file.tensors.at("optimizer.step").to_vector<int32_t>(),
            std::vector<int32_t>(named.size(), static_cast<int32_t>(cut)));
}

namespace {

// The checkpoint of a small run after 3 epochs, saved in `dir`.
io::Safetensors three_epoch_checkpoint(const TempDir& dir) {
  TrainOptions options = small_options();
  options.max_epochs = 3;
  options.checkpoints.path = dir.file("good.safetensors");
  train_small(options);
  return io::load_safetensors(options.checkpoints.path);
}

}  // namespace

// Every value of a run checkpoint is checked before anything changes; each bad one is refused
// by name, and the model keeps its parameters.
TEST(Trainer, AResumeRefusesEveryImpossibleValueBeforeTraining) {
  TempDir dir("gat_test_trainer");
  const io::Safetensors good = three_epoch_checkpoint(dir);
  struct Bad {
    std::string key, value, message;
  };
  const std::vector<Bad> cases = {
      {"trainer.epoch", "abc", "metadata 'trainer.epoch' = 'abc' is not a number"},
      {"trainer.epoch", "9223372036854775807",
       "trainer.epoch 9223372036854775807 is outside [1, 2147483647]"},
      {"trainer.epoch", "0", "trainer.epoch 0 is outside"},
      {"trainer.test_acc", "7", "trainer.test_acc 7 is outside [0, 1]"},
      {"trainer.val_acc", "-0.5", "trainer.val_acc -0.5 is outside [0, 1]"},
      {"trainer.val_loss", "-1", "trainer.val_loss -1 is outside"},
      {"trainer.best_acc", "NaN", "metadata 'trainer.best_acc' = 'NaN' is not a number"},
      {"trainer.best_loss", "-2", "trainer.best_loss -2 is outside"},
      {"trainer.best_epoch", "4",
       "the remembered epoch 4 (trainer.best_epoch) is after the last epoch run, 3"},
      {"trainer.wait", "5", "trainer.wait 5 is outside [0, 4]"},
      {"trainer.wait", "4", "'trainer.wait' 4 is the patience 4 of a run that goes on"},
      {"trainer.stopped", "yes", "'trainer.stopped' = 'yes' is not 0 or 1"},
      {"trainer.step_ms_total", "-3", "trainer.step_ms_total -3 is outside"},
      {"trainer.next_stream", "-1", "'trainer.next_stream' = -1 is not an integer in [0, 2^64)"},
      {"trainer.seed", "3", "the run used generator seed 3, this one has 2"},
      // Values each in range, but not of one run (check_run_progress):
      {"trainer.best_loss", "inf", "the best validation loss (trainer.best_loss) is inf, yet epoch"},
      {"trainer.wait", "3", "3 epochs without progress (trainer.wait) since the remembered epoch"},
      {"trainer.best_acc", "0", "early stopping's bests (trainer.best_acc 0, best_loss"},
      {"optimizer.step", "1000000000", "the optimiser took 1000000000 steps for parameter 0 in 3 epochs"},
  };
  for (const Bad& bad : cases) {
    SCOPED_TRACE(bad.key + " = " + bad.value);
    io::Safetensors file = good;
    if (bad.key == "optimizer.step") {  // a tensor: the first parameter's count
      Tensor steps = file.tensors.at(bad.key).clone();
      steps.data<int32_t>()[0] = std::stoi(bad.value);
      file.tensors[bad.key] = steps;
    } else {
      file.metadata[bad.key] = bad.value;
    }
    const std::string path = dir.file("bad.safetensors");
    io::save_safetensors(path, file.tensors, file.metadata);
    TrainOptions resume = small_options();
    resume.checkpoints.resume = path;
    std::string message;
    try {
      train_small(resume);
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(bad.message), std::string::npos) << message;
  }
}

// The generator's position must be at least where the epoch puts it: one stream less would draw
// an earlier epoch's dropout masks again (0, hand-edited, epoch 1's). Further on is a run whose
// generator began further on. Checked by the first resumed step, once it has drawn its streams.
TEST(Trainer, AResumeRefusesAGeneratorPositionBeforeItsEpoch) {
  TempDir dir("gat_test_trainer");
  const io::Safetensors good = three_epoch_checkpoint(dir);
  const uint64_t saved =
      io::MetadataReader(good.metadata, "checkpoint").unsigned_integer("trainer.next_stream");
  auto resume_with = [&](uint64_t stream) {
    io::Safetensors file = good;
    file.metadata["trainer.next_stream"] = std::to_string(stream);
    const std::string path = dir.file("edited.safetensors");
    io::save_safetensors(path, file.tensors, file.metadata);
    TrainOptions resume = small_options();
    resume.max_epochs = 4;
    resume.checkpoints.resume = path;
    return train_small(resume);
  };
  ASSERT_GT(saved, 1u);
  for (const uint64_t short_of : {saved - 1, uint64_t{0}}) {
    try {
      resume_with(short_of);
      ADD_FAILURE() << "a generator at stream " << short_of << " was accepted";
    } catch (const Error& e) {
      const std::string expected = "'trainer.next_stream' = " + std::to_string(short_of) + " is before the " +
                                   std::to_string(saved) + " that epoch 3 (trainer.epoch) reaches";
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(resume_with(saved).epochs.size(), 1u);
  EXPECT_EQ(resume_with(saved + 5).epochs.size(), 1u);
}

// ---- any optimiser, any loss ------------------------------------------------------------------

namespace {

// Adam with the default's settings and the masked cross-entropy through autograd: what the
// trainer does without the hooks.
TrainOptions default_made_explicit() {
  TrainOptions options = small_options();
  options.make_optimizer = [lr = options.lr, wd = options.weight_decay](Module& model) {
    AdamOptions adam;
    adam.lr = lr;
    adam.weight_decay = wd;
    return std::make_unique<Adam>(model.parameters(), adam);
  };
  options.loss = [](const Tensor& logits, const Dataset& data) {
    return ops::masked_cross_entropy(logits, data.y, data.train_index);
  };
  return options;
}

// RMSprop in two groups (no weight decay on biases), a loss of twice the cross-entropy.
TrainOptions other_optimiser_and_loss() {
  TrainOptions options = small_options();
  options.max_epochs = 8;
  options.make_optimizer = [](Module& model) {
    std::vector<Tensor> decayed, not_decayed;
    for (auto& [name, p] : model.named_parameters())
      (name.find("bias") == std::string::npos ? decayed : not_decayed).push_back(p);
    RMSpropOptions o;
    o.lr = 0.01;
    o.weight_decay = 5e-4;
    o.momentum = 0.5;
    return std::make_unique<RMSprop>(
        std::vector<ParamGroup>{ParamGroup(decayed), ParamGroup(not_decayed, 0.02, 0.0)}, o);
  };
  options.loss = [](const Tensor& logits, const Dataset& data) {
    return ops::scale(ops::masked_cross_entropy(logits, data.y, data.train_index), 2.0);
  };
  return options;
}

}  // namespace

// The hooks set to what the trainer does without them give the same run, bit for bit (the fused
// gradient equals the autograd one): they are the only way the step is taken.
TEST(Trainer, TheDefaultOptimiserAndLossMadeExplicitAreTheSameRun) {
  const SmallRun run = train_small(default_made_explicit());
  const SmallRun& straight = straight_run();
  ASSERT_EQ(run.epochs.size(), straight.epochs.size());
  for (size_t k = 0; k < run.epochs.size(); ++k) expect_same_epoch(run.epochs[k], straight.epochs[k]);
  EXPECT_EQ(run.final_params, straight.final_params);
}

// Another optimiser and loss train differently, and a run of them stopped and resumed from its
// checkpoint (RMSprop's state in two groups travels) is the uninterrupted one, bit for bit.
TEST(Trainer, AnotherOptimiserAndLossResumeBitForBit) {
  TempDir dir("gat_test_trainer");
  const TrainOptions options = other_optimiser_and_loss();
  const SmallRun straight = train_small(options);
  ASSERT_EQ(straight.epochs.size(), 8u);
  EXPECT_NE(straight.epochs[1].loss, straight_run().epochs[1].loss);
  TrainOptions first = options;
  first.max_epochs = 3;
  first.checkpoints.path = dir.file("run.safetensors");
  const SmallRun before = train_small(first);
  EXPECT_EQ(io::load_safetensors(first.checkpoints.path).tensors.count("optimizer.square_avg.0"), 1u);
  TrainOptions second = options;
  second.checkpoints.resume = first.checkpoints.path;
  const SmallRun after = train_small(second);
  ASSERT_EQ(before.epochs.size() + after.epochs.size(), straight.epochs.size());
  for (size_t k = 0; k < after.epochs.size(); ++k) expect_same_epoch(after.epochs[k], straight.epochs[k + 3]);
  EXPECT_EQ(after.final_params, straight.final_params);
  // Resuming with another optimiser is refused.
  TrainOptions adam = small_options();
  adam.checkpoints.resume = first.checkpoints.path;
  gat::testing::expect_error([&] { train_small(adam); }, {"'lr'", "2 parameter groups", "has 1"});
}

TEST(Trainer, ABadOptimiserOrLossIsAClearError) {
  TrainOptions none = small_options();
  none.make_optimizer = [](Module&) { return std::unique_ptr<Optimizer>(); };
  gat::testing::expect_error([&] { train_small(none); }, {"train: make_optimizer gave no optimiser"});
  TrainOptions rows = small_options();
  rows.loss = [](const Tensor& logits, const Dataset&) { return logits; };
  gat::testing::expect_error([&] { train_small(rows); }, {"train: the loss gave", "one value with autograd"});
}
