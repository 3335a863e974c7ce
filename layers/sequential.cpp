#include "gat/layers/sequential.h"

namespace gat {

Sequential& Sequential::add(Function function) {
  GAT_CHECK(static_cast<bool>(function), "Sequential::add: empty function");
  steps_.push_back({std::to_string(steps_.size()),
                    [function = std::move(function)](const Tensor& x, Generator*) { return function(x); }});
  return *this;
}

Tensor Sequential::forward(const Tensor& x) const { return run(x, nullptr); }

Tensor Sequential::forward(const Tensor& x, Generator& gen) const { return run(x, &gen); }

Tensor Sequential::run(const Tensor& x, Generator* gen) const {
  Tensor h = x;
  for (const Step& step : steps_) h = step.run(h, gen);
  return h;
}

}  // namespace gat
