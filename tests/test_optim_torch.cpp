// The optimisers with two parameter groups, and the schedulers, against the values torch.optim
// gives (tests/torch_optim_fixtures.h, written by scripts/torch_optim_fixtures.py from torch
// itself). The schedulers' rates match bit for bit. The parameters match to 1e-15 relative in
// f64 (torch's CPU kernels fuse some multiply-adds, add(x, alpha) among them: a last bit may
// differ) and to f32 rounding in f32.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gat/framework/optim.h"
#include "gat_testing.h"
#include "torch_optim_fixtures.h"

using namespace gat;
using namespace torch_fixtures;

namespace {

using Rows = std::vector<std::vector<double>>;

void set_grad(Tensor& p, const std::vector<double>& g) {
  p.impl().grad = Tensor::from_vector(g, p.shape()).to(p.dtype()).impl_ptr();
}

// The fixtures' run: weight (2, 3) in group 0 (lr 0.01, weight decay 0.1), bias (3,) in group 1
// (lr 0.05, no decay), four steps; the bias has no gradient at the third. The options' own lr and
// weight decay (0.5, 0.7) are overridden by both groups. Returns weight then bias per step.
template <class Opt, class Options>
Rows run_groups(Options options, DType dtype) {
  options.lr = 0.5;
  options.weight_decay = 0.7;
  Tensor w = Tensor::from_vector(kW0, {2, 3}).to(dtype).set_requires_grad();
  Tensor b = Tensor::from_vector(kB0, {3}).to(dtype).set_requires_grad();
  Opt opt({ParamGroup({w}, 0.01, 0.1), ParamGroup({b}, 0.05, 0.0)}, options);
  Rows out;
  for (size_t step = 0; step < kGradW.size(); ++step) {
    opt.zero_grad();
    set_grad(w, kGradW[step]);
    if (!kGradB[step].empty()) set_grad(b, kGradB[step]);
    opt.step();
    std::vector<double> row = w.to(DType::f64).to_vector<double>();
    for (double v : b.to(DType::f64).to_vector<double>()) row.push_back(v);
    out.push_back(row);
  }
  EXPECT_EQ(opt.step_count(0), 4);
  EXPECT_EQ(opt.step_count(1), 3);  // the step without a gradient is skipped
  return out;
}

void expect_rows(const Rows& got, const Rows& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size()) << what;
    for (size_t i = 0; i < want[s].size(); ++i) {
      if (tolerance == 0.0)
        EXPECT_EQ(got[s][i], want[s][i]) << what << " step " << s + 1 << " value " << i;
      else
        EXPECT_NEAR(got[s][i], want[s][i], tolerance * (1 + std::abs(want[s][i])))
            << what << " step " << s + 1 << " value " << i;
    }
  }
}

template <class Opt, class Options>
void expect_torch(const Options& options, const Rows& f64, const Rows& f32, const std::string& what) {
  expect_rows(run_groups<Opt>(options, DType::f64), f64, 1e-15, what + " f64");
  expect_rows(run_groups<Opt>(options, DType::f32), f32, 2e-6, what + " f32");
}

AdamOptions adam_options() {
  AdamOptions o;
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  o.eps = 1e-3;
  return o;
}

RMSpropOptions rmsprop_options(double alpha, double momentum, bool centered) {
  RMSpropOptions o;
  o.alpha = alpha;
  o.eps = 1e-3;
  o.momentum = momentum;
  o.centered = centered;
  return o;
}

}  // namespace

TEST(OptimTorch, AdamGroups) { expect_torch<Adam>(adam_options(), k_adam_f64, k_adam_f32, "Adam"); }

TEST(OptimTorch, AdamWGroups) {
  AdamWOptions o;
  static_cast<AdamOptions&>(o) = adam_options();
  expect_torch<AdamW>(o, k_adamw_f64, k_adamw_f32, "AdamW");
}

TEST(OptimTorch, SGDMomentumGroups) {
  SGDOptions o;
  o.momentum = 0.9;
  expect_torch<SGD>(o, k_sgd_momentum_f64, k_sgd_momentum_f32, "SGD");
}

TEST(OptimTorch, RMSpropEveryForm) {
  expect_torch<RMSprop>(rmsprop_options(0.9, 0.0, false), k_rmsprop_f64, k_rmsprop_f32, "RMSprop");
  expect_torch<RMSprop>(rmsprop_options(0.9, 0.8, false), k_rmsprop_momentum_f64, k_rmsprop_momentum_f32,
                        "RMSprop momentum");
  expect_torch<RMSprop>(rmsprop_options(0.9, 0.0, true), k_rmsprop_centered_f64, k_rmsprop_centered_f32,
                        "RMSprop centered");
  // alpha 0.3: the grad_avg's lerp weight 0.7 takes torch.lerp's second form.
  expect_torch<RMSprop>(rmsprop_options(0.3, 0.5, true), k_rmsprop_centered_momentum_f64,
                        k_rmsprop_centered_momentum_f32, "RMSprop centered momentum");
}

