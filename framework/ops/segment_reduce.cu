#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/detail/segment_max.h"
#include "gat/framework/ops/segment_reduce.h"

namespace gat::ops::cuda_impl {

namespace {

// One thread per output element (s, d): it reduces the segment's rows in ascending order, as the
// CPU kernel does for each element, so the two agree bit for bit.
template <class T>
struct SegmentForwardFn {
  const T* x;              // (N, D)
  const int32_t* offsets;  // (S+1,)
  SegmentReduce reduce;
  long long features;  // D
  T* out;              // (S, D)
  int32_t* arg;        // (S, D), max only
  __device__ void operator()(long long i) const {
    const long long s = i / features, d = i % features;
    const int32_t begin = offsets[s], end = offsets[s + 1];
    T acc = begin < end ? x[begin * features + d] : T(0);
    int32_t at = begin < end ? begin : -1;
    for (int32_t r = begin + 1; r < end; ++r) {
      const T v = x[r * features + d];
      if (reduce != SegmentReduce::max)
        acc += v;
      else if (detail::replaces_max(v, acc))
        acc = v, at = r;
    }
    if (reduce == SegmentReduce::mean && end > begin) acc /= static_cast<T>(end - begin);
    out[i] = acc;
    if (reduce == SegmentReduce::max) arg[i] = at;
  }
};

// One thread per (s, d): writes d x[r, d] for every row r of segment s.
template <class T>
struct SegmentBackwardFn {
  const T* g;              // (S, D)
  const int32_t* offsets;  // (S+1,)
  SegmentReduce reduce;
  const int32_t* arg;  // (S, D), max only
  long long features;  // D
  T* grad_x;           // (N, D)
  __device__ void operator()(long long i) const {
    const long long s = i / features, d = i % features;
    const int32_t begin = offsets[s], end = offsets[s + 1];
    const T value = reduce == SegmentReduce::mean ? g[i] / static_cast<T>(end - begin) : g[i];
    for (int32_t r = begin; r < end; ++r)
      grad_x[r * features + d] = reduce != SegmentReduce::max || arg[i] == r ? value : T(0);
  }
};

}  // namespace

void segment_reduce_forward(const Tensor& x, const Segments& segments, SegmentReduce reduce, int64_t features,
                            Tensor& out, Tensor* arg) {
  dispatch_float(x.dtype(), "segment_reduce", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        "segment_reduce", segments.count() * features,
        SegmentForwardFn<T>{x.data<T>(), segments.offsets().data<int32_t>(), reduce, features, out.data<T>(),
                            arg != nullptr ? arg->data<int32_t>() : nullptr});
  });
}

void segment_reduce_backward(const Tensor& grad_out, const Segments& segments, SegmentReduce reduce,
                             const Tensor& arg, int64_t features, Tensor& grad_x) {
  dispatch_float(grad_out.dtype(), "segment_reduce backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        "segment_reduce backward", segments.count() * features,
        SegmentBackwardFn<T>{grad_out.data<T>(), segments.offsets().data<int32_t>(), reduce,
                             reduce == SegmentReduce::max ? arg.data<int32_t>() : nullptr, features,
                             grad_x.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
