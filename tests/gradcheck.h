// Gradient checking by central finite differences in double precision.
//
//   expect_gradients_match("relu", [](const std::vector<Tensor>& in) { return ops::relu(in[0]); },
//                          {random_tensor({3, 4}, rng)});
//
// `f` maps the inputs to one output tensor of any shape. The scalar checked is
// L = sum(out * R) for a fixed random R, so every output element matters. Each input is f64
// (CPU or CUDA); every element of every input is perturbed by ±eps and the slope compared with
// the analytic gradient from backward(). The worst element is reported with its input, index,
// analytic and numeric values.
//
// GAT_GRADCHECK_SAMPLE=k checks k elements of each input, evenly spread from its first to its last,
// instead of all of them. bench/gpu_check.sh sets it for compute-sanitizer runs: the sanitizer asks
// whether the kernels touch memory correctly, which the forward and backward at full shape answer,
// and each further element only repeats the forward's launches (hundreds of thousands in a test,
// hours under memcheck or racecheck). ctest leaves it unset: the numeric check stays complete.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/tensor.h"

namespace gat::testing {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Uniform in [lo, hi), f64 unless told otherwise.
inline Tensor random_tensor(const Shape& shape, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0,
                            DType dtype = DType::f64, Device device = Device::cpu) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape).to(dtype).to(device);
}

// The indices of an input's n elements to perturb: all of them, or `sample` evenly spread ones
// (the first and the last among them) when 0 < sample < n.
inline std::vector<size_t> elements_to_check(size_t n, int64_t sample) {
  std::vector<size_t> picked;
  if (sample <= 0 || static_cast<size_t>(sample) >= n) {
    picked.resize(n);
    std::iota(picked.begin(), picked.end(), size_t{0});
  } else {
    for (int64_t j = 0; j < sample; ++j)
      picked.push_back(sample == 1 ? 0 : static_cast<size_t>(j) * (n - 1) / static_cast<size_t>(sample - 1));
  }
  return picked;
}

// GAT_GRADCHECK_SAMPLE as a count of elements per input; 0 (every element) when unset. Anything
// but a positive integer fails the calling test.
inline int64_t gradcheck_sample_from_env() {
  const char* text = std::getenv("GAT_GRADCHECK_SAMPLE");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long long sample = std::strtoll(text, &end, 10);
  if (*end != '\0' || sample <= 0) {
    ADD_FAILURE() << "GAT_GRADCHECK_SAMPLE=" << text << ": expected a positive count of elements per input";
    return 0;
  }
  return sample;
}

struct GradcheckReport {
  double worst_error = 0.0;  // max(0, |analytic - numeric| - noise) / max(|analytic|, |numeric|, floor)
  std::string worst_where = "(no element)";
  int64_t elements = 0;           // elements checked
  int64_t kinks = 0;              // elements within eps of a kink (one-sided slopes disagree)
  double worst_kink_error = 0.0;  // analytic vs the nearer one-sided slope, at kinks
};

