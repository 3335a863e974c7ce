// Adam, AdamW and SGD against PyTorch's update formulas written out here in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gat/framework/optim.h"

using namespace gat;

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
      if (decoupled) p[i] *= 1 - lr * wd;
      else g += wd * p[i];
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

}  // namespace

TEST(Optim, AdamMatchesTorchFormula) {
  AdamOptions o;
  o.lr = 0.1;
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  o.eps = 1e-3;
  o.weight_decay = 0.3;
  expect_near(run<Adam>(o), adam_reference(0.1, 0.8, 0.95, 1e-3, 0.3, false), 1e-15);
  expect_near(run<Adam>(o, DType::f32), adam_reference(0.1, 0.8, 0.95, 1e-3, 0.3, false), 1e-6);
  // The defaults: the first step moves every element by about lr against its gradient's sign.
  std::vector<Vec> d = run<Adam>(AdamOptions{});
  expect_near(d, adam_reference(1e-3, 0.9, 0.999, 1e-8, 0.0, false), 1e-15);
  EXPECT_NEAR(d[0][0], 0.5 - 1e-3, 1e-9);
  EXPECT_NEAR(d[0][1], -1.0 + 1e-3, 1e-9);
}

TEST(Optim, AdamWDecouplesWeightDecay) {
  AdamWOptions o;
  o.lr = 0.1;
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  o.eps = 1e-3;
  o.weight_decay = 0.3;
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
