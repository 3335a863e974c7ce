// Adam, AdamW and SGD against PyTorch's update formulas written out here in double; the
// learning rate schedulers against torch's closed forms; clip_grad_norm; optimiser state in
// checkpoints; on CUDA, the optimisers' steps (RMSprop's and two groups' too), clip_grad_norm and a resumed
// Adam against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/io.h"
#include "gat/framework/optim.h"
#include "gat/layers/linear.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

namespace {

using Vec = std::vector<double>;

const Vec kStart{0.5, -1.0, 2.0, 0.0};
const std::vector<Vec> kGrads{{0.1, -0.2, 0.3, 1e-3}, {-0.4, 0.5, 0.05, -2.0}};

// Sets the gradient of p by hand, as backward() would.
void set_grad(Tensor& p, const Vec& g) {
  p.impl().grad = Tensor::from_vector(g, p.shape()).to(p.dtype()).impl_ptr();
}

// Runs the optimiser for kGrads.size() steps on a parameter starting at kStart; returns the
// parameter after each step.
template <class Opt, class Options>
std::vector<Vec> run(const Options& options, DType dtype = DType::f64) {
  Tensor p = Tensor::from_vector(kStart, {2, 2}).to(dtype).set_requires_grad();
  Opt opt({p}, options);
  std::vector<Vec> out;
  for (const Vec& g : kGrads) {
    set_grad(p, g);
    opt.step();
    opt.zero_grad();
    out.push_back(p.to(DType::f64).to_vector<double>());
  }
  return out;
}

// torch.optim.Adam / AdamW, one parameter, step t = 1, 2, ...:
//   AdamW: p = p * (1 - lr * wd);                  Adam: g = g + wd * p
//   m = m + (1 - b1) * (g - m);  v = b2 * v + (1 - b2) * g * g
//   p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
std::vector<Vec> adam_reference(double lr, double b1, double b2, double eps, double wd, bool decoupled) {
  Vec p = kStart, m(p.size(), 0.0), v(p.size(), 0.0);
  std::vector<Vec> out;
  for (size_t t = 1; t <= kGrads.size(); ++t) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = kGrads[t - 1][i];
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        g += wd * p[i];
      m[i] = m[i] + (1 - b1) * (g - m[i]);
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      p[i] -= lr / (1 - std::pow(b1, t)) * m[i] / (std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps);
    }
    out.push_back(p);
  }
  return out;
}

// torch.optim.SGD, dampening 0: g = g + wd * p; b = g (first step) else momentum * b + g;
//   p = p - lr * (momentum != 0 ? b : g)
std::vector<Vec> sgd_reference(double lr, double momentum, double wd) {
  Vec p = kStart, b(p.size(), 0.0);
  std::vector<Vec> out;
  for (size_t t = 1; t <= kGrads.size(); ++t) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = kGrads[t - 1][i] + wd * p[i];
      if (momentum != 0) {
        b[i] = t == 1 ? g : momentum * b[i] + g;
        g = b[i];
      }
      p[i] -= lr * g;
    }
    out.push_back(p);
  }
  return out;
}

void expect_near(const std::vector<Vec>& got, const std::vector<Vec>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s)
    for (size_t i = 0; i < got[s].size(); ++i)
      EXPECT_NEAR(got[s][i], want[s][i], rel * std::max(1.0, std::abs(want[s][i])))
          << "step " << s + 1 << " element " << i;
}

// Adam's or AdamW's options (the same fields): lr 0.1, betas (0.8, 0.95), eps 1e-3, weight decay
// 0.3, none of them the default.
template <class Options>
Options adam_test_options() {
  Options o;
  o.lr = 0.1;
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  o.eps = 1e-3;
  o.weight_decay = 0.3;
  return o;
}

}  // namespace

