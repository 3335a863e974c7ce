// ops::self_loop_attr (the attributes of graph.with_self_loops()'s edges, PyG's fill_value) against
// a reference written from PyG's definition, its gradients on each device, and its errors; the
// CUDA backend against this CPU one: every fill, f32 and f64, forward and backward, a hub row of
// 3,000 edges, an existing loop, nodes without in-edges and bipartite graphs (loops for
// i < min(Ns, Nd)).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;
using Fill = ops::SelfLoopFill;

namespace {

std::vector<Fill> every_fill() {
  return {Fill::parse("mean"), Fill::parse("add"), Fill::parse("min"),
          Fill::parse("max"),  Fill::parse("mul"), Fill::constant_value(2.5)};
}

// PyG's recipe on edge lists: drop the loops, then each node's loop attribute = the reduction of
// its remaining in-edges' rows (scatter by destination), in looped's edge order.
std::vector<double> reference(const Graph& graph, const Graph& looped, const std::vector<double>& attr,
                              int64_t D, const Fill& fill) {
  const std::vector<int32_t> src = graph.sources(), dst = graph.destinations();
  const std::vector<int32_t> lsrc = looped.sources(), ldst = looped.destinations();
  std::vector<double> out;
  for (size_t e = 0; e < lsrc.size(); ++e) {
    for (int64_t d = 0; d < D; ++d) {
      std::vector<double> in;  // the attributes reduced into this loop, or the edge's own
      for (size_t k = 0; k < src.size(); ++k)
        if (dst[k] == ldst[e] && src[k] != dst[k] && (lsrc[e] == ldst[e] || src[k] == lsrc[e]))
          in.push_back(attr[k * D + d]);
      if (lsrc[e] != ldst[e]) {
        EXPECT_EQ(in.size(), 1u);
        out.push_back(in.at(0));
        continue;
      }
      double v = 0;
      switch (fill.kind) {
        case Fill::Kind::mean:
          for (double a : in) v += a;
          v = in.empty() ? 0.0 : v / static_cast<double>(in.size());
          break;
        case Fill::Kind::add:
          for (double a : in) v += a;
          break;
        case Fill::Kind::min:
          v = in.empty() ? 0.0 : *std::min_element(in.begin(), in.end());
          break;
        case Fill::Kind::max:
          v = in.empty() ? 0.0 : *std::max_element(in.begin(), in.end());
          break;
        case Fill::Kind::mul:
          v = 1;
          for (double a : in) v *= a;
          break;
        case Fill::Kind::constant:
          v = fill.value;
          break;
      }
      out.push_back(v);
    }
  }
  return out;
}

}  // namespace

TEST(SelfLoopAttr, MatchesPygsDefinitionForEveryFill) {
  std::mt19937_64 rng(3);
  // mixed_graph: an existing loop (4), nodes without in-edges (0, 6, 7), a row of six edges.
  // Bipartite (6 -> 13, 13 -> 6): loops only for i < min(Ns, Nd), (i, i) pairs among the edges.
  for (const Graph& graph :
       {mixed_graph(), small_graph(9, rng), mixed_graph().with_self_loops(),
        random_bipartite_graph(6, 13, 40, 5, rng), random_bipartite_graph(13, 6, 40, 5, rng)}) {
    const Graph looped = graph.with_self_loops();
    const int64_t D = 3;
    for (DType dtype : {DType::f64, DType::f32}) {
      const Tensor attr = random_tensor({graph.num_edges(), D}, rng, -2.0, 2.0, dtype);
      for (const Fill& fill : every_fill()) {
        const Tensor got = ops::self_loop_attr(graph, looped, attr, fill);
        const std::vector<double> want = reference(graph, looped, host_f64(attr), D, fill);
        expect_close(got, Tensor::from_vector(want, {looped.num_edges(), D}).to(dtype), "fill " + fill.name(),
                     dtype == DType::f32 ? 1e-6 : 1e-14);
      }
    }
  }
}

class SelfLoopAttrOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(SelfLoopAttrOnDevice);

