#include <algorithm>

#include "gat/framework/ops/attention/detail/self_loop_attr_rows.h"
#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat/framework/ops/detail/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

// One thread per (destination i, feature d), t = i * D + d: neighbouring threads read
// neighbouring features of the same edge.
template <class T, bool kBackward>
struct LoopRowFn {
  const int32_t* row_ptr;         // (Nd+1,) graph
  const int32_t* src;             // (E,) graph
  const int32_t* looped_row_ptr;  // (Nd+1,) looped
  const T* attr;                  // (E, D)
  const T* grad_out;              // (E', D), backward only
  T* out;                         // forward: (E', D); backward: grad_attr (E, D)
  long long features;             // D
  long long loops;                // min(Ns, Nd): rows i < loops get a loop
  SelfLoopFill::Kind kind;
  T constant;
  __device__ void operator()(long long t) const {
    const long long i = t / features, d = t % features;
    const self_loop_rows::Row r{static_cast<int32_t>(i), i < loops, row_ptr[i], row_ptr[i + 1],
                                looped_row_ptr[i],       src,       features,   d};
    if (kBackward)
      self_loop_rows::backward_row(r, kind, attr, grad_out, out);
    else
      self_loop_rows::forward_row(r, kind, constant, attr, out);
  }
};

template <bool kBackward>
void launch(const char* name, const Graph& graph, const Graph& looped, const Tensor& edge_attr,
            const SelfLoopFill& fill, const Tensor* grad_out, Tensor& out) {
  const long long D = edge_attr.size(1), Nd = graph.num_dst_nodes();
  const long long loops = std::min<long long>(graph.num_src_nodes(), Nd);
  dispatch_float(edge_attr.dtype(), name, [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        name, Nd * D,
        LoopRowFn<T, kBackward>{graph.row_ptr().data<int32_t>(), graph.edge_src().data<int32_t>(),
                                looped.row_ptr().data<int32_t>(), edge_attr.data<T>(),
                                grad_out ? grad_out->data<T>() : nullptr, out.data<T>(), D, loops, fill.kind,
                                static_cast<T>(fill.value)});
  });
}

}  // namespace

void self_loop_attr_forward(const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                            const SelfLoopFill& fill, Tensor& out) {
  launch<false>("self_loop_attr", graph, looped, edge_attr, fill, nullptr, out);
}

void self_loop_attr_backward(const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                             const SelfLoopFill& fill, const Tensor& grad_out, Tensor& grad_attr) {
  launch<true>("self_loop_attr backward", graph, looped, edge_attr, fill, &grad_out, grad_attr);
}

}  // namespace gat::ops::cuda_impl