TEST(Optim, AdamMatchesTorchFormula) {
  const AdamOptions o = adam_test_options<AdamOptions>();
  expect_near(run<Adam>(o), adam_reference(0.1, 0.8, 0.95, 1e-3, 0.3, false), 1e-15);
  expect_near(run<Adam>(o, DType::f32), adam_reference(0.1, 0.8, 0.95, 1e-3, 0.3, false), 1e-6);
  // The defaults: the first step moves every element by about lr against its gradient's sign.
  std::vector<Vec> d = run<Adam>(AdamOptions{});
  expect_near(d, adam_reference(1e-3, 0.9, 0.999, 1e-8, 0.0, false), 1e-15);
  EXPECT_NEAR(d[0][0], 0.5 - 1e-3, 1e-9);
  EXPECT_NEAR(d[0][1], -1.0 + 1e-3, 1e-9);
}

TEST(Optim, AdamWDecouplesWeightDecay) {
  const AdamWOptions o = adam_test_options<AdamWOptions>();
  std::vector<Vec> got = run<AdamW>(o);
  expect_near(got, adam_reference(0.1, 0.8, 0.95, 1e-3, 0.3, true), 1e-15);
  // Not the same as Adam's L2 form.
  EXPECT_GT(std::abs(got[1][2] - adam_reference(0.1, 0.8, 0.95, 1e-3, 0.3, false)[1][2]), 1e-3);
  expect_near(run<AdamW>(o, DType::f32), adam_reference(0.1, 0.8, 0.95, 1e-3, 0.3, true), 1e-6);
  EXPECT_EQ(AdamWOptions{}.weight_decay, 1e-2);  // torch's default
}

TEST(Optim, SgdWithMomentumAndWeightDecay) {
  SGDOptions o;
  o.lr = 0.2;
  o.momentum = 0.9;
  o.weight_decay = 0.1;
  expect_near(run<SGD>(o), sgd_reference(0.2, 0.9, 0.1), 1e-15);
  expect_near(run<SGD>(o, DType::f32), sgd_reference(0.2, 0.9, 0.1), 1e-6);
  o.momentum = 0.0;
  expect_near(run<SGD>(o), sgd_reference(0.2, 0.0, 0.1), 1e-15);
  // Plain SGD, worked by hand: p = 0.5 - 0.2 * (0.1 + 0.1 * 0.5) = 0.47.
  EXPECT_NEAR(run<SGD>(o)[0][0], 0.47, 1e-15);
}

TEST(Optim, ParametersWithoutGradientAreSkipped) {
  Tensor a = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad();
  Tensor b = Tensor::from_vector<double>({3, 4}, {2}).set_requires_grad();
  AdamOptions o;
  o.lr = 0.5;
  Adam opt({a, b}, o);
  set_grad(a, {1, -1});
  opt.step();
  EXPECT_EQ(b.to_vector<double>(), (Vec{3, 4}));
  EXPECT_EQ(opt.step_count(0), 1);
  EXPECT_EQ(opt.step_count(1), 0);
  // b's first update later uses bias correction for ITS first step (t = 1), as in torch.
  opt.zero_grad();
  set_grad(b, {2, -2});
  opt.step();
  EXPECT_EQ(opt.step_count(0), 1);
  EXPECT_EQ(opt.step_count(1), 1);
  const Vec got = b.to_vector<double>();
  EXPECT_NEAR(got[0], 3 - 0.5, 1e-7);
  EXPECT_NEAR(got[1], 4 + 0.5, 1e-7);
}

TEST(Optim, ZeroGradAndBadOptionsAndParameters) {
  Tensor p = Tensor::from_vector<double>({1}, {1}).set_requires_grad();
  SGD opt({p});
  set_grad(p, {1});
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  AdamOptions bad;
  bad.beta1 = 1.0;
  EXPECT_THROW(Adam({p}, bad), Error);
  SGDOptions negative;
  negative.lr = -1;
  EXPECT_THROW(SGD({p}, negative), Error);
  EXPECT_THROW(SGD({Tensor::from_vector<double>({1}, {1})}), Error);  // does not require grad
  EXPECT_THROW(SGD({Tensor::zeros({1}, DType::i32)}), Error);
}

