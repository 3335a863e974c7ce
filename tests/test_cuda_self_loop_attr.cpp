// ops::self_loop_attr on CUDA against the CPU backend (test_self_loop_attr.cpp checks the CPU one
// against PyG's definition): every fill, f32 and f64, forward and backward, a hub row of 3,000
// edges, an existing loop, nodes without in-edges and bipartite graphs (loops for i < min(Ns, Nd)).
// Skips without a device.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/self_loop_attr.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;
using Fill = ops::SelfLoopFill;

TEST(CudaSelfLoopAttr, MatchesTheCpuForEveryFill) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(11);
  for (const Graph& g : {random_graph(500, 4000, 3000, rng), mixed_graph(), random_bipartite_graph(300, 900, 4000, 600, rng),
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

TEST(CudaSelfLoopAttr, GradientsMatchFiniteDifferences) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(12);
  const Graph graph = mixed_graph().to(Device::cuda), looped = mixed_graph().with_self_loops().to(Device::cuda);
  for (const char* name : {"mean", "max", "mul"}) {
    const Fill fill = Fill::parse(name);
    expect_gradients_match(std::string("self_loop_attr (cuda) ") + name,
                           [&](const std::vector<Tensor>& in) { return ops::self_loop_attr(graph, looped, in[0], fill); },
                           {random_tensor({graph.num_edges(), 2}, rng, 0.5, 1.5, DType::f64, Device::cuda)});
  }
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{4, 9}, {9, 4}}) {  // bipartite: loops for i < min(Ns, Nd)
    const Graph bipartite = random_bipartite_graph(ns, nd, 16, 4, rng);
    const Graph g = bipartite.to(Device::cuda), g_looped = bipartite.with_self_loops().to(Device::cuda);
    expect_gradients_match("self_loop_attr (cuda) bipartite " + std::to_string(ns) + " -> " + std::to_string(nd),
                           [&](const std::vector<Tensor>& in) { return ops::self_loop_attr(g, g_looped, in[0], Fill()); },
                           {random_tensor({g.num_edges(), 2}, rng, 0.5, 1.5, DType::f64, Device::cuda)});
  }
}