TEST_P(SelfLoopAttrOnDevice, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(5);
  for (const Graph& on_host : {mixed_graph(), small_graph(9, rng), random_bipartite_graph(4, 9, 16, 4, rng),
                               random_bipartite_graph(9, 4, 16, 4, rng)}) {
    const Graph graph = on_host.to(device()), looped = on_host.with_self_loops().to(device());
    for (const Fill& fill : every_fill()) {
      Tensor attr = random_f64({graph.num_edges(), 2}, rng, 0.5, 1.5);
      if (fill.kind == Fill::Kind::mul) {  // a zero in a row of six: d product / d others = 0 there
        std::vector<double> v = host_f64(attr);
        v[2 * 2] = 0.0;  // edge 2 (into node 2), feature 0
        attr = Tensor::from_vector(v, attr.shape()).to(device());
      }
      expect_gradients_match(
          "self_loop_attr " + fill.name(),
          [&](const std::vector<Tensor>& in) { return ops::self_loop_attr(graph, looped, in[0], fill); },
          {attr});
    }
  }
}

TEST(SelfLoopAttr, TiesShareTheMaxsGradientAndExistingLoopsGetNone) {
  // Node 2 receives 0 -> 2 and 1 -> 2 with the same attribute, and has a loop of its own.
  const Graph graph = Graph::from_edges(3, {0, 1, 2}, {2, 2, 2});
  const Graph looped = graph.with_self_loops();
  Tensor attr = Tensor::from_vector(std::vector<double>{4.0, 4.0, 9.0}, {3, 1});
  attr.set_requires_grad(true);
  // looped's edges: 0->0, 1->1, 0->2, 1->2, 2->2; the loops of 0 and 1 have no in-edges.
  const Tensor out = ops::self_loop_attr(graph, looped, attr, Fill::parse("max"));  // (5, 1)
  EXPECT_EQ(host_f64(out), (std::vector<double>{0.0, 0.0, 4.0, 4.0, 4.0}));
  // A gradient of its own for every edge: 0 -> 2 and 1 -> 2 get theirs and half of 2 -> 2's.
  out.backward(Tensor::from_vector(std::vector<double>{1, 2, 3, 5, 7}, {5, 1}));
  EXPECT_EQ(host_f64(attr.grad()), (std::vector<double>{3 + 3.5, 5 + 3.5, 0.0}));
}

TEST(SelfLoopAttr, BipartiteDestinationsBeyondTheSourcesGetNoLoop) {
  // 2 sources, 4 destinations: loops for 0 and 1 only; edges 0->0 (an existing loop), 0->1, 1->2,
  // 1->3 (the graph's edge order).
  const Graph graph = Graph::from_edges(2, 4, {0, 0, 1, 1}, {0, 1, 2, 3});
  const Graph looped = graph.with_self_loops();  // 0->0, 0->1, 1->1, 1->2, 1->3
  ASSERT_EQ(looped.num_edges(), 5);
  Tensor attr = Tensor::from_vector(std::vector<double>{3.0, 5.0, 7.0, 11.0}, {4, 1});
  attr.set_requires_grad(true);
  const Tensor out = ops::self_loop_attr(graph, looped, attr, Fill::parse("mean"));  // (5, 1)
  EXPECT_EQ(host_f64(out), (std::vector<double>{0.0, 5.0, 5.0, 7.0, 11.0}));
  // A gradient of its own for every edge: 0 -> 1 gets its own and 1's loop's.
  out.backward(Tensor::from_vector(std::vector<double>{1, 2, 3, 5, 7}, {5, 1}));
  EXPECT_EQ(host_f64(attr.grad()), (std::vector<double>{0.0, 2 + 3, 5, 7}));
  // 4 sources, 2 destinations: both get their loop.
  const Graph wide = Graph::from_edges(4, 2, {3, 2, 3}, {0, 0, 1});  // 2->0, 3->0, 3->1
  const Tensor wide_attr = Tensor::from_vector(std::vector<double>{2.0, 4.0, 6.0}, {3, 1});
  const Tensor wide_out = ops::self_loop_attr(wide, wide.with_self_loops(), wide_attr,
                                              Fill::constant_value(-1.0));  // 0->0, 2->0, 3->0, 1->1, 3->1
  EXPECT_EQ(host_f64(wide_out), (std::vector<double>{-1.0, 2.0, 4.0, -1.0, 6.0}));
}