TEST(Optim, LearningRateIsReadableAndSettable) {
  AdamOptions o;
  o.lr = 0.01;
  {
    Tensor q = Tensor::from_vector(kStart, {2, 2}).to(DType::f64).set_requires_grad();
    Adam opt({q}, o);
    EXPECT_EQ(opt.lr(), 0.01);
    set_grad(q, kGrads[0]);
    opt.step();
    opt.set_lr(0.002);  // the second step runs at the new rate: as a fresh Adam at 0.002 would
    EXPECT_EQ(opt.lr(), 0.002);
    set_grad(q, kGrads[1]);
    opt.step();
    const Vec got = q.to_vector<double>();
    // Reference: step 1 at 0.01, step 2 at 0.002 (the bias corrections do not depend on lr).
    const std::vector<Vec> at_first = adam_reference(0.01, o.beta1, o.beta2, o.eps, 0.0, false);
    const std::vector<Vec> at_second = adam_reference(0.002, o.beta1, o.beta2, o.eps, 0.0, false);
    for (size_t i = 0; i < got.size(); ++i) {
      // p2 = p1 - 0.002 * u2 where u2 is the same update direction in both references.
      const double u2 = (at_second[0][i] - at_second[1][i]) / 0.002;
      EXPECT_NEAR(got[i], at_first[0][i] - 0.002 * u2, 1e-12) << i;
    }
    EXPECT_THROW(opt.set_lr(-1.0), Error);
  }
}

// torch.optim.lr_scheduler's documented closed forms, against the schedules (each epoch's rate
// as the optimiser sees it).
TEST(Schedulers, MatchTorchFormulas) {
  Tensor p = Tensor::zeros({1}).set_requires_grad();
  const double base = 0.1;
  SGDOptions o;
  o.lr = base;
  {
    SGD opt({p}, o);
    StepLR schedule(opt, 3, 0.5);
    for (int epoch = 0; epoch < 10; ++epoch) {
      EXPECT_DOUBLE_EQ(opt.lr(), base * std::pow(0.5, epoch / 3)) << "StepLR epoch " << epoch;
      EXPECT_EQ(schedule.last_epoch(), epoch);
      schedule.step();
    }
  }
  {
    SGD opt({p}, o);
    const double eta_min = 0.001;
    CosineAnnealingLR schedule(opt, 7, eta_min);
    for (int epoch = 0; epoch < 20; ++epoch) {  // past T_max too (torch keeps following the cosine)
      const double want = eta_min + (base - eta_min) * (1 + std::cos(M_PI * epoch / 7)) / 2;
      EXPECT_NEAR(opt.lr(), want, 1e-15) << "CosineAnnealingLR epoch " << epoch;
      schedule.step();
    }
  }
  {
    SGD opt({p}, o);
    LinearLR warmup(opt, 0.25, 1.0, 4);
    for (int epoch = 0; epoch < 8; ++epoch) {
      const double want = base * (0.25 + 0.75 * std::min(epoch, 4) / 4.0);
      EXPECT_NEAR(opt.lr(), want, 1e-15) << "LinearLR epoch " << epoch;
      warmup.step();
    }
  }
  {  // a schedule continued from a saved optimiser state gives the uninterrupted rates
    SGD straight({p}, o), first({p}, o), resumed({p}, o);
    CosineAnnealingLR straight_schedule(straight, 9), first_schedule(first, 9);
    for (int epoch = 0; epoch < 4; ++epoch) {
      straight_schedule.step();
      first_schedule.step();
    }
    CosineAnnealingLR resumed_schedule(resumed, 9);
    resumed.load_state_dict(first.state_dict());
    resumed_schedule.resume_at(first_schedule.last_epoch());
    for (int epoch = 4; epoch < 12; ++epoch) {
      straight_schedule.step();
      resumed_schedule.step();
      EXPECT_EQ(resumed.lr(), straight.lr()) << "epoch " << epoch + 1;
    }
  }
  SGD opt({p}, o);
  gat::testing::expect_error([&] { StepLR(opt, 0); }, {"StepLR", "step_size"});
  gat::testing::expect_error([&] { CosineAnnealingLR(opt, 0); }, {"CosineAnnealingLR", "T_max"});
  gat::testing::expect_error([&] { LinearLR(opt, 0.0); }, {"LinearLR", "start_factor"});
}

