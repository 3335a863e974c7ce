#include "gat/framework/ops/segment_reduce.h"

#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/detail/segment_max.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

Segments::Segments(const Tensor& wide_or_narrow, Device device) {
  const Tensor offsets = narrow_offsets("Segments", wide_or_narrow);  // a graph's wide offsets, if they fit
  check_dtype("Segments", "offsets", offsets, DType::i32);
  check_dim("Segments", "offsets", offsets, 1);
  GAT_CHECK(offsets.numel() >= 1, "Segments: 'offsets' ", offsets.describe(),
            " needs at least one entry (S+1 for S segments)");
  const std::vector<int32_t> values = offsets.to_vector<int32_t>();  // (S+1,)
  GAT_CHECK(values[0] == 0, "Segments: offsets[0] = ", values[0], ", expected 0");
  for (size_t s = 1; s < values.size(); ++s)
    GAT_CHECK(values[s] >= values[s - 1], "Segments: the offsets decrease: offsets[", s, "] = ", values[s],
              " < offsets[", s - 1, "] = ", values[s - 1]);
  rows_ = values.back();
  offsets_ = offsets.to(device);
}

namespace cpu_impl {

// f(s, begin, end) for every segment s, each on one thread (rows in ascending order inside f).
template <class F>
void for_each_segment(const Segments& segments, int64_t features, F&& f) {
  const int32_t* offsets = segments.offsets().data<int32_t>();  // (S+1,)
  const int64_t count = segments.count();
  const int64_t cost = count > 0 ? features * (segments.rows() / count + 1) : 0;  // per segment
  detail::parallel_for(
      count, [&](int64_t s) { f(s, offsets[s], offsets[s + 1]); }, cost);
}

void segment_reduce_forward(const Tensor& x, const Segments& segments, SegmentReduce reduce, int64_t features,
                            Tensor& out, Tensor* arg) {
  dispatch_float(x.dtype(), "segment_reduce", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();                                      // (N, D)
    T* po = out.data<T>();                                          // (S, D)
    int32_t* pa = arg != nullptr ? arg->data<int32_t>() : nullptr;  // (S, D)
    for_each_segment(segments, features, [&](int64_t s, int32_t begin, int32_t end) {
      T* o = po + s * features;
      int32_t* a = pa != nullptr ? pa + s * features : nullptr;
      for (int64_t d = 0; d < features; ++d) o[d] = begin < end ? px[begin * features + d] : T(0);
      if (a != nullptr)
        for (int64_t d = 0; d < features; ++d) a[d] = begin < end ? begin : -1;
      for (int32_t r = begin + 1; r < end; ++r) {
        const T* row = px + static_cast<int64_t>(r) * features;
        if (reduce == SegmentReduce::max) {
          for (int64_t d = 0; d < features; ++d)
            if (detail::replaces_max(row[d], o[d])) o[d] = row[d], a[d] = r;
        } else {
          for (int64_t d = 0; d < features; ++d) o[d] += row[d];
        }
      }
      if (reduce == SegmentReduce::mean && end > begin)
        for (int64_t d = 0; d < features; ++d) o[d] /= static_cast<T>(end - begin);
    });
  });
}

void segment_reduce_backward(const Tensor& grad_out, const Segments& segments, SegmentReduce reduce,
                             const Tensor& arg, int64_t features, Tensor& grad_x) {
  dispatch_float(grad_out.dtype(), "segment_reduce backward", [&](auto zero) {
    using T = decltype(zero);
    const T* pg = grad_out.data<T>();                                                  // (S, D)
    const int32_t* pa = reduce == SegmentReduce::max ? arg.data<int32_t>() : nullptr;  // (S, D)
    T* pdx = grad_x.data<T>();                                                         // (N, D)
    for_each_segment(segments, features, [&](int64_t s, int32_t begin, int32_t end) {
      const T* g = pg + s * features;
      for (int32_t r = begin; r < end; ++r) {
        T* dx = pdx + static_cast<int64_t>(r) * features;
        for (int64_t d = 0; d < features; ++d) {
          if (reduce == SegmentReduce::max)
            dx[d] = pa[s * features + d] == r ? g[d] : T(0);
          else
            dx[d] = reduce == SegmentReduce::mean ? g[d] / static_cast<T>(end - begin) : g[d];
        }
      }
    });
  });
}

}  // namespace cpu_impl

namespace kernels {

void segment_reduce_forward(const Tensor& x, const Segments& segments, SegmentReduce reduce, int64_t features,
                            Tensor& out, Tensor* arg) {
  GAT_RUN_KERNEL_FN(segment_reduce_forward, (x, segments, reduce, features, out, arg), x);
}

void segment_reduce_backward(const Tensor& grad_out, const Segments& segments, SegmentReduce reduce,
                             const Tensor& arg, int64_t features, Tensor& grad_x) {
  GAT_RUN_KERNEL_FN(segment_reduce_backward, (grad_out, segments, reduce, arg, features, grad_x), grad_out);
}

}  // namespace kernels

namespace {

const char* op_name(SegmentReduce reduce) {
  switch (reduce) {
    case SegmentReduce::sum:
      return "segment_sum";
    case SegmentReduce::mean:
      return "segment_mean";
    case SegmentReduce::max:
      return "segment_max";
  }
  return "segment_reduce";
}

// The autograd entry of the three ops.
Tensor segment_reduce(const Tensor& x, const Segments& segments, SegmentReduce reduce) {
  const char* op = op_name(reduce);
  check_defined(op, "x", x);
  check_float(op, "x", x);
  GAT_CHECK(x.dim() >= 1, op, ": 'x' must have at least one dimension, got ", x.describe());
  GAT_CHECK(segments.offsets().defined(), op, ": the Segments are empty (default-constructed)");
  GAT_CHECK(segments.device() == x.device(), op, ": the offsets are on ", device_name(segments.device()),
            " but 'x' ", x.describe(), " is not");
  GAT_CHECK(x.size(0) == segments.rows(), op, ": 'x' ", x.describe(), " has ", x.size(0),
            " rows but the offsets end at ", segments.rows());
  const int64_t features = shape_numel(Shape(x.shape().begin() + 1, x.shape().end()));  // D
  Shape out_shape = x.shape();
  out_shape[0] = segments.count();

  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device(), op);  // (S, ...)
  Tensor arg;                                                        // (S, ...) i32, max only
  if (reduce == SegmentReduce::max) arg = Tensor::empty(out_shape, DType::i32, x.device(), op);
  kernels::segment_reduce_forward(x, segments, reduce, features, out, arg.defined() ? &arg : nullptr);

  const Shape& in_shape = x.shape();
  return autograd::record(op, out, {x}, [segments, reduce, arg, in_shape, features](const Tensor& g) {
    Tensor grad_x = Tensor::empty(in_shape, g.dtype(), g.device(), "segment_reduce backward");  // (N, ...)
    kernels::segment_reduce_backward(g, segments, reduce, arg, features, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

}  // namespace

Tensor segment_sum(const Tensor& x, const Segments& segments) {
  return segment_reduce(x, segments, SegmentReduce::sum);
}
Tensor segment_mean(const Tensor& x, const Segments& segments) {
  return segment_reduce(x, segments, SegmentReduce::mean);
}
Tensor segment_max(const Tensor& x, const Segments& segments) {
  return segment_reduce(x, segments, SegmentReduce::max);
}

}  // namespace gat::ops