TEST(SelfLoopAttr, ParseAcceptsPygsNamesAndNumbers) {
  EXPECT_EQ(Fill::parse("sum"), Fill::parse("add"));
  EXPECT_EQ(Fill::parse("mean").kind, Fill::Kind::mean);
  EXPECT_EQ(Fill::parse("-1.5"), Fill::constant_value(-1.5));
  for (const Fill& fill : every_fill()) EXPECT_EQ(Fill::parse(fill.name()), fill) << fill.name();
  for (const char* bad : {"", "median", "1.5x", "nan", "inf"})
    expect_error([&] { Fill::parse(bad); },
                 {"fill_value '", "mean, add, sum, min, max, mul or a finite number"});
}

TEST(SelfLoopAttr, RejectsMismatchedInputs) {
  const Graph graph = mixed_graph(), looped = graph.with_self_loops();
  const Fill fill;
  expect_error(
      [&] {
        ops::self_loop_attr(graph, looped, Tensor::zeros({graph.num_edges() + 1, 2}, DType::f32), fill);
      },
      {"self_loop_attr", "one row per edge of the graph (13 edges)"});
  expect_error(
      [&] {
        ops::self_loop_attr(graph, graph, Tensor::zeros({graph.num_edges(), 2}, DType::f32), fill);
      },
      {"self_loop_attr", "is not graph.with_self_loops()"});
  // A bipartite graph's looped graph has its sides: not one of as many nodes on one set.
  const Graph bipartite = Graph::from_edges(3, 5, {0, 1, 2}, {4, 4, 0});
  const Graph other = Graph::from_edges(5, 5, {0, 1, 2}, {4, 4, 0}).with_self_loops();
  expect_error(
      [&] {
        ops::self_loop_attr(bipartite, other, Tensor::zeros({3, 2}, DType::f32), fill);
      },
      {"self_loop_attr", "(5 sources, 5 destinations",
       "is not graph.with_self_loops() (3 sources, 5 destinations, 6 edges"});
  expect_error(
      [&] {
        ops::self_loop_attr(graph, looped, Tensor::zeros({graph.num_edges(), 2}, DType::i32), fill);
      },
      {"self_loop_attr", "edge_attr"});
  expect_error(
      [&] { ops::self_loop_attr(graph, looped, Tensor::zeros({graph.num_edges()}, DType::f32), fill); },
      {"self_loop_attr", "edge_attr"});
}

using CudaSelfLoopAttr = CudaVsCpuTest;

TEST_F(CudaSelfLoopAttr, MatchesTheCpuForEveryFill) {
  std::mt19937_64 rng(11);
  for (const Graph& g :
       {random_graph(500, 4000, 3000, rng), mixed_graph(), random_bipartite_graph(300, 900, 4000, 600, rng),
        random_bipartite_graph(900, 300, 4000, 600, rng)}) {
    const Graph looped = g.with_self_loops();
    const Graph g_cuda = g.to(Device::cuda), looped_cuda = looped.to(Device::cuda);
    for (DType dtype : {DType::f32, DType::f64}) {
      const double tol = dtype == DType::f32 ? 1e-6 : 1e-13;
      const Tensor attr = random_tensor({g.num_edges(), 5}, rng, 0.9, 1.1, dtype);
      const Tensor grad_out = random_tensor({looped.num_edges(), 5}, rng, -1.0, 1.0, dtype);
      for (const char* name : {"mean", "add", "min", "max", "mul", "-0.5"}) {
        const Fill fill = Fill::parse(name);
        Tensor out_cpu = Tensor::empty({looped.num_edges(), 5}, dtype);
        Tensor out_cuda = Tensor::empty({looped.num_edges(), 5}, dtype, Device::cuda);
        ops::kernels::self_loop_attr_forward(g, looped, attr, fill, out_cpu);
        ops::kernels::self_loop_attr_forward(g_cuda, looped_cuda, attr.to(Device::cuda), fill, out_cuda);
        expect_close(out_cuda, out_cpu, std::string("forward ") + name, tol);
        Tensor grad_cpu = Tensor::empty(attr.shape(), dtype);
        Tensor grad_cuda = Tensor::empty(attr.shape(), dtype, Device::cuda);
        ops::kernels::self_loop_attr_backward(g, looped, attr, fill, grad_out, grad_cpu);
        ops::kernels::self_loop_attr_backward(g_cuda, looped_cuda, attr.to(Device::cuda), fill,
                                              grad_out.to(Device::cuda), grad_cuda);
        expect_close(grad_cuda, grad_cpu, std::string("backward ") + name, tol);
      }
    }
  }
}