TEST(ClipGradNorm, ScalesAllGradientsTogetherAsTorch) {
  for (DType dtype : {DType::f64, DType::f32}) {
    Tensor a = Tensor::zeros({2, 2}, dtype).set_requires_grad(),
           b = Tensor::zeros({3}, dtype).set_requires_grad();
    Tensor c = Tensor::zeros({1}, dtype).set_requires_grad();  // no gradient: skipped
    set_grad(a, {3, 0, 0, 4});
    set_grad(b, {0, 12, 0});
    const double total = clip_grad_norm({a, b, c}, 6.5);  // sqrt(9 + 16 + 144) = 13
    EXPECT_NEAR(total, 13.0, 1e-6);
    const double k = 6.5 / (13.0 + 1e-6);  // torch: max_norm / (total + 1e-6)
    const double tol = dtype == DType::f64 ? 1e-15 : 1e-6;
    const Vec ga = a.grad().to(DType::f64).to_vector<double>(),
              gb = b.grad().to(DType::f64).to_vector<double>();
    EXPECT_NEAR(ga[0], 3 * k, tol);
    EXPECT_NEAR(ga[3], 4 * k, tol);
    EXPECT_NEAR(gb[1], 12 * k, tol);
    EXPECT_FALSE(c.grad().defined());
    // Below the limit nothing changes.
    EXPECT_NEAR(clip_grad_norm({a, b}, 100.0), 6.5, 1e-5);
    EXPECT_NEAR(a.grad().to(DType::f64).to_vector<double>()[0], 3 * k, tol);
  }
  EXPECT_THROW(clip_grad_norm({}, -1.0), Error);
}

// Training 2 steps, saving model and optimiser, and continuing from the file for 2 more steps
// gives the bits of 4 uninterrupted steps (Adam's moments and step counts travel with it).
TEST(OptimizerState, CheckpointResumesBitForBit) {
  const std::string path = ::testing::TempDir() + "gat_optim_state.safetensors";
  auto train = [](Linear& model, Optimizer& opt, int from, int to) {
    for (int step = from; step < to; ++step) {
      Vec g(model.weight.numel());
      for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(1.0 + step * 7 + i);
      set_grad(model.weight, g);
      set_grad(model.bias, {0.5 * step, -0.25});
      opt.step();
      opt.zero_grad();
    }
  };
  Generator init(3);
  AdamOptions o;
  o.lr = 0.05;
  o.weight_decay = 0.01;
  Linear straight(3, 2, true, init, DType::f32);
  Adam straight_opt(straight.parameters(), o);
  train(straight, straight_opt, 0, 4);

  Generator init2(3);
  Linear first(3, 2, true, init2, DType::f32);
  Adam first_opt(first.parameters(), o);
  train(first, first_opt, 0, 2);
  io::save(first, first_opt, path);
  const io::Safetensors file = io::load_safetensors(path);
  EXPECT_EQ(file.tensors.count("optimizer.exp_avg.0"), 1u);
  EXPECT_EQ(file.tensors.count("optimizer.exp_avg_sq.1"), 1u);
  EXPECT_EQ(file.tensors.at("optimizer.step").to_vector<int32_t>(), (std::vector<int32_t>{2, 2}));

  Generator other(99);  // different initial weights: all of them come from the file
  Linear resumed(3, 2, true, other, DType::f32);
  AdamOptions other_rate = o;  // the hyper-parameters are the program's; the rate comes from the file
  other_rate.lr = 1.0;
  Adam resumed_opt(resumed.parameters(), other_rate);
  io::load_into(resumed, resumed_opt, path);
  EXPECT_EQ(resumed_opt.lr(), 0.05);
  EXPECT_EQ(resumed_opt.step_count(0), 2);
  train(resumed, resumed_opt, 2, 4);
  EXPECT_EQ(resumed.weight.to_vector<float>(), straight.weight.to_vector<float>());
  EXPECT_EQ(resumed.bias.to_vector<float>(), straight.bias.to_vector<float>());

  // A plain load (evaluation) skips the optimiser's entries; a resume needs them.
  Linear plain(3, 2, true, other, DType::f32);
  EXPECT_NO_THROW(io::load_into(plain, path));
  const std::string bare = ::testing::TempDir() + "gat_optim_bare.safetensors";
  io::save(plain, bare);
  gat::testing::expect_error([&] { io::load_into(resumed, resumed_opt, bare); }, {"no optimiser state"});
  // State of another optimiser kind is refused, and nothing changes.
  SGDOptions so;
  so.momentum = 0.9;
  SGD sgd(resumed.parameters(), so);
  gat::testing::expect_error([&] { io::load_into(resumed, sgd, path); }, {"not state of this optimiser"});
  std::remove(path.c_str());
  std::remove(bare.c_str());
}

