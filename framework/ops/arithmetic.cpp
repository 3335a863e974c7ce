#include "gat/framework/ops/arithmetic.h"

#include <algorithm>
#include <string>
#include <utility>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/binary_math.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/reduce.h"

namespace gat::ops {

namespace {

struct Named {
  const char* name;
  const Tensor& tensor;  // undefined for a constant
};

// NumPy's broadcast shape of the operands; throws naming the op, the two tensors that clash and
// the axis.
Shape broadcast_shape(const char* op, const std::vector<Named>& operands) {
  size_t rank = 0;
  for (const Named& x : operands)
    if (x.tensor.defined()) rank = std::max(rank, x.tensor.shape().size());
  Shape out(rank, 1);
  std::vector<const Named*> from(rank, nullptr);  // the operand that set each axis's size
  for (const Named& x : operands) {
    if (!x.tensor.defined()) continue;
    const Shape& shape = x.tensor.shape();
    for (size_t k = 1; k <= shape.size(); ++k) {  // axis -k
      const int64_t have = out[rank - k], size = shape[shape.size() - k];
      if (size == have || size == 1) continue;
      GAT_CHECK(have == 1, op, ": '", from[rank - k]->name, "' ", from[rank - k]->tensor.describe(), " and '",
                x.name, "' ", x.tensor.describe(), " do not broadcast (axis -", k, ": ", have, " against ",
                size, ")");
      out[rank - k] = size;
      from[rank - k] = &x;
    }
  }
  return out;
}

Tensor binary_values(const char* op, BinaryOp kind, const Operand& a, const Operand& b, const Shape& shape) {
  const Tensor& like = a.tensor.defined() ? a.tensor : b.tensor;
  Tensor out = Tensor::empty(shape, like.dtype(), like.device(), op);
  kernels::binary(kind, a, b, out);
  return out;
}

Tensor where_values(const char* op, const Tensor& cond, const Operand& a, const Operand& b,
                    const Shape& shape, const Tensor& like) {
  Tensor out = Tensor::empty(shape, like.dtype(), like.device(), op);
  kernels::where(cond, a, b, out);
  return out;
}

// The gradient of an operand of shape `shape` from its output-shaped gradient: the sum over the
// axes it was broadcast along (its missing leading axes and its size-1 axes), each run of
// adjacent such axes in one kernels::sum_axis, innermost run first; shaped as the operand.
Tensor reduce_to(const Shape& shape, Tensor grad) {
  if (grad.shape() == shape) return grad;
  const Shape full = grad.shape();
  const size_t lead = full.size() - shape.size();
  struct Run {
    int64_t size;
    bool summed;
  };
  std::vector<Run> runs;  // grad's axes, adjacent ones alike (all summed over or all kept) as one
  for (size_t axis = 0; axis < full.size(); ++axis) {
    const bool summed = axis < lead || (shape[axis - lead] == 1 && full[axis] != 1);
    if (!runs.empty() && runs.back().summed == summed)
      runs.back().size *= full[axis];
    else
      runs.push_back({full[axis], summed});
  }
  for (size_t r = runs.size(); r-- > 0;) {
    if (!runs[r].summed) continue;
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < r; ++k) outer *= runs[k].size;
    for (size_t k = r + 1; k < runs.size(); ++k) inner *= runs[k].size;
    Tensor summed = Tensor::empty({outer * inner}, grad.dtype(), grad.device(), "broadcast gradient");
    kernels::sum_axis(grad, outer, runs[r].size, inner, summed);  // (outer, len, inner) -> (outer, inner)
    grad = summed;
    runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(r));
  }
  return grad.view(shape);
}

// The tensor operands among a and b (an op's inputs on the tape).
std::vector<Tensor> tensors_of(const Operand& a, const Operand& b) {
  std::vector<Tensor> tensors;
  for (const Operand* side : {&a, &b})
    if (side->tensor.defined()) tensors.push_back(side->tensor);
  return tensors;
}

bool needs_grad(const Operand& x) { return x.tensor.defined() && x.tensor.requires_grad(); }

