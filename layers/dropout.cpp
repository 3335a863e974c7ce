#include "gat/layers/dropout.h"

#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/sparse_dropout.h"

namespace gat {

Dropout::Dropout(double p) : p_(p) { check_in_range("Dropout: rate", p, kDropoutRateRange); }

DropoutKey Dropout::key(Generator& gen) const {
  if (!is_training() || p_ == 0.0) return DropoutKey{};
  return gen.dropout_key(static_cast<float>(p_));
}

Tensor Dropout::forward(const Tensor& x, Generator& gen) const {
  const DropoutKey mask_key = key(gen);
  return mask_key.active() ? ops::dropout(x, mask_key) : x;
}

Tensor Dropout::forward(const Tensor& x) const {
  Generator none = Generator::refusing("Dropout");
  return forward(x, none);
}

CsrMatrix Dropout::forward(const CsrMatrix& x, Generator& gen) const {
  const DropoutKey mask_key = key(gen);
  return mask_key.active() ? ops::sparse_dropout(x, mask_key) : x;
}

Features Dropout::forward(const Features& x, Generator& gen) const { return dropout_features(x, key(gen)); }

Features dropout_features(const Features& x, const DropoutKey& key) {
  if (!key.active()) return x;
  if (x.is_sparse()) return ops::sparse_dropout(x.sparse(), key);
  return ops::dropout(x.dense(), key);
}

}  // namespace gat
