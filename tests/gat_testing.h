// Helpers shared by the tests (the GAT layer and trainer tests, the ops a custom network needs).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gat/datasets/generator.h"
#include "gat/framework/graph.h"
#include "gat/framework/tensor.h"
#include "gradcheck.h"
#include "gat/layers/gat_conv.h"

namespace gat::testing {

// A small directed graph with one explicit self loop (2 -> 2) and a node (0) that only sends.
inline Graph small_graph(int64_t n, std::mt19937_64& rng) {
  std::vector<int32_t> src, dst;
  std::uniform_int_distribution<int32_t> node(0, static_cast<int32_t>(n - 1));
  for (int k = 0; k < 3 * n; ++k) {
    const int32_t s = node(rng), d = node(rng);
    if (d == 0) continue;
    src.push_back(s);
    dst.push_back(d);
  }
  src.push_back(2);
  dst.push_back(2);
  return Graph::from_edges(n, src, dst);
}

inline GATConvOptions conv_options(int64_t in, int64_t out, int64_t heads, bool concat,
                                   bool residual, double dropout, DType dtype = DType::f64) {
  GATConvOptions o;
  o.in_channels = in;
  o.out_channels = out;
  o.heads = heads;
  o.concat = concat;
  o.residual = residual;
  o.dropout = dropout;
  o.dtype = dtype;
  return o;
}

// The parameter slots of a GATConv in a fixed order, so a gradient check can substitute them.
inline std::vector<Tensor*> slots_of(GATConv& conv) {
  std::vector<Tensor*> slots{&conv.lin->weight, &conv.att_src, &conv.att_dst};
  if (conv.bias.defined()) slots.push_back(&conv.bias);
  if (conv.res) slots.push_back(&conv.res->weight);
  return slots;
}

// Inputs of a gradient check: x, then a copy of the current value of every slot.
inline std::vector<Tensor> gradcheck_inputs(const Tensor& x, const std::vector<Tensor*>& slots) {
  std::vector<Tensor> inputs{x};
  for (Tensor* s : slots) inputs.push_back(s->clone());
  return inputs;
}

// f(inputs) for a gradient check over slots: puts inputs[1..] into the slots, then calls run(x).
template <class Run>
TensorFn with_slots(const std::vector<Tensor*>& slots, Run run) {
  return [slots, run](const std::vector<Tensor>& in) {
    for (size_t i = 0; i < slots.size(); ++i) *slots[i] = in[i + 1];
    return run(in[0]);
  };
}

// A generated 200-node, 3-class, 12-feature dataset (10 training nodes per class, 50 validation,
// 100 test): a GAT trains on it in milliseconds per epoch.
inline Dataset small_training_dataset() {
  GeneratorOptions go;
  go.num_nodes = 200;
  go.num_classes = 3;
  go.num_features = 12;
  go.train_per_class = 10;
  go.val_size = 50;
  go.test_size = 100;
  go.seed = 4;
  return generate_sbm(go);
}

// max_i |got_i - want_i| / max_i |want_i|, on the host in f64 (any device, f32 or f64); a NaN
// or infinity gives an infinite error.
inline double rel_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  const std::vector<double> g = got.to(Device::cpu).to(DType::f64).to_vector<double>();
  const std::vector<double> w = want.to(Device::cpu).to(DType::f64).to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t k = 0; k < w.size() && k < g.size(); ++k) {
    if (!std::isfinite(g[k]) || !std::isfinite(w[k])) return INFINITY;
    scale = std::max(scale, std::abs(w[k]));
    diff = std::max(diff, std::abs(g[k] - w[k]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Runs f, expects a gat::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a gat::Error mentioning " << parts.front();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

}  // namespace gat::testing
