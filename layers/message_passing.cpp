#include "gat/layers/message_passing.h"

#include "gat/framework/sparse.h"
#include "gat/layers/graph_attention.h"

namespace gat {

bool same_graph(const Graph& a, const Graph& b) {
  return a.row_ptr().defined() && a.row_ptr().same(b.row_ptr()) && a.edge_src().same(b.edge_src()) &&
         a.num_src_nodes() == b.num_src_nodes();
}

const EdgePlans& EdgePlanCache::of(const Graph& graph) {
  if (!same_graph(plans_.graph, graph))
    plans_ = {graph, ops::RowIndex(graph.edge_src(), graph.device()),
              ops::Segments(graph.row_ptr(), graph.device())};
  return plans_;
}

void check_message_inputs(const char* layer, const Tensor& x_src, const Tensor* x_dst, const Graph& graph,
                          int64_t in_channels, int64_t dst_in_channels) {
  for (const Tensor* x : {&x_src, x_dst})
    GAT_CHECK(!x || !x->defined() || x->device() == graph.device(), layer, ": the features ", x->describe(),
              " are on ", device_name(x->device()), " but the graph on ", device_name(graph.device()));
  if (!x_dst) return check_attention_inputs(layer, x_src, nullptr, graph, in_channels, dst_in_channels);
  const Features dst = *x_dst;
  check_attention_inputs(layer, x_src, &dst, graph, in_channels, dst_in_channels);
}

Tensor sum_neighbours(const Tensor& x_src, const EdgePlans& plans) {
  return ops::segment_sum(ops::index_rows(x_src, plans.sources), plans.in_edges);  // (E, F) -> (Nd, F)
}

Tensor mean_neighbours(const Tensor& x_src, const EdgePlans& plans) {
  return ops::segment_mean(ops::index_rows(x_src, plans.sources), plans.in_edges);  // (E, F) -> (Nd, F)
}

}  // namespace gat
