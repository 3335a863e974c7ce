#include "gat/layers/sequential.h"

namespace gat {

Sequential& Sequential::add(Function function) {
  GAT_CHECK(static_cast<bool>(function), "Sequential::add: empty function");
  steps_.push_back(
      [function = std::move(function)](const Tensor& x, const Graph*, Generator*) { return function(x); });
  return *this;
}

Tensor Sequential::run(const Tensor& x, const Graph* graph, Generator* gen) const {
  Tensor h = x;
  for (const Step& step : steps_) h = step(h, graph, gen);
  return h;
}

}  // namespace gat