// The autograd entry shared by every binary op: a, b are tensors (broadcast) or constants.
Tensor binary_op(const char* op, BinaryOp kind, const Operand& a, const Operand& b, const Shape& shape) {
  broadcast_layout(op, shape, {a.tensor, b.tensor});  // throws for a broadcast the kernels cannot walk
  Tensor out = binary_values(op, kind, a, b, shape);
  const std::vector<Tensor> inputs = tensors_of(a, b);
  if (!autograd::needs_grad(inputs)) return out;
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  // No history in the closure: only detached values.
  Operand a_saved = a, b_saved = b;
  if (a.tensor.defined()) a_saved.tensor = a.tensor.detach();
  if (b.tensor.defined()) b_saved.tensor = b.tensor.detach();
  const Tensor out_saved = kind == BinaryOp::div && need_b ? out.detach() : Tensor();
  return autograd::record(op, out, inputs, [=](const Tensor& g) {
    const Operand grad{g};
    // g times f(x, y), at the output's shape
    auto times = [&](BinaryOp f, const Operand& x, const Operand& y) {
      return binary_values(op, BinaryOp::mul, grad, {binary_values(op, f, x, y, g.shape())}, g.shape());
    };
    Tensor grad_a = g, grad_b = g;  // at the output's shape
    switch (kind) {
      case BinaryOp::add:
        break;
      case BinaryOp::sub:
        if (need_b) grad_b = binary_values(op, BinaryOp::mul, grad, {Tensor(), -1.0}, g.shape());
        break;
      case BinaryOp::mul:
        if (need_a) grad_a = binary_values(op, BinaryOp::mul, grad, b_saved, g.shape());
        if (need_b) grad_b = binary_values(op, BinaryOp::mul, grad, a_saved, g.shape());
        break;
      case BinaryOp::div:
        grad_a = binary_values(op, BinaryOp::div, grad, b_saved, g.shape());  // g / b
        if (need_b)                                                           // -(g / b) * out
          grad_b = binary_values(op, BinaryOp::mul, {grad_a},
                                 {binary_values(op, BinaryOp::mul, {out_saved}, {Tensor(), -1.0}, g.shape())},
                                 g.shape());
        break;
      case BinaryOp::maximum:
        if (need_a) grad_a = times(BinaryOp::max_share, a_saved, b_saved);
        if (need_b) grad_b = times(BinaryOp::max_share, b_saved, a_saved);
        break;
      case BinaryOp::minimum:
        if (need_a) grad_a = times(BinaryOp::max_share, b_saved, a_saved);
        if (need_b) grad_b = times(BinaryOp::max_share, a_saved, b_saved);
        break;
      case BinaryOp::pow:
        if (need_a) grad_a = times(BinaryOp::pow_grad_base, a_saved, b_saved);
        if (need_b) grad_b = times(BinaryOp::pow_grad_exponent, a_saved, b_saved);
        break;
      default:
        GAT_FAIL(op, ": no backward for this kernel op");
    }
    std::vector<Tensor> grads;
    if (a.tensor.defined()) grads.push_back(need_a ? reduce_to(a_saved.tensor.shape(), grad_a) : Tensor());
    if (b.tensor.defined()) grads.push_back(need_b ? reduce_to(b_saved.tensor.shape(), grad_b) : Tensor());
    return grads;
  });
}

Tensor tensor_op(const char* op, BinaryOp kind, const Tensor& a, const Tensor& b) {
  if (detail::bf16_in_f32(op, a, b))
    return detail::rounded_to_bf16(tensor_op(op, kind, detail::widened(a), detail::widened(b)));
  check_float(op, "a", a);
  check_same(op, "a", a, "b", b);
  return binary_op(op, kind, {a}, {b}, broadcast_shape(op, {{"a", a}, {"b", b}}));
}

Tensor tensor_constant_op(const char* op, BinaryOp kind, const Tensor& a, double b) {
  if (detail::bf16_in_f32(op, a))
    return detail::rounded_to_bf16(tensor_constant_op(op, kind, detail::widened(a), b));
  check_float(op, "a", a);
  return binary_op(op, kind, {a}, {Tensor(), b}, a.shape());
}