TEST(OptimTorch, RMSpropStateNamesAndBadOptions) {
  Tensor p = Tensor::zeros({2}, DType::f64).set_requires_grad();
  RMSprop opt({p}, rmsprop_options(0.9, 0.5, true));
  set_grad(p, {1.0, -2.0});
  opt.step();
  const std::map<std::string, Tensor> state = opt.state_dict();
  for (const char* name : {"lr", "step", "square_avg.0", "momentum_buffer.0", "grad_avg.0"})
    EXPECT_EQ(state.count(name), 1u) << name;
  EXPECT_EQ(state.size(), 5u);
  RMSprop plain({p}, rmsprop_options(0.9, 0.0, false));  // plain RMSprop has no such buffers
  gat::testing::expect_error([&] { plain.load_state_dict(state); },
                             {"2 entries are not state", "square_avg"});
  gat::testing::expect_error([&] { RMSprop({p}, rmsprop_options(1.5, 0, false)); }, {"RMSprop", "alpha"});
  gat::testing::expect_error([&] { RMSprop({p}, rmsprop_options(-0.1, 0, false)); }, {"RMSprop", "alpha"});
  gat::testing::expect_error([&] { RMSprop({p}, rmsprop_options(0.9, -1, false)); }, {"RMSprop", "momentum"});
}

TEST(OptimTorch, GroupsMisuse) {
  Tensor a = Tensor::zeros({2}).set_requires_grad(), b = Tensor::zeros({3}).set_requires_grad();
  gat::testing::expect_error(
      [&] {
        Adam({ParamGroup({a}), ParamGroup({b, a})});
      },
      {"Adam", "parameter 2 is parameter 0 again"});
  gat::testing::expect_error([&] { SGD({ParamGroup({a}, -0.1)}); }, {"SGD", "learning rate", "group 0"});
  gat::testing::expect_error(
      [&] {
        SGD({ParamGroup({a}), ParamGroup({b}, std::nullopt, -1.0)});
      },
      {"SGD", "weight_decay", "group 1"});
  Adam opt({ParamGroup({a}), ParamGroup({b}, 0.5, 0.0)});
  EXPECT_EQ(opt.num_groups(), 2u);
  EXPECT_EQ(opt.lr(0), AdamOptions{}.lr);  // unset: the options'
  EXPECT_EQ(opt.lr(1), 0.5);
  EXPECT_EQ(opt.group_first(1), 1u);
  gat::testing::expect_error([&] { opt.lr(); }, {"Optimizer::lr", "2 parameter groups", "name the group"});
  gat::testing::expect_error([&] { opt.set_lr(0.1); }, {"Optimizer::set_lr", "2 parameter groups"});
  gat::testing::expect_error([&] { opt.set_lr(2, 0.1); }, {"no parameter group 2"});
  gat::testing::expect_error([&] { opt.set_lr(1, std::nan("")); }, {"invalid learning rate"});
  // The rates travel as "lr" (G,); an optimiser of another group count refuses them.
  const std::map<std::string, Tensor> state = opt.state_dict();
  EXPECT_EQ(state.at("lr").shape(), (Shape{2}));
  Adam single({a, b});
  gat::testing::expect_error([&] { single.load_state_dict(state); },
                             {"'lr' f64", "rates of 2 parameter groups, but this optimiser has 1"});
  Adam again({ParamGroup({a}), ParamGroup({b})});
  again.load_state_dict(state);
  EXPECT_EQ(again.lr(1), 0.5);
}

// ---- schedulers --------------------------------------------------------------------------------

namespace {

Rows rates_of(Optimizer& opt, Rows rows) {
  rows.push_back({opt.lr(0), opt.lr(1)});
  return rows;
}

struct TwoGroups {
  Tensor w = Tensor::zeros({1}).set_requires_grad(), b = Tensor::zeros({1}).set_requires_grad();
  SGD opt{{ParamGroup({w}, 0.1), ParamGroup({b}, 0.02)}};
};

}  // namespace

TEST(SchedulersTorch, SequentialWarmupThenCosine) {
  TwoGroups t;
  auto warmup = std::make_shared<LinearLR>(t.opt, 0.1, 1.0, 5);
  auto cosine = std::make_shared<CosineAnnealingLR>(t.opt, 10, 0.001);
  SequentialLR schedule(t.opt, {warmup, cosine}, {5});
  Rows got = rates_of(t.opt, {});
  for (int epoch = 0; epoch < 20; ++epoch) {
    schedule.step();
    got = rates_of(t.opt, got);
  }
  expect_rows(got, k_sequential_warmup_cosine, 0.0, "LinearLR then CosineAnnealingLR");
  EXPECT_EQ(schedule.last_epoch(), 20);
}

