// The optimisers with two parameter groups, and the schedulers, against the values torch.optim
// gives (tests/data/torch_optim.safetensors, written by scripts/torch_optim_fixtures.py from torch
// itself; the script says what each tensor holds). The schedulers' rates match bit for bit. The parameters
// match to 1e-15 relative in f64 (torch's CPU kernels fuse some multiply-adds, add(x, alpha) among them: a
// last bit may differ) and to f32 rounding in f32.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gat/framework/io.h"
#include "gat/framework/optim.h"
#include "gat_testing.h"

using namespace gat;

namespace {

using Rows = std::vector<std::vector<double>>;

// A tensor of the fixtures' file, as stored (f64, or i32 for grad_b_given).
const Tensor& fixture(const std::string& name) {
  static const io::TensorMap tensors =
      io::load_safetensors(std::string(GAT_SOURCE_DIR) + "/tests/data/torch_optim.safetensors").tensors;
  const auto it = tensors.find(name);
  if (it == tensors.end()) throw std::runtime_error("torch_optim.safetensors has no tensor '" + name + "'");
  return it->second;
}

std::vector<double> values(const std::string& name) { return fixture(name).to_vector<double>(); }

// A (rows, columns) fixture as its rows.
Rows rows(const std::string& name) {
  const Tensor& t = fixture(name);
  const std::vector<double> all = t.to_vector<double>();
  const size_t columns = static_cast<size_t>(t.size(1));
  Rows out;
  for (size_t begin = 0; begin < all.size(); begin += columns)
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(begin),
                     all.begin() + static_cast<std::ptrdiff_t>(begin + columns));
  return out;
}

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
  Tensor w = fixture("w0").to(dtype).set_requires_grad();
  Tensor b = fixture("b0").to(dtype).set_requires_grad();
  Opt opt({ParamGroup({w}, 0.01, 0.1), ParamGroup({b}, 0.05, 0.0)}, options);
  const Rows grad_w = rows("grad_w"), grad_b = rows("grad_b");
  const std::vector<int32_t> grad_b_given = fixture("grad_b_given").to_vector<int32_t>();
  Rows out;
  for (size_t step = 0; step < grad_w.size(); ++step) {
    opt.zero_grad();
    set_grad(w, grad_w[step]);
    if (grad_b_given[step]) set_grad(b, grad_b[step]);
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

// The runs in f64 and f32 against the fixtures NAME_f64 and NAME_f32.
template <class Opt, class Options>
void expect_torch(const Options& options, const std::string& name) {
  expect_rows(run_groups<Opt>(options, DType::f64), rows(name + "_f64"), 1e-15, name + " f64");
  expect_rows(run_groups<Opt>(options, DType::f32), rows(name + "_f32"), 2e-6, name + " f32");
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

TEST(OptimTorch, AdamGroups) { expect_torch<Adam>(adam_options(), "adam"); }

TEST(OptimTorch, AdamWGroups) {
  AdamWOptions o;
  static_cast<AdamOptions&>(o) = adam_options();
  expect_torch<AdamW>(o, "adamw");
}

TEST(OptimTorch, SGDMomentumGroups) {
  SGDOptions o;
  o.momentum = 0.9;
  expect_torch<SGD>(o, "sgd_momentum");
}

TEST(OptimTorch, RMSpropEveryForm) {
  expect_torch<RMSprop>(rmsprop_options(0.9, 0.0, false), "rmsprop");
  expect_torch<RMSprop>(rmsprop_options(0.9, 0.8, false), "rmsprop_momentum");
  expect_torch<RMSprop>(rmsprop_options(0.9, 0.0, true), "rmsprop_centered");
  // alpha 0.3: the grad_avg's lerp weight 0.7 takes torch.lerp's second form.
  expect_torch<RMSprop>(rmsprop_options(0.3, 0.5, true), "rmsprop_centered_momentum");
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
  expect_rows(got, rows("sequential_warmup_cosine"), 0.0, "LinearLR then CosineAnnealingLR");
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
  expect_rows(got, rows("sequential_three"), 0.0, "LinearLR, StepLR, CosineAnnealingLR");
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

// The fixture case NAME: its metrics (plateau_NAME_metrics) and per step the rates, the bad
// epochs and the cooldown counter (plateau_NAME).
void expect_plateau(const ReduceLROnPlateau::Options& options, const std::string& name) {
  TwoGroups t;
  ReduceLROnPlateau schedule(t.opt, options);
  Rows got;
  for (double metric : values("plateau_" + name + "_metrics")) {
    schedule.step(metric);
    got.push_back({t.opt.lr(0), t.opt.lr(1), static_cast<double>(schedule.num_bad_epochs()),
                   static_cast<double>(schedule.cooldown_counter())});
  }
  expect_rows(got, rows("plateau_" + name), 0.0, name);
}

}  // namespace

// The metric sequences meet the boundaries: ties with the best, improvements by exactly the
// threshold (not better), cooldown, min_lr (see the script).
TEST(SchedulersTorch, ReduceLROnPlateauBoundaries) {
  using Options = ReduceLROnPlateau::Options;
  using Mode = Options::Mode;
  using Threshold = Options::Threshold;
  // mode, factor, patience, threshold, threshold_mode, cooldown, min_lr: the script's PLATEAUS
  expect_plateau(Options{Mode::min, 0.5, 1, 0.25, Threshold::rel, 0, 0.0}, "min_rel");
  expect_plateau(Options{Mode::min, 0.5, 0, 0.5, Threshold::abs, 2, 0.0}, "min_abs_cooldown");
  expect_plateau(Options{Mode::max, 0.1, 2, 0.5, Threshold::rel, 1, 0.005}, "max_rel_min_lr");
  expect_plateau(Options{Mode::max, 0.5, 1, 0.25, Threshold::abs, 0, 0.0}, "max_abs");
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