Tensor constant_tensor_op(const char* op, BinaryOp kind, double a, const Tensor& b) {
  if (detail::bf16_in_f32(op, b))
    return detail::rounded_to_bf16(constant_tensor_op(op, kind, a, detail::widened(b)));
  check_float(op, "b", b);
  return binary_op(op, kind, {Tensor(), a}, {b}, b.shape());
}

// where(cond, a, b) for tensors or constants a, b (at least one a tensor).
Tensor where_op(const Tensor& cond, const Operand& a, const Operand& b) {
  const char* op = "where";
  check_dtype(op, "cond", cond, DType::i32);
  const Tensor& like = a.tensor.defined() ? a.tensor : b.tensor;
  check_float(op, a.tensor.defined() ? "a" : "b", like);
  if (a.tensor.defined() && b.tensor.defined()) check_same(op, "a", a.tensor, "b", b.tensor);
  GAT_CHECK(cond.device() == like.device(), "where: 'cond' ", cond.describe(), " is not on the device of ",
            like.describe());
  const Shape shape = broadcast_shape(op, {{"cond", cond}, {"a", a.tensor}, {"b", b.tensor}});
  broadcast_layout(op, shape, {a.tensor, b.tensor, cond});  // throws for a broadcast the kernels cannot walk
  Tensor out = where_values(op, cond, a, b, shape, like);
  const std::vector<Tensor> inputs = tensors_of(a, b);
  if (!autograd::needs_grad(inputs)) return out;
  const bool need_a = needs_grad(a), need_b = needs_grad(b);
  const Shape a_shape = a.tensor.defined() ? a.tensor.shape() : Shape(),
              b_shape = b.tensor.defined() ? b.tensor.shape() : Shape();
  return autograd::record(op, out, inputs, [=, cond = cond.detach()](const Tensor& g) {
    const Operand zero{Tensor(), 0.0};
    std::vector<Tensor> grads;
    if (a.tensor.defined())
      grads.push_back(need_a ? reduce_to(a_shape, where_values(op, cond, {g}, zero, g.shape(), g))
                             : Tensor());
    if (b.tensor.defined())
      grads.push_back(need_b ? reduce_to(b_shape, where_values(op, cond, zero, {g}, g.shape(), g))
                             : Tensor());
    return grads;
  });
}

}  // namespace

BroadcastLayout broadcast_layout(const char* op, const Shape& out, const std::vector<Tensor>& operands) {
  BroadcastLayout layout;
  const size_t rank = out.size(), count = operands.size();
  struct Axis {
    int64_t size;
    int64_t stride[3];
  };
  std::vector<Axis> merged;  // outermost first
  for (size_t axis = 0; axis < rank; ++axis) {
    if (out[axis] == 1) continue;  // read alike by every operand
    Axis next{out[axis], {0, 0, 0}};
    for (size_t k = 0; k < count; ++k) {
      const Tensor& t = operands[k];
      if (!t.defined()) continue;
      const Shape& shape = t.shape();
      const size_t lead = rank - shape.size();
      if (axis < lead || shape[axis - lead] == 1) continue;  // broadcast along this axis
      next.stride[k] = 1;
      for (size_t j = axis - lead + 1; j < shape.size(); ++j) next.stride[k] *= shape[j];
    }
    // The previous axis and this one are one axis when every operand steps over the whole of this
    // one to advance the previous one (both 0 where it is broadcast along both).
    bool joins = !merged.empty();
    for (size_t k = 0; k < count && joins; ++k) joins = merged.back().stride[k] == next.stride[k] * next.size;
    if (joins) {
      merged.back().size *= next.size;
      for (size_t k = 0; k < count; ++k) merged.back().stride[k] = next.stride[k];
    } else {
      merged.push_back(next);
    }
  }
  GAT_CHECK(merged.size() <= static_cast<size_t>(kMaxBroadcastAxes), op, ": broadcasting to ", shape_str(out),
            " needs ", merged.size(), " axes once merged; the kernels take at most ", kMaxBroadcastAxes);
  layout.axes = static_cast<int>(merged.size());
  for (size_t axis = 0; axis < merged.size(); ++axis) {
    layout.size[axis] = merged[axis].size;
    for (size_t k = 0; k < 3; ++k) layout.stride[k][axis] = merged[axis].stride[k];
  }
  return layout;
}

