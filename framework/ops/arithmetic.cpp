#include "gat/framework/ops/arithmetic.h"

#include <algorithm>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/reduce.h"

namespace gat::ops {

namespace {

int64_t last_dim(const Shape& shape) { return shape.empty() ? 1 : shape.back(); }
int64_t rows_of(const Shape& shape) {
  return shape.empty() ? 1 : shape_numel(Shape(shape.begin(), shape.end() - 1));
}

// NumPy's broadcast shape of a and b; throws naming the op and both tensors.
Shape broadcast_shape(const char* op, const Tensor& a, const Tensor& b) {
  const size_t rank = std::max(a.shape().size(), b.shape().size());
  Shape out(rank);
  for (size_t k = 1; k <= rank; ++k) {  // dimension -k
    const int64_t da = k <= a.shape().size() ? a.shape()[a.shape().size() - k] : 1;
    const int64_t db = k <= b.shape().size() ? b.shape()[b.shape().size() - k] : 1;
    GAT_CHECK(da == db || da == 1 || db == 1, op, ": 'a' ", a.describe(), " and 'b' ", b.describe(),
              " do not broadcast (dimension -", k, ": ", da, " against ", db, ")");
    out[rank - k] = da == 1 ? db : da;
  }
  return out;
}

// How `t` (one side of a broadcast to `out`) is read; throws for a broadcast the kernels lack.
Broadcast broadcast_of(const char* op, const char* arg, const Tensor& t, const Shape& out, const Tensor& a,
                       const Tensor& b) {
  const int64_t C = last_dim(out);
  if (t.numel() == shape_numel(out)) return Broadcast::full;
  if (t.numel() == 1) return Broadcast::single;
  if (last_dim(t.shape()) == C && t.numel() == C) return Broadcast::row;
  if (last_dim(t.shape()) == 1 && t.numel() == rows_of(out)) return Broadcast::column;
  GAT_FAIL(op, ": 'a' ", a.describe(), " and 'b' ", b.describe(), " broadcast to ", shape_str(out), ", but '",
           arg, "' is neither the whole output, a row (C,), a column (..., 1) nor one element");
}

Tensor binary_values(const char* op, BinaryOp kind, const Operand& a, const Operand& b, const Shape& shape) {
  const Tensor& like = a.tensor.defined() ? a.tensor : b.tensor;
  Tensor out = Tensor::empty(shape, like.dtype(), like.device(), op);
  kernels::binary(kind, a, b, out);
  return out;
}

Operand whole(const Tensor& t) { return {t, Broadcast::full}; }
Operand constant(double value) { return {Tensor(), Broadcast::single, value}; }

// The gradient of `side` from its output-shaped gradient: the sum over the rows or columns it
// was broadcast along, shaped as the operand.
Tensor reduce_to(const Operand& side, const Tensor& grad) {
  const Shape& shape = side.tensor.shape();
  const int64_t R = rows_of(grad.shape()), C = last_dim(grad.shape());
  switch (side.how) {
    case Broadcast::full:
      return grad.shape() == shape ? grad : grad.view(shape);
    case Broadcast::row:
      return sum(grad.view({R, C}), 0).view(shape);
    case Broadcast::column:
      return sum(grad.view({R, C}), 1).view(shape);
    case Broadcast::single:
      break;
  }
  return sum(grad).view(shape);
}

// The autograd entry shared by every binary op: a, b are tensors read as they say, or constants.
Tensor binary_op(const char* op, BinaryOp kind, const Operand& a, const Operand& b, const Shape& shape) {
  Tensor out = binary_values(op, kind, a, b, shape);
  const bool need_a = a.tensor.defined() && a.tensor.requires_grad();
  const bool need_b = b.tensor.defined() && b.tensor.requires_grad();
  std::vector<Tensor> inputs;
  for (const Operand* side : {&a, &b})
    if (side->tensor.defined()) inputs.push_back(side->tensor);
  if (!autograd::needs_grad(inputs)) return out;
  // No history in the closure: only detached values.
  Operand a_saved = a, b_saved = b;
  if (a.tensor.defined()) a_saved.tensor = a.tensor.detach();
  if (b.tensor.defined()) b_saved.tensor = b.tensor.detach();
  const Tensor out_saved = kind == BinaryOp::div && need_b ? out.detach() : Tensor();
  return autograd::record(op, out, inputs, [=](const Tensor& g) {
    Tensor grad_a = g, grad_b = g;  // at the output's shape; d b negated after its reduction
    const bool negate_b = kind == BinaryOp::sub || kind == BinaryOp::div;
    if (kind == BinaryOp::mul) {
      if (need_a) grad_a = binary_values(op, BinaryOp::mul, whole(g), b_saved, g.shape());
      if (need_b) grad_b = binary_values(op, BinaryOp::mul, whole(g), a_saved, g.shape());
    } else if (kind == BinaryOp::div) {
      grad_a = binary_values(op, BinaryOp::div, whole(g), b_saved, g.shape());  // g / b
      if (need_b) grad_b = binary_values(op, BinaryOp::mul, whole(grad_a), whole(out_saved), g.shape());
    }
    std::vector<Tensor> grads;
    if (a.tensor.defined()) grads.push_back(need_a ? reduce_to(a_saved, grad_a) : Tensor());
    if (b.tensor.defined()) {
      Tensor db;
      if (need_b) {
        db = reduce_to(b_saved, grad_b);
        if (negate_b) db = binary_values(op, BinaryOp::mul, whole(db), constant(-1.0), db.shape());
      }
      grads.push_back(db);
    }
    return grads;
  });
}

Tensor tensor_op(const char* op, BinaryOp kind, const Tensor& a, const Tensor& b) {
  check_float(op, "a", a);
  check_same(op, "a", a, "b", b);
  const Shape shape = broadcast_shape(op, a, b);
  return binary_op(op, kind, {a, broadcast_of(op, "a", a, shape, a, b)},
                   {b, broadcast_of(op, "b", b, shape, a, b)}, shape);
}

Tensor tensor_constant_op(const char* op, BinaryOp kind, const Tensor& a, double b) {
  check_float(op, "a", a);
  return binary_op(op, kind, whole(a), constant(b), a.shape());
}

Tensor constant_tensor_op(const char* op, BinaryOp kind, double a, const Tensor& b) {
  check_float(op, "b", b);
  return binary_op(op, kind, constant(a), whole(b), b.shape());
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return tensor_op("add", BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return tensor_op("sub", BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return tensor_op("mul", BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return tensor_op("div", BinaryOp::div, a, b); }
Tensor add(const Tensor& a, double b) { return tensor_constant_op("add", BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, double b) { return tensor_constant_op("sub", BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, double b) { return tensor_constant_op("mul", BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, double b) { return tensor_constant_op("div", BinaryOp::div, a, b); }
Tensor add(double a, const Tensor& b) { return constant_tensor_op("add", BinaryOp::add, a, b); }
Tensor sub(double a, const Tensor& b) { return constant_tensor_op("sub", BinaryOp::sub, a, b); }
Tensor mul(double a, const Tensor& b) { return constant_tensor_op("mul", BinaryOp::mul, a, b); }
Tensor div(double a, const Tensor& b) { return constant_tensor_op("div", BinaryOp::div, a, b); }
Tensor neg(const Tensor& x) { return tensor_constant_op("neg", BinaryOp::mul, x, -1.0); }
Tensor scale(const Tensor& x, double s) { return tensor_constant_op("scale", BinaryOp::mul, x, s); }

Tensor add_bias(const Tensor& x, const Tensor& bias) {
  const char* op = "add_bias";
  check_float(op, "x", x);
  check_same(op, "x", x, "bias", bias);
  GAT_CHECK(x.dim() >= 1, "add_bias: 'x' must have at least one dimension, got ", x.describe());
  check_shape(op, "bias", bias, {x.size(-1)});
  return binary_op(op, BinaryOp::add, whole(x), {bias, broadcast_of(op, "bias", bias, x.shape(), x, bias)},
                   x.shape());
}

namespace kernels {
void binary(BinaryOp op, const Operand& a, const Operand& b, Tensor& out) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::binary(op, a, b, out));
  cpu_impl::binary(op, a, b, out);
}
}  // namespace kernels

namespace cpu_impl {

namespace {

// Elements per task of a flat loop (no row or column operand), so that it spreads over threads.
constexpr int64_t kSpan = 4096;

// out (R, C) = f(a, b); kA / kB: the operand varies along a row (column stride 1), else it holds
// one value per row. Compile-time, so that each loop is a plain vectorisable one, with no
// division per task.
template <bool kA, bool kB, class T, class F>
void binary_loop(const Operand& a, const Operand& b, Tensor& out, F f) {
  const int64_t n = out.numel(), C = last_dim(out.shape());
  const T a_constant = static_cast<T>(a.constant), b_constant = static_cast<T>(b.constant);
  const T* pa = a.tensor.defined() ? a.tensor.data<T>() : &a_constant;
  const T* pb = b.tensor.defined() ? b.tensor.data<T>() : &b_constant;
  T* po = out.data<T>();
  // count values from ra, rb (or their first value) into ro
  auto run = [f](const T* ra, const T* rb, T* ro, int64_t count) {
    const T x = *ra, y = *rb;
    for (int64_t k = 0; k < count; ++k) ro[k] = f(kA ? ra[k] : x, kB ? rb[k] : y);
  };
  if (rowwise(a, b)) {  // a task per row
    const int64_t a_row = strides_of(a.how, C).row, b_row = strides_of(b.how, C).row;
    detail::parallel_for(
        n / C, [=](int64_t r) { run(pa + r * a_row, pb + r * b_row, po + r * C, C); }, C);
  } else {  // a task per span of the flat output
    detail::parallel_for((n + kSpan - 1) / kSpan,
                         [=](int64_t span) {
                           const int64_t c0 = span * kSpan;
                           run(pa + (kA ? c0 : 0), pb + (kB ? c0 : 0), po + c0, std::min(kSpan, n - c0));
                         },
                         std::min(kSpan, n));
  }
}

template <class T, class F>
void binary_loop(const Operand& a, const Operand& b, Tensor& out, F f) {
  if (out.numel() == 0) return;
  const bool a_varies = strides_of(a.how, 1).col == 1, b_varies = strides_of(b.how, 1).col == 1;
  if (a_varies && b_varies) return binary_loop<true, true, T>(a, b, out, f);
  if (a_varies) return binary_loop<true, false, T>(a, b, out, f);
  if (b_varies) return binary_loop<false, true, T>(a, b, out, f);
  binary_loop<false, false, T>(a, b, out, f);
}

}  // namespace

void binary(BinaryOp op, const Operand& a, const Operand& b, Tensor& out) {
  dispatch_float(out.dtype(), "binary", [&](auto zero) {
    using T = decltype(zero);
    switch (op) {
      case BinaryOp::add:
        return binary_loop<T>(a, b, out, [](T x, T y) { return x + y; });
      case BinaryOp::sub:
        return binary_loop<T>(a, b, out, [](T x, T y) { return x - y; });
      case BinaryOp::mul:
        return binary_loop<T>(a, b, out, [](T x, T y) { return x * y; });
      case BinaryOp::div:
        return binary_loop<T>(a, b, out, [](T x, T y) { return x / y; });
    }
  });
}

}  // namespace cpu_impl

}  // namespace gat::ops