// How the numeric slope is judged, element by element:
//  - central difference (L(x+eps) - L(x-eps)) / 2eps, whose rounding noise is bounded by
//    `noise` = 16 * DBL_EPSILON * sum_k |out_k * R_k| / eps (the loss's own rounding, amplified by
//    the division); the part of the error above that bound counts;
//  - where the two one-sided slopes (L(x+eps) - L(x)) / eps and (L(x) - L(x-eps)) / eps disagree by
//    more than smoothness allows, x lies within eps of a kink (LeakyReLU/ReLU at 0, ELU's second
//    derivative): the central difference is meaningless there, the analytic slope must match one
//    of the one-sided ones (autograd picks a side) to 1e-3, and the element is counted as a kink.
inline GradcheckReport gradcheck(const TensorFn& f, std::vector<Tensor> inputs, double eps = 1e-6,
                                 double floor = 1e-3) {
  for (Tensor& t : inputs) {
    EXPECT_EQ(t.dtype(), DType::f64) << "gradcheck needs f64 inputs";
    t = t.detach();
    t.set_requires_grad(true);
  }
  Tensor out = f(inputs);
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> weights(static_cast<size_t>(out.numel()));
  for (double& w : weights) w = dist(rng);
  double magnitude = 0.0;  // sum_k |out_k * R_k|: the scale of the loss's rounding error
  auto loss_of = [&](const Tensor& o, bool record_magnitude) {
    std::vector<double> v = o.to(DType::f64).to_vector<double>();
    double s = 0.0;
    for (size_t i = 0; i < v.size(); ++i) {
      s += v[i] * weights[i];
      if (record_magnitude) magnitude += std::abs(v[i] * weights[i]);
    }
    return s;
  };
  if (!out.requires_grad()) {
    ADD_FAILURE() << "gradcheck: the output does not require grad";
    return {};
  }
  const double loss0 = loss_of(out.detach(), true);
  const double noise = 16 * 2.220446049250313e-16 * std::max(magnitude, 1.0) / eps;
  out.backward(Tensor::from_vector(weights, out.shape()).to(out.dtype()).to(out.device()));

  GradcheckReport report;
  const int64_t sample = gradcheck_sample_from_env();
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor analytic_t = inputs[i].grad();
    std::vector<double> analytic = analytic_t.defined()
                                       ? analytic_t.to_vector<double>()
                                       : std::vector<double>(static_cast<size_t>(inputs[i].numel()), 0.0);
    std::vector<double> x = inputs[i].to_vector<double>();
    for (size_t k : elements_to_check(x.size(), sample)) {
      auto eval_at = [&](double value) {
        std::vector<double> xp = x;
        xp[k] = value;
        std::vector<Tensor> moved = inputs;
        moved[i] = Tensor::from_vector(xp, inputs[i].shape()).to(inputs[i].device());
        return loss_of(f(moved), false);
      };
      const double plus = eval_at(x[k] + eps), minus = eval_at(x[k] - eps);
      const double numeric = (plus - minus) / (2 * eps);
      const double a = analytic[k];
      auto rel = [&](double n) {
        return std::max(0.0, std::abs(a - n) - noise) / std::max({std::abs(a), std::abs(n), floor});
      };
      double err = rel(numeric);
      ++report.elements;
      const double right = (plus - loss0) / eps, left = (loss0 - minus) / eps;
      const bool kink = std::abs(right - left) > 1e-3 * std::max({std::abs(right), std::abs(left), floor});
      if (kink) {
        ++report.kinks;
        report.worst_kink_error = std::max(report.worst_kink_error, std::min(rel(right), rel(left)));
        continue;
      }
      if (!(err <= report.worst_error)) {  // also catches NaN
        report.worst_error = std::isnan(err) ? INFINITY : err;
        std::ostringstream os;
        os << "input " << i << " " << inputs[i].describe() << " element " << k << ": analytic " << a
           << ", numeric " << numeric << " (rounding bound " << noise << ")";
        report.worst_where = os.str();
      }
    }
  }
  return report;
}

// Fails the test when the worst relative error exceeds `tolerance`.
inline void expect_gradients_match(const std::string& what, const TensorFn& f, std::vector<Tensor> inputs,
                                   double tolerance = 1e-6, double eps = 1e-6) {
  GradcheckReport r = gradcheck(f, std::move(inputs), eps);
  EXPECT_LE(r.worst_error, tolerance)
      << what << ": worst gradient error " << r.worst_error << " at " << r.worst_where;
  // A few elements may sit within eps of a kink; there the analytic slope must still be one of
  // the one-sided slopes, and kinks must stay rare (else the check would prove little).
  EXPECT_LE(r.worst_kink_error, 1e-3) << what << ": at a kink the analytic gradient matches neither side";
  EXPECT_LE(r.kinks, std::max<int64_t>(2, r.elements / 50))
      << what << ": " << r.kinks << " of " << r.elements << " elements lie at kinks";
}

}  // namespace gat::testing
