// Dropout as a module: active only in training mode (Module::train), its masks drawn from
// the Generator passed to forward (a fresh Philox stream per call, so a seed fixes every mask).
#pragma once

#include "gat/framework/check.h"
#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"
#include "gat/framework/tensor.h"

namespace gat {

// The dropout rates every layer (and GATConfig, and gat_train's flags) takes: at most 0.999, so
// that the kept values' scale 1 / (1 - p) is at most 1000. (A rate nearer 1 gives no useful
// training, and one within 2^-25 of 1 rounds to the f32 p = 1 that the ops refuse.)
constexpr Range<double> kDropoutRateRange{0.0, 0.999};

// x through dropout with `key` (ops::dropout, or ops::sparse_dropout for sparse x); x itself for
// an inactive key.
Features dropout_features(const Features& x, const DropoutKey& key);

class Dropout : public Module {
 public:
  explicit Dropout(double p);

  // x: any shape -> the same shape. Identity (x itself, no stream drawn) in eval mode or for p = 0.
  Tensor forward(const Tensor& x, Generator& gen) const;
  // The same without a generator: in training mode with p > 0 a gat::Error says to pass one.
  Tensor forward(const Tensor& x) const;
  // Sparse x: ops::sparse_dropout, the same mask as for x.to_dense() (same pattern, zeros dropped).
  CsrMatrix forward(const CsrMatrix& x, Generator& gen) const;
  Features forward(const Features& x, Generator& gen) const;
  // The key forward draws: gen's next stream in training mode with p > 0, else an inactive key
  // (no stream drawn). For ops that fuse the dropout (ops::elu_dropout).
  DropoutKey key(Generator& gen) const;

  double p() const { return p_; }

 private:
  double p_;
};

}  // namespace gat
