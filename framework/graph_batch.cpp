#include "gat/framework/graph_batch.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "gat/framework/check.h"
#include "gat/framework/ops/concat.h"

namespace gat {

namespace {

constexpr int64_t kMaxIds = std::numeric_limits<int32_t>::max();

// Graph k's shape against graph 0's: one node set on the host, rows of x and y, equal widths.
void check_member(const GraphData& g, const GraphData& first, size_t k) {
  GAT_CHECK(g.graph.device() == Device::cpu && g.x.defined() && g.x.device() == Device::cpu &&
                g.y.defined() && g.y.device() == Device::cpu,
            "batch_graphs: graph ", k, " is not on the host with x and y (batch on the host, then copy)");
  GAT_CHECK(!g.graph.is_bipartite(), "batch_graphs: graph ", k, " is bipartite (", g.graph.num_src_nodes(),
            " sources, ", g.graph.num_dst_nodes(), " destinations)");
  const int64_t n = g.graph.num_dst_nodes();
  GAT_CHECK(n > 0, "batch_graphs: graph ", k, " has no nodes");
  GAT_CHECK(g.x.dim() == 2 && g.x.size(0) == n, "batch_graphs: graph ", k, ": x ", shape_str(g.x.shape()),
            " is not (", n, ", F) for its ", n, " nodes");
  GAT_CHECK(g.y.dim() >= 1 && g.y.size(0) == n, "batch_graphs: graph ", k, ": y ", shape_str(g.y.shape()),
            " does not have a row for each of its ", n, " nodes");
  GAT_CHECK(g.x.size(1) == first.x.size(1) && g.x.dtype() == first.x.dtype(), "batch_graphs: graph ", k,
            ": x is ", shape_str(g.x.shape()), " ", dtype_name(g.x.dtype()), ", graph 0's ",
            shape_str(first.x.shape()), " ", dtype_name(first.x.dtype()), " (one width and dtype)");
  Shape row = g.y.shape(), first_row = first.y.shape();
  row.erase(row.begin());
  first_row.erase(first_row.begin());
  GAT_CHECK(row == first_row && g.y.dtype() == first.y.dtype(), "batch_graphs: graph ", k, ": y is ",
            shape_str(g.y.shape()), " ", dtype_name(g.y.dtype()), ", graph 0's ", shape_str(first.y.shape()),
            " ", dtype_name(first.y.dtype()), " (one row shape and dtype)");
  GAT_CHECK(g.edge_attr.defined() == first.edge_attr.defined(), "batch_graphs: graph ", k,
            (g.edge_attr.defined() ? " has" : " has no"), " edge features, graph 0",
            (first.edge_attr.defined() ? " has" : " has none"));
  if (g.edge_attr.defined())
    GAT_CHECK(g.edge_attr.device() == Device::cpu && g.edge_attr.dim() == 2 &&
                  g.edge_attr.size(0) == g.graph.num_edges() &&
                  g.edge_attr.size(1) == first.edge_attr.size(1) &&
                  g.edge_attr.dtype() == first.edge_attr.dtype(),
              "batch_graphs: graph ", k, ": edge_attr ", shape_str(g.edge_attr.shape()), " on ",
              device_name(g.edge_attr.device()), " is not (", g.graph.num_edges(), ", ",
              first.edge_attr.size(1), ") on the host (its edges, graph 0's width)");
}

}  // namespace

GraphData GraphData::to(Device device) const {
  return {graph.to(device), x.to(device), y.to(device),
          edge_attr.defined() ? edge_attr.to(device) : Tensor()};
}

GraphBatch GraphBatch::to(Device device) const {
  return {data.to(device), batch.to(device), node_ptr, edge_ptr};
}

GraphBatch batch_graphs(const std::vector<const GraphData*>& graphs) {
  GAT_CHECK(!graphs.empty(), "batch_graphs: no graphs");
  for (size_t k = 0; k < graphs.size(); ++k)
    GAT_CHECK(graphs[k], "batch_graphs: graph ", k, " is a null pointer");
  const GraphData& first = *graphs.front();
  GraphBatch out;
  out.node_ptr = {0};
  out.edge_ptr = {0};
  for (size_t k = 0; k < graphs.size(); ++k) {
    check_member(*graphs[k], first, k);
    out.node_ptr.push_back(out.node_ptr.back() + graphs[k]->graph.num_dst_nodes());
    out.edge_ptr.push_back(out.edge_ptr.back() + graphs[k]->graph.num_edges());
    GAT_CHECK(out.node_ptr.back() <= kMaxIds && out.edge_ptr.back() <= kMaxIds, "batch_graphs: graphs 0 to ",
              k, " have ", out.node_ptr.back(), " nodes and ", out.edge_ptr.back(),
              " edges together, more than ", kMaxIds, " (32-bit ids)");
  }
  const int64_t n = out.node_ptr.back(), e = out.edge_ptr.back();
  std::vector<int32_t> row_ptr(static_cast<size_t>(n) + 1, 0), col(static_cast<size_t>(e)),
      batch(static_cast<size_t>(n));  // (N+1,), (E,), (N,)
  std::vector<Tensor> xs, ys, attrs;
  for (size_t k = 0; k < graphs.size(); ++k) {
    const GraphData& g = *graphs[k];
    const auto node0 = static_cast<int32_t>(out.node_ptr[k]), edge0 = static_cast<int32_t>(out.edge_ptr[k]);
    // Read through the degrees, whatever the member's offset type (row_ptr[node0] is edge0).
    const std::vector<int32_t> degrees = g.graph.in_degrees(), src = g.graph.sources();
    for (size_t i = 0; i < degrees.size(); ++i) {
      row_ptr[static_cast<size_t>(node0) + i + 1] = row_ptr[static_cast<size_t>(node0) + i] + degrees[i];
      batch[static_cast<size_t>(node0) + i] = static_cast<int32_t>(k);
    }
    for (size_t j = 0; j < src.size(); ++j) col[static_cast<size_t>(edge0) + j] = node0 + src[j];
    xs.push_back(g.x);
    ys.push_back(g.y);
    if (g.edge_attr.defined()) attrs.push_back(g.edge_attr);
  }
  // Each graph's rows are sorted by source already, so from_csr keeps the edge order.
  out.data.graph = Graph::from_csr(std::move(row_ptr), std::move(col));
  out.data.x = ops::concat(xs, 0);
  out.data.y = ops::concat(ys, 0);
  if (!attrs.empty()) out.data.edge_attr = ops::concat(attrs, 0);
  out.batch = Tensor::from_vector(batch, {n});
  return out;
}

GraphBatch batch_graphs(const std::vector<GraphData>& graphs) {
  std::vector<const GraphData*> pointers;
  for (const GraphData& g : graphs) pointers.push_back(&g);
  return batch_graphs(pointers);
}

namespace {

// The batch's offsets as batch_graphs makes them: node_ptr and edge_ptr of B + 1 >= 2 entries,
// each from 0, non-decreasing, up to N and E. unbatch reads rows by them: a node_ptr changed by
// hand read past the batch's row pointers.
void check_offsets(const GraphBatch& batch) {
  const GraphData& all = batch.data;
  GAT_CHECK(all.graph.row_ptr().defined() && all.x.defined() && all.y.defined(),
            "unbatch: the batch has no graph, x or y (batch_graphs makes batches)");
  const auto check = [](const std::vector<int64_t>& ptr, int64_t total, const char* name, const char* what) {
    GAT_CHECK(
        ptr.size() >= 2 && ptr.front() == 0 && ptr.back() == total && std::is_sorted(ptr.begin(), ptr.end()),
        "unbatch: ", name, " (", ptr.size(), " entries, from ", ptr.empty() ? 0 : ptr.front(), " to ",
        ptr.empty() ? 0 : ptr.back(), ") must run from 0 to the batch's ", total, " ", what,
        ", non-decreasing, one entry per graph and one more");
  };
  check(batch.node_ptr, all.graph.num_dst_nodes(), "node_ptr", "nodes");
  check(batch.edge_ptr, all.graph.num_edges(), "edge_ptr", "edges");
  GAT_CHECK(batch.node_ptr.size() == batch.edge_ptr.size(), "unbatch: node_ptr has ", batch.node_ptr.size(),
            " entries, edge_ptr ", batch.edge_ptr.size());
}

}  // namespace

std::vector<GraphData> unbatch(const GraphBatch& batch) {
  check_offsets(batch);
  const GraphData& all = batch.data;
  GAT_CHECK(all.graph.device() == Device::cpu, "unbatch: the batch is on ", device_name(all.graph.device()),
            " (unbatch on the host)");
  const std::vector<int32_t> degrees = all.graph.in_degrees(), src = all.graph.sources();
  std::vector<int64_t> rp(degrees.size() + 1, 0);  // (N+1,) the batch's row pointers, whatever their type
  std::partial_sum(degrees.begin(), degrees.end(), rp.begin() + 1);
  std::vector<GraphData> graphs;
  for (int64_t b = 0; b < batch.num_graphs(); ++b) {
    const int64_t node0 = batch.node_ptr[static_cast<size_t>(b)],
                  node1 = batch.node_ptr[static_cast<size_t>(b) + 1];
    const int64_t edge0 = batch.edge_ptr[static_cast<size_t>(b)],
                  edge1 = batch.edge_ptr[static_cast<size_t>(b) + 1];
    std::vector<int32_t> row_ptr, col;  // (n+1,), (e,) graph b's CSR from 0
    for (int64_t i = node0; i <= node1; ++i)
      row_ptr.push_back(static_cast<int32_t>(rp[static_cast<size_t>(i)] - edge0));
    for (int64_t j = edge0; j < edge1; ++j)
      col.push_back(src[static_cast<size_t>(j)] - static_cast<int32_t>(node0));
    GraphData g;
    g.graph = Graph::from_csr(std::move(row_ptr), std::move(col));
    g.x = all.x.rows(node0, node1).clone();
    g.y = all.y.rows(node0, node1).clone();
    if (all.edge_attr.defined()) g.edge_attr = all.edge_attr.rows(edge0, edge1).clone();
    graphs.push_back(std::move(g));
  }
  return graphs;
}

}  // namespace gat