// The same in memory: Module::state_dict and Optimizer::state_dict kept after 2 steps of a
// model trained in two groups by RMSprop and loaded back (into the same model, as one keeps the
// best epoch) give the bits of the uninterrupted steps 3 and 4; the kept state is a copy that
// later steps do not change. The file functions read and write the same state.
TEST(OptimizerState, InMemoryStateResumesBitForBit) {
  auto train = [](Linear& model, Optimizer& opt, int from, int to) {
    for (int step = from; step < to; ++step) {
      Vec g(model.weight.numel());
      for (size_t i = 0; i < g.size(); ++i) g[i] = std::cos(2.0 + step * 5 + i);
      set_grad(model.weight, g);
      set_grad(model.bias, {0.5 * step, -0.25 + step});
      opt.step();
      opt.zero_grad();
    }
  };
  RMSpropOptions o;
  o.momentum = 0.5;
  o.centered = true;
  auto make_opt = [&](Linear& model) {
    return std::make_unique<RMSprop>(
        std::vector<ParamGroup>{ParamGroup({model.weight}, 0.02, 0.1), ParamGroup({model.bias}, 0.05, 0.0)},
        o);
  };
  Generator init(3);
  Linear model(3, 2, true, init, DType::f32);
  auto opt = make_opt(model);
  train(model, *opt, 0, 2);
  const std::map<std::string, Tensor> kept_model = model.state_dict();
  const std::map<std::string, Tensor> kept_opt = opt->state_dict();
  const std::vector<float> weight_at_2 = model.weight.to_vector<float>();
  const std::string path = ::testing::TempDir() + "gat_in_memory_state.safetensors";
  io::save(model, *opt, path);
  train(model, *opt, 2, 4);
  const std::vector<float> straight_weight = model.weight.to_vector<float>();
  const std::vector<float> straight_bias = model.bias.to_vector<float>();
  EXPECT_EQ(kept_model.at("weight").to_vector<float>(), weight_at_2);  // a copy: unchanged
  EXPECT_NE(straight_weight, weight_at_2);

  model.load_state_dict(kept_model);
  opt->load_state_dict(kept_opt);
  EXPECT_EQ(opt->step_count(1), 2);
  train(model, *opt, 2, 4);
  EXPECT_EQ(model.weight.to_vector<float>(), straight_weight);
  EXPECT_EQ(model.bias.to_vector<float>(), straight_bias);

  Generator other(8);  // from the file, into a fresh model and optimiser
  Linear resumed(3, 2, true, other, DType::f32);
  auto resumed_opt = make_opt(resumed);
  io::load_into(resumed, *resumed_opt, path);
  train(resumed, *resumed_opt, 2, 4);
  EXPECT_EQ(resumed.weight.to_vector<float>(), straight_weight);
  EXPECT_EQ(resumed.bias.to_vector<float>(), straight_bias);
  std::remove(path.c_str());

  // Misuse in memory: named as such, and nothing changes.
  std::map<std::string, Tensor> wrong = kept_model;
  wrong.erase("bias");
  gat::testing::expect_error([&] { model.load_state_dict(wrong); },
                             {"Module::load_state_dict", "missing tensor 'bias'"});
  wrong = kept_model;
  wrong["weight"] = Tensor::zeros({2, 3});
  gat::testing::expect_error([&] { model.load_state_dict(wrong); },
                             {"'weight' has shape (2, 3) in the state vs (3, 2) in the module"});
  wrong = kept_model;
  wrong["bias"] = Tensor::full({2}, std::nan(""));
  gat::testing::expect_error([&] { model.load_state_dict(wrong); }, {"'bias' holds a NaN"});
  wrong = kept_model;
  wrong["extra"] = Tensor::zeros({1});
  gat::testing::expect_error([&] { model.load_state_dict(wrong); }, {"unexpected tensor 'extra'"});
  EXPECT_EQ(model.weight.to_vector<float>(), straight_weight);
}