Tensor add(const Tensor& a, const Tensor& b) { return tensor_op("add", BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return tensor_op("sub", BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return tensor_op("mul", BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return tensor_op("div", BinaryOp::div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return tensor_op("maximum", BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return tensor_op("minimum", BinaryOp::minimum, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return tensor_op("pow", BinaryOp::pow, a, b); }
Tensor add(const Tensor& a, double b) { return tensor_constant_op("add", BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, double b) { return tensor_constant_op("sub", BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, double b) { return tensor_constant_op("mul", BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, double b) { return tensor_constant_op("div", BinaryOp::div, a, b); }
Tensor maximum(const Tensor& a, double b) { return tensor_constant_op("maximum", BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, double b) { return tensor_constant_op("minimum", BinaryOp::minimum, a, b); }
Tensor add(double a, const Tensor& b) { return constant_tensor_op("add", BinaryOp::add, a, b); }
Tensor sub(double a, const Tensor& b) { return constant_tensor_op("sub", BinaryOp::sub, a, b); }
Tensor mul(double a, const Tensor& b) { return constant_tensor_op("mul", BinaryOp::mul, a, b); }
Tensor div(double a, const Tensor& b) { return constant_tensor_op("div", BinaryOp::div, a, b); }
Tensor pow(double a, const Tensor& b) { return constant_tensor_op("pow", BinaryOp::pow, a, b); }
Tensor neg(const Tensor& x) { return tensor_constant_op("neg", BinaryOp::mul, x, -1.0); }
Tensor scale(const Tensor& x, double s) { return tensor_constant_op("scale", BinaryOp::mul, x, s); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", "a", a);
  check_defined("where", "b", b);
  return where_op(cond, {a}, {b});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  check_defined("where", "a", a);
  return where_op(cond, {a}, {Tensor(), b});
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  check_defined("where", "b", b);
  return where_op(cond, {Tensor(), a}, {b});
}

Tensor add_bias(const Tensor& x, const Tensor& bias) {
  const char* op = "add_bias";
  if (detail::bf16_in_f32(op, x, bias))
    return detail::rounded_to_bf16(add_bias(detail::widened(x), detail::widened(bias)));
  check_float(op, "x", x);
  check_same(op, "x", x, "bias", bias);
  GAT_CHECK(x.dim() >= 1, "add_bias: 'x' must have at least one dimension, got ", x.describe());
  check_shape(op, "bias", bias, {x.size(-1)});
  return binary_op(op, BinaryOp::add, {x}, {bias}, x.shape());
}

namespace kernels {
void binary(BinaryOp op, const Operand& a, const Operand& b, Tensor& out) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::binary(op, a, b, out));
  cpu_impl::binary(op, a, b, out);
}
void where(const Tensor& cond, const Operand& a, const Operand& b, Tensor& out) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::where(cond, a, b, out));
  cpu_impl::where(cond, a, b, out);
}
}  // namespace kernels

namespace cpu_impl {

namespace {

// Elements per task: a long innermost axis is cut into spans of this many, so that it spreads
// over threads.
constexpr int64_t kSpan = 4096;

// run(offsets, o, count) for pieces of the output that cover it once: `count` consecutive
// output elements from flat index o, along the layout's innermost axis, where operand k starts
// at offsets[k] and advances by its innermost stride (0 or 1) per element. In parallel.
template <class Run>
void for_each_piece(const BroadcastLayout& layout, int64_t numel, Run run) {
  if (numel == 0) return;
  const int last = layout.axes - 1;
  const int64_t inner = layout.axes == 0 ? 1 : layout.size[last];
  const int64_t spans = (inner + kSpan - 1) / kSpan;  // per innermost row
  detail::parallel_for(
      numel / inner * spans,
      [layout, last, inner, spans, run](int64_t task) {
        const int64_t row = task / spans, c0 = task % spans * kSpan;
        int64_t offsets[3] = {0, 0, 0};
        int64_t rest = row;
        for (int axis = last - 1; axis >= 0; --axis) {
          const int64_t index = rest % layout.size[axis];
          rest /= layout.size[axis];
          for (int k = 0; k < 3; ++k) offsets[k] += index * layout.stride[k][axis];
        }
        if (last >= 0)
          for (int k = 0; k < 3; ++k) offsets[k] += c0 * layout.stride[k][last];
        run(offsets, row * inner + c0, std::min(kSpan, inner - c0));
      },
      std::min(kSpan, inner));
}

template <class T>
const T* values_of(const Operand& x, const T& constant) {
  return x.tensor.defined() ? x.tensor.data<T>() : &constant;
}

// out = f(a, b); kA / kB: the operand varies along the innermost axis (stride 1), else it holds
// one value there. Compile-time, so that each loop is a plain vectorisable one.
template <bool kA, bool kB, class T, BinaryOp kOp>
void binary_loop(const BroadcastLayout& layout, const T* pa, const T* pb, T* po, int64_t numel) {
  for_each_piece(layout, numel, [=](const int64_t* offsets, int64_t o, int64_t count) {
    const T* ra = pa + offsets[0];
    const T* rb = pb + offsets[1];
    T* ro = po + o;
    const T x = *ra, y = *rb;
    for (int64_t k = 0; k < count; ++k) ro[k] = detail::binary_element<kOp>(kA ? ra[k] : x, kB ? rb[k] : y);
  });
}

}  // namespace

void binary(BinaryOp op, const Operand& a, const Operand& b, Tensor& out) {
  const BroadcastLayout layout = broadcast_layout("binary", out.shape(), {a.tensor, b.tensor});
  const int last = layout.axes - 1;
  const bool a_varies = last >= 0 && layout.stride[0][last] == 1,
             b_varies = last >= 0 && layout.stride[1][last] == 1;
  dispatch_float(out.dtype(), "binary", [&](auto zero) {
    using T = decltype(zero);
    const T a_constant = static_cast<T>(a.constant), b_constant = static_cast<T>(b.constant);
    const T* pa = values_of<T>(a, a_constant);
    const T* pb = values_of<T>(b, b_constant);
    T* po = out.data<T>();
    const int64_t n = out.numel();
    detail::visit_binary_op(op, [&](auto kind) {
      constexpr BinaryOp kOp = decltype(kind)::value;
      if (a_varies && b_varies) return binary_loop<true, true, T, kOp>(layout, pa, pb, po, n);
      if (a_varies) return binary_loop<true, false, T, kOp>(layout, pa, pb, po, n);
      if (b_varies) return binary_loop<false, true, T, kOp>(layout, pa, pb, po, n);
      binary_loop<false, false, T, kOp>(layout, pa, pb, po, n);
    });
  });
}

void where(const Tensor& cond, const Operand& a, const Operand& b, Tensor& out) {
  const BroadcastLayout layout = broadcast_layout("where", out.shape(), {a.tensor, b.tensor, cond});
  const int last = layout.axes - 1;
  const int64_t sa = last >= 0 ? layout.stride[0][last] : 0, sb = last >= 0 ? layout.stride[1][last] : 0,
                sc = last >= 0 ? layout.stride[2][last] : 0;
  dispatch_float(out.dtype(), "where", [&](auto zero) {
    using T = decltype(zero);
    const T a_constant = static_cast<T>(a.constant), b_constant = static_cast<T>(b.constant);
    const T* pa = values_of<T>(a, a_constant);
    const T* pb = values_of<T>(b, b_constant);
    const int32_t* pc = cond.data<int32_t>();
    T* po = out.data<T>();
    for_each_piece(layout, out.numel(), [=](const int64_t* offsets, int64_t o, int64_t count) {
      const T* ra = pa + offsets[0];
      const T* rb = pb + offsets[1];
      const int32_t* rc = pc + offsets[2];
      for (int64_t k = 0; k < count; ++k) po[o + k] = rc[k * sc] != 0 ? ra[k * sa] : rb[k * sb];
    });
  });
}

}  // namespace cpu_impl

}  // namespace gat::ops
