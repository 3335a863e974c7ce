#include "gat/framework/ops/attention/self_loop_attr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/attention/detail/self_loop_attr_rows.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

std::optional<SelfLoopFill> SelfLoopFill::try_parse(const std::string& text) {
  const std::pair<const char*, Kind> names[] = {{"mean", Kind::mean}, {"add", Kind::add}, {"sum", Kind::add},
                                                {"min", Kind::min},   {"max", Kind::max}, {"mul", Kind::mul}};
  for (const auto& [name, kind] : names)
    if (text == name) return SelfLoopFill{kind, 0.0};
  char* end = nullptr;
  const double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return constant_value(value);
}

SelfLoopFill SelfLoopFill::parse(const std::string& text) {
  const std::optional<SelfLoopFill> fill = try_parse(text);
  GAT_CHECK(fill.has_value(), "fill_value '", text, "' is not ", kAccepted);
  return *fill;
}

std::string SelfLoopFill::name() const {
  switch (kind) {
    case Kind::mean:
      return "mean";
    case Kind::add:
      return "add";
    case Kind::min:
      return "min";
    case Kind::max:
      return "max";
    case Kind::mul:
      return "mul";
    default: {  // the shortest of %.15g and %.17g that reads back as the same number
      char text[32];
      for (int digits : {15, 17}) {
        std::snprintf(text, sizeof text, "%.*g", digits, value);
        if (std::strtod(text, nullptr) == value) break;
      }
      return text;
    }
  }
}

namespace {

// f(row) for every destination row i and feature d of D (rows in parallel): the row's place in
// both graphs, and whether it gets a loop (i < min(Ns, Nd)). The two graphs' offsets may differ
// (loops can take a graph past kMaxNarrowEdges edges).
template <class F>
void for_each_row(const Graph& graph, const Graph& looped, int64_t D, F f) {
  const int64_t Nd = graph.num_dst_nodes(), loops = std::min(graph.num_src_nodes(), Nd);
  const int32_t* src = graph.edge_src().data<int32_t>();  // (E,)
  dispatch_offsets(graph, [&](auto offset) {
    dispatch_offsets(looped, [&](auto looped_offset) {
      const auto* rp = graph.row_ptr().data<decltype(offset)>();           // (Nd+1,)
      const auto* lrp = looped.row_ptr().data<decltype(looped_offset)>();  // (Nd+1,)
      detail::parallel_for(
          Nd,
          [&](int64_t i) {
            for (int64_t d = 0; d < D; ++d)
              f(self_loop_rows::Row{static_cast<int32_t>(i), i < loops, rp[i], rp[i + 1], lrp[i], src, D, d});
          },
          D * (graph.num_edges() / std::max<int64_t>(Nd, 1) + 1));
    });
  });
}

}  // namespace

namespace cpu_impl {

void self_loop_attr_forward(const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                            const SelfLoopFill& fill, Tensor& out) {
  dispatch_float(edge_attr.dtype(), "self_loop_attr", [&](auto zero) {
    using T = decltype(zero);
    const T* attr = edge_attr.data<T>();  // (E, D)
    T* o = out.data<T>();                 // (E', D)
    const T constant = static_cast<T>(fill.value);
    for_each_row(graph, looped, edge_attr.size(1), [&](const self_loop_rows::Row& r) {
      self_loop_rows::forward_row(r, fill.kind, constant, attr, o);
    });
  });
}

void self_loop_attr_backward(const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                             const SelfLoopFill& fill, const Tensor& grad_out, Tensor& grad_attr) {
  dispatch_float(edge_attr.dtype(), "self_loop_attr backward", [&](auto zero) {
    using T = decltype(zero);
    const T* attr = edge_attr.data<T>();  // (E, D)
    const T* g = grad_out.data<T>();      // (E', D)
    T* dattr = grad_attr.data<T>();       // (E, D)
    for_each_row(graph, looped, edge_attr.size(1), [&](const self_loop_rows::Row& r) {
      self_loop_rows::backward_row(r, fill.kind, attr, g, dattr);
    });
  });
}

}  // namespace cpu_impl

namespace kernels {

void self_loop_attr_forward(const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                            const SelfLoopFill& fill, Tensor& out) {
  if (edge_attr.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::self_loop_attr_forward(graph, looped, edge_attr, fill, out));
  cpu_impl::self_loop_attr_forward(graph, looped, edge_attr, fill, out);
}

void self_loop_attr_backward(const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                             const SelfLoopFill& fill, const Tensor& grad_out, Tensor& grad_attr) {
  if (edge_attr.is_cuda())
    return GAT_CUDA_CALL(
        cuda_impl::self_loop_attr_backward(graph, looped, edge_attr, fill, grad_out, grad_attr));
  cpu_impl::self_loop_attr_backward(graph, looped, edge_attr, fill, grad_out, grad_attr);
}

}  // namespace kernels

Tensor self_loop_attr(const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                      const SelfLoopFill& fill) {
  const char* op = "self_loop_attr";
  check_float(op, "edge_attr", edge_attr);
  check_dim(op, "edge_attr", edge_attr, 2);
  const int64_t Ns = graph.num_src_nodes(), Nd = graph.num_dst_nodes(), E = graph.num_edges(),
                D = edge_attr.size(1);
  GAT_CHECK(edge_attr.size(0) == E, op, ": 'edge_attr' ", edge_attr.describe(),
            " must have one row per edge of the graph (", E, " edges)");
  GAT_CHECK(graph.device() == edge_attr.device() && looped.device() == edge_attr.device(), op,
            ": the graphs are on ", device_name(graph.device()), " and ", device_name(looped.device()),
            " but 'edge_attr' is ", edge_attr.describe());
  const int64_t looped_edges = E - graph.count_self_loops() + std::min(Ns, Nd);
  GAT_CHECK(looped.num_src_nodes() == Ns && looped.num_dst_nodes() == Nd && looped.one_self_loop_per_node() &&
                looped.num_edges() == looped_edges,
            op, ": 'looped' (", looped.num_src_nodes(), " sources, ", looped.num_dst_nodes(),
            " destinations, ", looped.num_edges(), " edges) is not graph.with_self_loops() (", Ns,
            " sources, ", Nd, " destinations, ", looped_edges, " edges, one loop per node i < ",
            std::min(Ns, Nd), ")");

  Tensor out = Tensor::empty({looped_edges, D}, edge_attr.dtype(), edge_attr.device(), op);
  kernels::self_loop_attr_forward(graph, looped, edge_attr, fill, out);
  return autograd::record(
      op, out, {edge_attr}, [graph, looped, attr = edge_attr.detach(), fill](const Tensor& g) {
        check_same("self_loop_attr backward", "grad_out", g, "edge_attr", attr);
        check_shape("self_loop_attr backward", "grad_out", g, {looped.num_edges(), attr.size(1)});
        Tensor grad_attr = Tensor::empty(attr.shape(), attr.dtype(), attr.device(), "d edge_attr");
        kernels::self_loop_attr_backward(graph, looped, attr, fill, g, grad_attr);
        return std::vector<Tensor>{grad_attr};
      });
}

}  // namespace gat::ops