// ---- CUDA against the CPU (relative error <= 1e-5: summation orders differ) ---------------

using CudaOptim = CudaVsCpuTest;

TEST_F(CudaOptim, OptimiserStepsMatchCpu) {
  std::mt19937_64 rng(6);
  // 40 parameters (more than one launch's kMaxSlots), f32 and f64 mixed, one without a gradient.
  std::vector<Tensor> start, grads;
  for (int i = 0; i < 40; ++i) {
    const Shape shape{1 + i % 5, 3 + 7 * i};
    const DType dtype = i % 9 == 4 ? DType::f64 : DType::f32;
    start.push_back(random_tensor(shape, rng, -1, 1, dtype));
    grads.push_back(random_tensor(shape, rng, -1, 1, dtype));
  }
  auto run = [&](Device device, const std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>& make) {
    std::vector<Tensor> params;
    for (const Tensor& s : start) params.push_back(s.to(device).clone().set_requires_grad());
    std::unique_ptr<Optimizer> opt = make(params);
    for (int step = 0; step < 2; ++step) {
      for (size_t i = 0; i < params.size(); ++i)
        if (i != 17) params[i].impl().grad = grads[i].to(device).clone().impl_ptr();
      opt->step();
      opt->zero_grad();
    }
    return params;
  };
  AdamOptions adam;
  adam.lr = 0.05;
  adam.weight_decay = 0.1;
  AdamWOptions adamw;
  adamw.lr = 0.05;
  SGDOptions sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.01;
  RMSpropOptions rmsprop;
  rmsprop.weight_decay = 0.01;
  RMSpropOptions rmsprop_centered = rmsprop;
  rmsprop_centered.centered = true;
  rmsprop_centered.momentum = 0.9;
  const std::vector<std::pair<std::string, std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>>>
      kinds{{"Adam", [&](std::vector<Tensor> p) { return std::make_unique<Adam>(p, adam); }},
            {"AdamW", [&](std::vector<Tensor> p) { return std::make_unique<AdamW>(p, adamw); }},
            {"SGD", [&](std::vector<Tensor> p) { return std::make_unique<SGD>(p, sgd); }},
            {"RMSprop", [&](std::vector<Tensor> p) { return std::make_unique<RMSprop>(p, rmsprop); }},
            {"RMSprop centered with momentum",
             [&](std::vector<Tensor> p) { return std::make_unique<RMSprop>(p, rmsprop_centered); }},
            {"Adam in two groups", [&](std::vector<Tensor> p) {
               // the first 25 parameters (one launch) and the other 15, at other rates
               std::vector<Tensor> first(p.begin(), p.begin() + 25), second(p.begin() + 25, p.end());
               return std::make_unique<Adam>(
                   std::vector<ParamGroup>{ParamGroup(first), ParamGroup(second, 0.01, 0.0)}, adam);
             }}};
  for (const auto& [name, make] : kinds) {
    std::vector<Tensor> want = run(Device::cpu, make), got = run(Device::cuda, make);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].device(), Device::cuda);
      expect_close(got[i], want[i], name + " parameter " + std::to_string(i), 1e-5);
    }
    expect_close(got[17], start[17], name + " parameter without gradient", 0.0);
  }
}