TEST(SchedulersTorch, SequentialOfThree) {
  TwoGroups t;
  auto warmup = std::make_shared<LinearLR>(t.opt, 0.5, 1.0, 3);
  auto steps = std::make_shared<StepLR>(t.opt, 2, 0.5);
  auto cosine = std::make_shared<CosineAnnealingLR>(t.opt, 4);
  SequentialLR schedule(t.opt, {warmup, steps, cosine}, {3, 8});
  Rows got = rates_of(t.opt, {});
  for (int epoch = 0; epoch < 14; ++epoch) {
    schedule.step();
    got = rates_of(t.opt, got);
  }
  expect_rows(got, k_sequential_three, 0.0, "LinearLR, StepLR, CosineAnnealingLR");
}

TEST(SchedulersTorch, SequentialMisuse) {
  TwoGroups t, other;
  std::shared_ptr<LRScheduler> a = std::make_shared<LinearLR>(t.opt), b = std::make_shared<StepLR>(t.opt, 2);
  auto elsewhere = std::make_shared<StepLR>(other.opt, 2);
  gat::testing::expect_error([&] { SequentialLR(t.opt, {}, {}); }, {"SequentialLR", "no schedulers"});
  gat::testing::expect_error([&] { SequentialLR(t.opt, {a, b}, {}); }, {"2 schedulers need 1 milestones"});
  gat::testing::expect_error([&] { SequentialLR(t.opt, {a, elsewhere}, {3}); }, {"another optimiser"});
  gat::testing::expect_error([&] { SequentialLR(t.opt, {a, b, a}, {3, 3}); }, {"ascending"});
  gat::testing::expect_error([&] { SequentialLR(t.opt, {a, b}, {0}); }, {"positive"});
  gat::testing::expect_error([&] { SequentialLR(t.opt, {a, nullptr}, {2}); }, {"scheduler 1 is null"});
}

namespace {

void expect_plateau(const ReduceLROnPlateau::Options& options, const std::vector<double>& metrics,
                    const Rows& want, const std::string& what) {
  TwoGroups t;
  ReduceLROnPlateau schedule(t.opt, options);
  Rows got;
  for (double metric : metrics) {
    schedule.step(metric);
    got.push_back({t.opt.lr(0), t.opt.lr(1), static_cast<double>(schedule.num_bad_epochs()),
                   static_cast<double>(schedule.cooldown_counter())});
  }
  expect_rows(got, want, 0.0, what);
}

}  // namespace

// The metric sequences meet the boundaries: ties with the best, improvements by exactly the
// threshold (not better), cooldown, min_lr (see the script).
TEST(SchedulersTorch, ReduceLROnPlateauBoundaries) {
  using Options = ReduceLROnPlateau::Options;
  Options min_rel;
  min_rel.factor = 0.5;
  min_rel.patience = 1;
  min_rel.threshold = 0.25;
  expect_plateau(min_rel, k_plateau_min_rel_metrics, k_plateau_min_rel, "min rel");
  Options min_abs;
  min_abs.factor = 0.5;
  min_abs.patience = 0;
  min_abs.threshold = 0.5;
  min_abs.threshold_mode = Options::Threshold::abs;
  min_abs.cooldown = 2;
  expect_plateau(min_abs, k_plateau_min_abs_cooldown_metrics, k_plateau_min_abs_cooldown, "min abs cooldown");
  Options max_rel;
  max_rel.mode = Options::Mode::max;
  max_rel.factor = 0.1;
  max_rel.patience = 2;
  max_rel.threshold = 0.5;
  max_rel.cooldown = 1;
  max_rel.min_lr = 0.005;
  expect_plateau(max_rel, k_plateau_max_rel_min_lr_metrics, k_plateau_max_rel_min_lr, "max rel min_lr");
  Options max_abs;
  max_abs.mode = Options::Mode::max;
  max_abs.factor = 0.5;
  max_abs.patience = 1;
  max_abs.threshold = 0.25;
  max_abs.threshold_mode = Options::Threshold::abs;
  expect_plateau(max_abs, k_plateau_max_abs_metrics, k_plateau_max_abs, "max abs");
}

TEST(SchedulersTorch, ReduceLROnPlateauMisuse) {
  TwoGroups t;
  ReduceLROnPlateau::Options bad;
  bad.factor = 1.0;
  gat::testing::expect_error([&] { ReduceLROnPlateau(t.opt, bad); }, {"ReduceLROnPlateau", "factor"});
  bad = {};
  bad.patience = -1;
  gat::testing::expect_error([&] { ReduceLROnPlateau(t.opt, bad); }, {"patience"});
  bad = {};
  bad.threshold = 1.0;  // rel, min: best * 0 would make nothing better
  gat::testing::expect_error([&] { ReduceLROnPlateau(t.opt, bad); }, {"threshold"});
  ReduceLROnPlateau schedule(t.opt);
  gat::testing::expect_error([&] { schedule.step(std::nan("")); }, {"ReduceLROnPlateau::step", "not finite"});
  EXPECT_EQ(schedule.last_epoch(), 0);  // the refused metric did not count
}
