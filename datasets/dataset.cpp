#include "gat/datasets/dataset.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gat/framework/ops/attention/self_loop_attr.h"

namespace gat {

void check_splits(const Dataset& data, const std::array<std::string, 3>& sources) {
  const Tensor* splits[3] = {&data.train_index, &data.val_index, &data.test_index};
  const char* names[3] = {"training", "validation", "test"};
  const int64_t n = data.num_nodes();
  std::vector<int8_t> owner(static_cast<size_t>(n), -1);  // (N,) the split holding each node, or -1
  for (int8_t s = 0; s < 3; ++s) {
    const std::vector<int32_t> ids = splits[s]->to_vector<int32_t>();
    GAT_CHECK(!ids.empty(), sources[s], ": the ", names[s], " split is empty");
    for (const int32_t id : ids) {
      GAT_CHECK(id >= 0 && id < n, sources[s], ": ", names[s], " node ", id, " is outside [0, ", n, ")");
      const int8_t other = owner[static_cast<size_t>(id)];
      GAT_CHECK(other < 0 || other == s, sources[s], ": ", names[s], " node ", id, " is also a ",
                names[other], " node (", sources[other], "); the splits must not overlap");
      owner[static_cast<size_t>(id)] = s;
    }
  }
}

void check_self_loop_features(const Dataset& data, const ops::SelfLoopFill& fill) {
  if (!data.edge_attr.defined()) return;
  // The graph has its loops already: self_loop_attr makes them again from the other edges, as the
  // layers do.
  const std::vector<float> looped =
      ops::self_loop_attr(data.graph, data.graph, data.edge_attr, fill).to_vector<float>();  // (E, D)
  const auto bad = std::find_if(looped.begin(), looped.end(), [](float v) { return !std::isfinite(v); });
  if (bad == looped.end()) return;
  const int64_t D = data.edge_attr.size(1), e = (bad - looped.begin()) / D;
  const int32_t node = data.graph.destinations()[static_cast<size_t>(e)];
  GAT_FAIL(data.name, ": the self loop of node ", node, " gets edge feature ", (bad - looped.begin()) % D + 1,
           " = ", *bad, " from its in-edges' features by the fill '", fill.name(),
           "': beyond the largest float (3.4e38); ",
           "scale the edge features or choose another fill (--fill-value)");
}

}  // namespace gat