TEST_F(CudaOptim, ClipGradNormMatchesCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    std::mt19937_64 rng(12);
    std::vector<Tensor> grads;
    for (const Shape& shape : {Shape{300, 70}, Shape{64}, Shape{100003}})
      grads.push_back(random_tensor(shape, rng, -1, 1, dtype));
    auto clipped = [&](Device device, double& total) {
      std::vector<Tensor> params;
      for (const Tensor& g : grads) {
        params.push_back(Tensor::zeros(g.shape(), dtype, device).set_requires_grad());
        params.back().impl().grad = g.to(device).clone().impl_ptr();
      }
      total = clip_grad_norm(params, 1.5);
      return params;
    };
    double cpu_total = 0, cuda_total = 0;
    std::vector<Tensor> want = clipped(Device::cpu, cpu_total), got = clipped(Device::cuda, cuda_total);
    EXPECT_NEAR(cuda_total, cpu_total, (dtype == DType::f32 ? 1e-5 : 1e-12) * cpu_total);
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(got[i].grad(), want[i].grad(), std::string("clipped gradient ") + dtype_name(dtype), 1e-5);
  }
}

// A state no run reaches is refused whole: a rate that is NaN or negative, and a negative second
// moment (its square root, then the parameter, would be NaN from the next step on).
TEST(Optim, LoadStateDictRefusesAStateNoRunReaches) {
  std::mt19937_64 rng(14);
  Tensor p = random_tensor({5, 3}, rng, -1, 1, DType::f32).set_requires_grad();
  Adam trained({p}, AdamOptions{});
  p.impl().grad = random_tensor({5, 3}, rng, -1, 1, DType::f32).impl_ptr();
  trained.step();
  const std::map<std::string, Tensor> good = trained.state_dict();
  auto with = [&](const std::string& name, const Tensor& value) {
    std::map<std::string, Tensor> state = good;
    state[name] = value;
    return state;
  };
  Tensor negative = good.at("exp_avg_sq.0").clone();
  negative.data<float>()[4] = -0.5f;
  Adam fresh({p}, AdamOptions{});
  expect_error([&] { fresh.load_state_dict(with("lr", Tensor::scalar(NAN, DType::f64))); },
               {"lr nan is not a finite number >= 0"});
  expect_error([&] { fresh.load_state_dict(with("lr", Tensor::scalar(-1.0, DType::f64))); },
               {"lr -1 is not a finite number >= 0"});
  expect_error([&] { fresh.load_state_dict(with("exp_avg_sq.0", negative)); },
               {"'exp_avg_sq.0' holds -0.5 (at flat index 4), but it is a mean of squares (>= 0)"});
  EXPECT_EQ(fresh.step_count(0), 0);  // nothing changed
  fresh.load_state_dict(good);
  EXPECT_EQ(fresh.step_count(0), 1);
}

TEST_F(CudaOptim, OptimiserStateLoadsOntoTheDevice) {
  std::mt19937_64 rng(13);
  Tensor start = random_tensor({40, 3}, rng, -1, 1, DType::f32),
         grad = random_tensor({40, 3}, rng, -1, 1, DType::f32);
  auto steps = [&](Tensor& p, Optimizer& opt, int n) {
    for (int k = 0; k < n; ++k) {
      p.impl().grad = grad.to(p.device()).clone().impl_ptr();
      opt.step();
      opt.zero_grad();
    }
  };
  Tensor straight = start.to(Device::cuda).clone().set_requires_grad();
  Adam straight_opt({straight}, AdamOptions{});
  steps(straight, straight_opt, 4);
  Tensor first = start.to(Device::cuda).clone().set_requires_grad();
  Adam first_opt({first}, AdamOptions{});
  steps(first, first_opt, 2);
  const std::map<std::string, Tensor> state = first_opt.state_dict();
  Tensor resumed = first.clone().set_requires_grad();
  Adam resumed_opt({resumed}, AdamOptions{});
  std::map<std::string, Tensor> host_state;
  for (const auto& [name, t] : state) host_state.emplace(name, t.to(Device::cpu));  // as from a file
  resumed_opt.load_state_dict(host_state);
  steps(resumed, resumed_opt, 2);
  expect_close(resumed, straight, "resumed Adam on the device", 0.0);
}
