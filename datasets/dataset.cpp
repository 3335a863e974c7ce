#include "gat/datasets/dataset.h"

#include <vector>

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

}  // namespace gat
