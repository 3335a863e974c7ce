// The per-(destination, feature) work of self_loop_attr (self_loop_attr.h), shared by the CPU
// loop and the CUDA kernel so both devices run the same arithmetic in the same order.
#pragma once

#include <cstdint>

#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat::ops::self_loop_rows {

using Kind = SelfLoopFill::Kind;

// One destination row and feature: where its edges are, in graph and in looped.
struct Row {
  int32_t node;               // i
  bool gets_loop;             // looped has (i, i): i < min(Ns, Nd)
  int64_t begin, end;         // graph's edges into i: [begin, end)
  int64_t looped_begin;       // looped's first edge into i
  const int32_t* src;         // (E,) graph's sources
  int64_t features, feature;  // D, d
};

// The reduction of one row's non-loop attributes (one feature), in edge order.
template <class T>
struct Reduction {
  int32_t count = 0;  // edges (j, i), j != i
  T sum = T(0);
  T extreme = T(0);  // min or max
  int32_t ties = 0;  // edges equal to extreme
  T product_nonzero = T(1);
  int32_t zeros = 0;

  GAT_HOST_DEVICE void add(Kind kind, T v) {
    ++count;
    sum += v;
    if (kind == Kind::min || kind == Kind::max) {
      const bool better = kind == Kind::max ? v > extreme : v < extreme;
      if (count == 1 || better) {
        extreme = v;
        ties = 1;
      } else if (v == extreme) {
        ++ties;
      }
    }
    if (v == T(0))
      ++zeros;
    else
      product_nonzero *= v;
  }
  // The loop's attribute.
  GAT_HOST_DEVICE T value(Kind kind, T constant) const {
    switch (kind) {
      case Kind::mean:
        return count > 0 ? sum / T(count) : T(0);
      case Kind::add:
        return sum;
      case Kind::min:
      case Kind::max:
        return count > 0 ? extreme : T(0);
      case Kind::mul:
        return zeros > 0 ? T(0) : product_nonzero;
      default:
        return constant;
    }
  }
  // d value / d v for one of the row's attributes v.
  GAT_HOST_DEVICE T derivative(Kind kind, T v) const {
    switch (kind) {
      case Kind::mean:
        return T(1) / T(count);
      case Kind::add:
        return T(1);
      case Kind::min:
      case Kind::max:
        return v == extreme ? T(1) / T(ties) : T(0);
      case Kind::mul:
        if (zeros == 0) return product_nonzero / v;
        return zeros == 1 && v == T(0) ? product_nonzero : T(0);
      default:
        return T(0);
    }
  }
};

// Row's non-loop attributes reduced, and the position in looped of i's new loop: after the
// sources below i (a row without a loop, i >= Ns, has all its sources below i: past its edges).
template <class T>
GAT_HOST_DEVICE Reduction<T> reduce_row(const Row& r, Kind kind, const T* attr, int64_t& loop_at) {
  Reduction<T> acc;
  int64_t below = 0;
  for (int64_t k = r.begin; k < r.end; ++k) {
    const int32_t s = r.src[k];
    if (s == r.node) continue;
    below += s < r.node;
    acc.add(kind, attr[k * r.features + r.feature]);
  }
  loop_at = r.looped_begin + below;
  return acc;
}

// out (E', D): the row's attributes at their places in looped, then the loop's (if it gets one).
template <class T>
GAT_HOST_DEVICE void forward_row(const Row& r, Kind kind, T constant, const T* attr, T* out) {
  int64_t loop_at = 0;
  const Reduction<T> acc = reduce_row(r, kind, attr, loop_at);
  int64_t o = r.looped_begin;
  for (int64_t k = r.begin; k < r.end; ++k) {
    const int32_t s = r.src[k];
    if (s == r.node) continue;
    if (o == loop_at) ++o;
    out[o++ * r.features + r.feature] = attr[k * r.features + r.feature];
  }
  if (r.gets_loop) out[loop_at * r.features + r.feature] = acc.value(kind, constant);
}

// grad_attr (E, D) of the row's edges from grad_out (E', D); existing loops get 0.
template <class T>
GAT_HOST_DEVICE void backward_row(const Row& r, Kind kind, const T* attr, const T* grad_out, T* grad_attr) {
  int64_t loop_at = 0;
  const Reduction<T> acc = reduce_row(r, kind, attr, loop_at);
  const T grad_loop = r.gets_loop ? grad_out[loop_at * r.features + r.feature] : T(0);
  int64_t o = r.looped_begin;
  for (int64_t k = r.begin; k < r.end; ++k) {
    const int64_t at = k * r.features + r.feature;
    if (r.src[k] == r.node) {
      grad_attr[at] = T(0);
      continue;
    }
    if (o == loop_at) ++o;
    grad_attr[at] = grad_out[o++ * r.features + r.feature] +
                    (r.gets_loop ? grad_loop * acc.derivative(kind, attr[at]) : T(0));
  }
}

}  // namespace gat::ops::self_loop_rows
