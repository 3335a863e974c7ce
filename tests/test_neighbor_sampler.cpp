// NeighborSampler (framework/neighbor_sampler.h) against a brute-force reference: every edge of a
// block is an edge of the graph between the nodes its local ids name, each node keeps the edges
// its fanout says, draws without replacement are distinct, the blocks chain (a layer's
// destinations are the first sources, and the next layer's sources), and the draws are uniform.
// The same seed and batch key give the same blocks bit for bit for one thread or two, and on the
// CPU and CUDA (the brute-force checks run on both devices); the boundaries: a fanout above the degree, -1,
// 0, nodes without in-edges, duplicate edges, one seed.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "gat/datasets/generator.h"
#include "gat/framework/neighbor_sampler.h"
#include "gat/framework/ops/block_graph.h"
#include "gat/framework/ops/sample_neighbors.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

// Checks one batch against the graph, the seeds and the options, edge by edge.
void expect_valid_batch(const Graph& graph, const SampledBatch& batch, const std::vector<int32_t>& seeds,
                        const NeighborSamplerOptions& options) {
  const std::vector<int32_t> src = graph.sources(), dst = graph.destinations();
  const std::vector<int32_t> degree = graph.in_degrees();
  const size_t layers = options.fanouts.size();
  ASSERT_EQ(batch.blocks.size(), layers);
  ASSERT_GE(batch.blocks.back().src_nodes.size(), seeds.size());
  EXPECT_EQ(batch.blocks.back().num_dst(), static_cast<int64_t>(seeds.size()));
  EXPECT_TRUE(std::equal(seeds.begin(), seeds.end(), batch.blocks.back().src_nodes.begin()))
      << "the last block's destinations are the seeds, in order";
  for (size_t l = 0; l < layers; ++l) {
    const SampledBlock& block = batch.blocks[l];
    const int64_t fanout = options.fanouts[layers - 1 - l];  // PyG's order: the seeds' hop first
    block.graph.validate();
    ASSERT_EQ(block.graph.num_src_nodes(), static_cast<int64_t>(block.src_nodes.size()));
    ASSERT_EQ(block.edge_ids.size(), static_cast<size_t>(block.graph.num_edges()));
    EXPECT_EQ(std::set<int32_t>(block.src_nodes.begin(), block.src_nodes.end()).size(),
              block.src_nodes.size())
        << "block " << l << ": a node has two local ids";
    if (l + 1 < layers) {
      const std::vector<int32_t>& next = batch.blocks[l + 1].src_nodes;
      ASSERT_EQ(block.num_dst(), static_cast<int64_t>(next.size())) << "block " << l;
      EXPECT_TRUE(std::equal(next.begin(), next.end(), block.src_nodes.begin()))
          << "block " << l << "'s destinations are block " << l + 1 << "'s sources";
    }
    const std::vector<int32_t> bsrc = block.graph.sources(), bdst = block.graph.destinations();
    std::vector<char> named(block.src_nodes.size(), 0);
    for (int64_t i = 0; i < block.num_dst(); ++i) named[static_cast<size_t>(i)] = 1;
    std::map<int32_t, std::vector<int32_t>> ids_of;  // local destination -> its edges' ids
    for (size_t e = 0; e < bsrc.size(); ++e) {
      const int32_t id = block.edge_ids[e];
      ASSERT_GE(id, 0);
      ASSERT_LT(id, graph.num_edges());
      EXPECT_EQ(src[static_cast<size_t>(id)], block.src_nodes[static_cast<size_t>(bsrc[e])])
          << "block " << l << " edge " << e << ": its source is not the graph edge's";
      EXPECT_EQ(dst[static_cast<size_t>(id)], block.src_nodes[static_cast<size_t>(bdst[e])])
          << "block " << l << " edge " << e << ": its destination is not the graph edge's";
      named[static_cast<size_t>(bsrc[e])] = 1;
      ids_of[bdst[e]].push_back(id);
    }
    EXPECT_TRUE(std::all_of(named.begin(), named.end(), [](char c) { return c != 0; }))
        << "block " << l << ": a source that no edge names";
    for (int64_t i = 0; i < block.num_dst(); ++i) {
      const int64_t d = degree[static_cast<size_t>(block.src_nodes[static_cast<size_t>(i)])];
      const int64_t want = fanout < 0 ? d : options.replace ? (d > 0 ? fanout : 0) : std::min(fanout, d);
      const std::vector<int32_t>& ids = ids_of[static_cast<int32_t>(i)];
      EXPECT_EQ(static_cast<int64_t>(ids.size()), want) << "block " << l << " destination " << i;
      if (!options.replace) {
        EXPECT_EQ(std::set<int32_t>(ids.begin(), ids.end()).size(), ids.size())
            << "block " << l << " destination " << i << ": an edge drawn twice without replacement";
      }
    }
  }
}

bool same_batch(const SampledBatch& a, const SampledBatch& b) {
  if (a.blocks.size() != b.blocks.size()) return false;
  for (size_t l = 0; l < a.blocks.size(); ++l) {
    const SampledBlock &x = a.blocks[l], &y = b.blocks[l];
    if (x.src_nodes != y.src_nodes || x.edge_ids != y.edge_ids ||
        !bitwise_equal(x.graph.row_ptr(), y.graph.row_ptr()) ||
        !bitwise_equal(x.graph.edge_src(), y.graph.edge_src()))
      return false;
  }
  return true;
}

Graph random_graph(int64_t nodes, double degree, uint64_t seed) {
  GeneratorOptions o;
  o.num_nodes = nodes;
  o.avg_degree = degree;
  o.seed = seed;
  o.train_per_class = 1;
  o.val_size = 1;
  o.test_size = 1;
  return generate_sbm(o).graph;
}

std::vector<int32_t> first_nodes(int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

// The brute-force checks run on each device (the sampler's CSR and draws there).
class NeighborSamplerOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(NeighborSamplerOnDevice);

TEST_P(NeighborSamplerOnDevice, BlocksMatchTheBruteForceReference) {
  const Graph graph = random_graph(600, 12, 3);
  const std::vector<int32_t> seeds = {17, 3, 599, 250, 42, 0, 311};
  for (bool replace : {false, true})
    for (const std::vector<int64_t>& fanouts :
         {std::vector<int64_t>{5, 3}, {25, 10}, {-1, 4}, {2, 2, 2}, {1}}) {
      const NeighborSamplerOptions options{fanouts, replace, 11};
      const NeighborSampler sampler(graph, options, device());
      for (uint64_t key : {0, 1, 977}) {
        SCOPED_TRACE(::testing::Message()
                     << "replace " << replace << " fanouts " << fanouts.size() << " key " << key);
        expect_valid_batch(graph, sampler.sample(seeds, key), seeds, options);
      }
    }
}

TEST_P(NeighborSamplerOnDevice, FanoutsAtAndBeyondTheDegreeNodesWithoutInEdgesAndDuplicateEdges) {
  // Node 0 has in-edges from 1, 2, 3 and 2 again (a duplicate kept); node 4 has none; node 5
  // one; node 3 a self loop.
  GraphBuildOptions keep;
  keep.remove_duplicates = false;
  const Graph graph = Graph::from_edges(6, {1, 2, 3, 2, 0, 3, 1}, {0, 0, 0, 0, 5, 3, 3}, keep);
  ASSERT_EQ(graph.num_edges(), 7);
  for (bool replace : {false, true})
    for (int64_t fanout : {-1, 0, 1, 3, 4, 100}) {
      const NeighborSamplerOptions options{{fanout}, replace, 5};
      SCOPED_TRACE(::testing::Message() << "replace " << replace << " fanout " << fanout);
      const SampledBatch batch = NeighborSampler(graph, options, device()).sample({0, 4, 5, 3}, 2);
      expect_valid_batch(graph, batch, {0, 4, 5, 3}, options);
      if (fanout >= 4 && !replace) {  // all four in-edges of node 0, the duplicate twice
        const std::vector<int32_t>& ids = batch.blocks[0].edge_ids;
        EXPECT_EQ(
            std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return graph.destinations()[id] == 0; }),
            4);
      }
    }
}

TEST_P(NeighborSamplerOnDevice, OneSeedAndAllNodes) {
  const Graph graph = random_graph(300, 6, 1);
  const NeighborSamplerOptions options{{-1, -1}, false, 0};
  const NeighborSampler sampler(graph, options, device());
  expect_valid_batch(graph, sampler.sample({123}, 0), {123}, options);
  // All nodes in order with every in-edge: each block is the graph itself, local ids = global.
  const std::vector<int32_t> all = first_nodes(300);
  const SampledBatch batch = sampler.sample(all, 0);
  expect_valid_batch(graph, batch, all, options);
  for (const SampledBlock& block : batch.blocks) {
    EXPECT_EQ(block.src_nodes, all);
    EXPECT_TRUE(bitwise_equal(block.graph.row_ptr(), graph.row_ptr()));
    EXPECT_TRUE(bitwise_equal(block.graph.edge_src(), graph.edge_src()));
    EXPECT_EQ(block.edge_ids, first_nodes(static_cast<int32_t>(graph.num_edges())));
  }
}

// A ternary tree whose in-edges come from the children (node v from 3v + 1, 3v + 2, 3v + 3): with
// fanout 3 every inner node keeps exactly 3 edges, so a hop's edges fill the buffers sized by
// the bound Nd x fanout exactly, and the seed's hop names 3 new sources each (Ns = Nd + Es, the
// source buffer's bound). Every node with fanout 100 keeps every edge: the graph's E, the bound
// without replacement. The leaves have no in-edges: with fanout -1 or 3, a batch of leaves has no
// edge at all.
TEST_P(NeighborSamplerOnDevice, HopsThatFillTheBoundExactlyAndNodesWithoutInEdges) {
  std::vector<int32_t> src, dst;
  for (int32_t v = 0; v < 13; ++v)
    for (int32_t c = 3 * v + 1; c <= 3 * v + 3; ++c) src.push_back(c), dst.push_back(v);
  const Graph tree = Graph::from_edges(40, src, dst);
  const std::vector<int32_t> leaves = {39, 13, 27};
  for (bool replace : {false, true})
    for (const std::vector<int64_t>& fanouts : {std::vector<int64_t>{3, 3, 3}, {-1, -1}, {3, -1}}) {
      SCOPED_TRACE(::testing::Message() << "replace " << replace << " fanouts from " << fanouts[0]);
      const NeighborSamplerOptions options{fanouts, replace, 8};
      const NeighborSampler sampler(tree, options, device()), cpu(tree, options);
      const SampledBatch batch = sampler.sample({0}, 4);
      expect_valid_batch(tree, batch, {0}, options);
      EXPECT_TRUE(same_batch(batch, cpu.sample({0}, 4)));
      const SampledBlock& seed_hop = batch.blocks.back();
      ASSERT_EQ(seed_hop.graph.num_edges(), 3);
      if (!replace) {
        EXPECT_EQ(seed_hop.src_nodes, (std::vector<int32_t>{0, 1, 2, 3}));
        EXPECT_EQ(batch.blocks[batch.blocks.size() - 2].graph.num_edges(), 12);  // 4 nodes x 3
      }
      const SampledBatch none = sampler.sample(leaves, 2);
      expect_valid_batch(tree, none, leaves, options);
      EXPECT_TRUE(same_batch(none, cpu.sample(leaves, 2)));
      for (const SampledBlock& block : none.blocks) {
        EXPECT_EQ(block.graph.num_edges(), 0);
        EXPECT_EQ(block.src_nodes, leaves);
      }
    }
  const std::vector<int32_t> all = first_nodes(40);
  for (bool replace : {false, true}) {
    const NeighborSamplerOptions every_edge{{100}, replace, 8};
    const SampledBatch every = NeighborSampler(tree, every_edge, device()).sample(all, 1);
    expect_valid_batch(tree, every, all, every_edge);
    EXPECT_TRUE(same_batch(every, NeighborSampler(tree, every_edge).sample(all, 1)));
    EXPECT_EQ(every.blocks[0].graph.num_edges(), replace ? 1300 : 39)
        << "replace " << replace;  // 13 inner nodes
  }
}

// ops::block_graph builds, where a layer's arrays are, the Graph the host builds from them
// (Graph::from_csr, then with_self_loops): every array and count, bit for bit. The layers: a
// graph's self loop and duplicate edge in a row, rows without edges, a hub's rows cut into chunks
// both ways, no destination at all, and a large layer.
TEST_P(NeighborSamplerOnDevice, BlockGraphIsTheHostsLoopedBlock) {
  GraphBuildOptions keep;
  keep.remove_duplicates = false;
  const Graph small = Graph::from_edges(6, {1, 2, 3, 2, 0, 3, 1}, {0, 0, 0, 0, 5, 3, 3}, keep);
  std::mt19937_64 rng(4);
  const Graph hubs = hubs_graph(3000, 20000, 3, 300, rng), large = random_graph(30000, 20, 7);
  struct Case {
    const Graph* graph;
    std::vector<int32_t> seeds;
    std::vector<int64_t> fanouts;
  };
  const std::vector<int32_t> some_large = shuffle_nodes(first_nodes(30000), 1, 0);
  const std::vector<Case> cases = {
      {&small, {0, 4, 5, 3}, {-1, 2}},
      {&small, {}, {2}},
      {&hubs, {0, 1000, 2000, 5, 77}, {-1, -1}},
      {&hubs, first_nodes(3000), {4}},
      {&large, std::vector<int32_t>(some_large.begin(), some_large.begin() + 6000), {25, 10}}};
  for (const Case& c : cases) {
    const NeighborSampler sampler(*c.graph, {c.fanouts, false, 1}, device());
    const std::vector<ops::SampledLayer> layers = sampler.sample_layers(c.seeds, 9);
    for (size_t l = 0; l < layers.size(); ++l) {
      SCOPED_TRACE(::testing::Message()
                   << c.graph->num_nodes() << " nodes, " << c.seeds.size() << " seeds, layer " << l);
      const ops::SampledLayer& layer = layers[l];
      const Graph want = Graph::from_csr(layer.src_nodes.numel(), layer.row_ptr.to_vector<int32_t>(),
                                         layer.col.to_vector<int32_t>())
                             .with_self_loops();
      const Graph got = ops::block_graph(layer.row_ptr, layer.col, layer.src_nodes.numel());
      ASSERT_EQ(got.device(), device());
      EXPECT_EQ(graph_difference(got, want), "");
      got.validate();
      if (c.graph == &hubs && c.fanouts[0] == -1 && l == 0) {  // the hubs' 100 out-edges into 1..300
        EXPECT_GT(got.num_row_chunks(), 0) << "no row was cut";
        EXPECT_GT(got.num_t_row_chunks(), 0) << "no transpose row was cut";
      }
    }
  }
}

// A graph of i64 offsets is sampled through them narrowed (its edge ids fit 32 bits): the same
// blocks and block graphs, bit for bit, as the graph of i32 offsets gives, on either device.
TEST_P(NeighborSamplerOnDevice, AWideGraphGivesTheBlocksOfTheNarrowOne) {
  const Graph narrow = random_graph(600, 12, 3), wide = with_wide_offsets(narrow);
  ASSERT_EQ(wide.offset_dtype(), DType::i64);
  const std::vector<int32_t> seeds = {17, 3, 599, 250, 42, 0, 311};
  const NeighborSamplerOptions options{{5, 3}, false, 11};
  const NeighborSampler from_narrow(narrow, options, device()), from_wide(wide, options, device());
  const SampledBatch a = from_narrow.sample(seeds, 2), b = from_wide.sample(seeds, 2);
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t l = 0; l < a.blocks.size(); ++l) {
    EXPECT_EQ(a.blocks[l].src_nodes, b.blocks[l].src_nodes) << "block " << l;
    EXPECT_EQ(a.blocks[l].edge_ids, b.blocks[l].edge_ids) << "block " << l;
    EXPECT_EQ(graph_difference(a.blocks[l].graph, b.blocks[l].graph), "") << "block " << l;
  }
  const std::vector<ops::SampledLayer> la = from_narrow.sample_layers(seeds, 5),
                                       lb = from_wide.sample_layers(seeds, 5);
  ASSERT_EQ(la.size(), lb.size());
  for (size_t l = 0; l < la.size(); ++l) {
    const Graph ga = ops::block_graph(la[l].row_ptr, la[l].col, la[l].src_nodes.numel());
    const Graph gb = ops::block_graph(lb[l].row_ptr, lb[l].col, lb[l].src_nodes.numel());
    EXPECT_EQ(graph_difference(ga, gb), "") << "layer " << l;
  }
}

TEST(NeighborSampler, SameSeedSameBlocksForAnyThreadCount) {
  // Large enough that every parallel loop forks (blocks of more than 2^16 edges).
  const Graph graph = random_graph(30000, 20, 7);
  const std::vector<int32_t> seeds = shuffle_nodes(first_nodes(30000), 1, 0);
  const std::vector<int32_t> batch_seeds(seeds.begin(), seeds.begin() + 6000);
  const int threads = omp_get_max_threads();
  for (bool replace : {false, true}) {
    const NeighborSampler sampler(graph, {{25, 10}, replace, 99});
    omp_set_num_threads(1);
    const SampledBatch one = sampler.sample(batch_seeds, 5);
    omp_set_num_threads(2);
    const SampledBatch two = sampler.sample(batch_seeds, 5);
    omp_set_num_threads(threads);
    ASSERT_GT(one.blocks[1].graph.num_edges(), 65536) << "the loops did not fork";
    EXPECT_TRUE(same_batch(one, two)) << "replace " << replace;
    EXPECT_FALSE(same_batch(one, sampler.sample(batch_seeds, 6))) << "another batch key draws the same";
    EXPECT_FALSE(same_batch(one, NeighborSampler(graph, {{25, 10}, replace, 98}).sample(batch_seeds, 5)))
        << "another seed draws the same";
  }
}

TEST_P(NeighborSamplerOnDevice, DrawsAreUniform) {
  // Node 0 has 4 in-edges and a fanout of 2: over 4000 batch keys each edge's count is within 5
  // standard deviations of its mean (a biased draw, or one that ignores the key, is not).
  const Graph graph = Graph::from_edges(5, {1, 2, 3, 4}, {0, 0, 0, 0});
  constexpr int kKeys = 4000;
  for (bool replace : {false, true}) {
    const NeighborSampler sampler(graph, {{2}, replace, 3}, device());
    std::vector<int> count(4, 0);
    for (uint64_t key = 0; key < kKeys; ++key) {
      const SampledBatch batch = sampler.sample({0}, key);
      for (int32_t id : batch.blocks[0].edge_ids) ++count[static_cast<size_t>(id)];
    }
    // Either way an edge is expected kKeys / 2 times: 2 draws of 1/4 each, or 2 edges of 4.
    const double mean = kKeys * 0.5, sd = std::sqrt(kKeys * (replace ? 2 * 0.25 * 0.75 : 0.5 * 0.5));
    for (int e = 0; e < 4; ++e) EXPECT_NEAR(count[static_cast<size_t>(e)], mean, 5 * sd) << "edge " << e;
  }
}

// The CUDA sampler gives the CPU's blocks bit for bit: local ids, their order, the global-id maps
// and the edge ids, with and without replacement, for fanouts below, at and above the degrees,
// -1 and 0, on a graph with duplicate edges and nodes without in-edges, and on one large enough
// that the CPU's loops fork and the device's sorts take many blocks.
using CudaNeighborSampler = CudaVsCpuTest;

TEST_F(CudaNeighborSampler, SameBlocksAsTheCpuBitForBit) {
  GraphBuildOptions keep;
  keep.remove_duplicates = false;
  const Graph small = Graph::from_edges(6, {1, 2, 3, 2, 0, 3, 1}, {0, 0, 0, 0, 5, 3, 3}, keep);
  const Graph medium = random_graph(600, 12, 3), large = random_graph(30000, 20, 7);
  const std::vector<int32_t> all_large = shuffle_nodes(first_nodes(30000), 1, 0);
  struct Case {
    const Graph* graph;
    std::vector<int32_t> seeds;
  };
  const std::vector<Case> cases = {
      {&small, {0, 4, 5, 3}},
      {&medium, {17, 3, 599, 250, 42, 0, 311}},
      {&medium, first_nodes(600)},
      {&large, std::vector<int32_t>(all_large.begin(), all_large.begin() + 6000)}};
  for (const Case& c : cases)
    for (bool replace : {false, true})
      for (const std::vector<int64_t>& fanouts : {std::vector<int64_t>{25, 10}, {3, 0, 2}, {-1, 1}, {100}}) {
        const NeighborSamplerOptions options{fanouts, replace, 42};
        const NeighborSampler cpu(*c.graph, options), cuda(*c.graph, options, Device::cuda);
        ASSERT_EQ(cuda.device(), Device::cuda);
        for (uint64_t key : {0, 3}) {
          SCOPED_TRACE(::testing::Message() << c.graph->num_nodes() << " nodes, " << c.seeds.size()
                                            << " seeds, replace " << replace << ", " << fanouts.size()
                                            << " fanouts from " << fanouts[0] << ", key " << key);
          const SampledBatch want = cpu.sample(c.seeds, key), got = cuda.sample(c.seeds, key);
          EXPECT_TRUE(same_batch(want, got)) << "the CUDA blocks differ from the CPU's";
          expect_valid_batch(*c.graph, got, c.seeds, options);
        }
      }
}

TEST(NeighborSampler, ShuffleIsAPermutationFixedBySeedAndRound) {
  const std::vector<int32_t> nodes = first_nodes(1000);
  const std::vector<int32_t> a = shuffle_nodes(nodes, 4, 0);
  std::vector<int32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, nodes);
  EXPECT_NE(a, nodes);
  EXPECT_EQ(a, shuffle_nodes(nodes, 4, 0));
  EXPECT_NE(a, shuffle_nodes(nodes, 4, 1));
  EXPECT_NE(a, shuffle_nodes(nodes, 5, 0));
  EXPECT_EQ(shuffle_nodes({7}, 4, 0), std::vector<int32_t>{7});
  EXPECT_TRUE(shuffle_nodes({}, 4, 0).empty());
}

TEST(NeighborSampler, BadInputIsRefused) {
  const Graph graph = random_graph(50, 4, 2);
  expect_error([&] { NeighborSampler(graph, {{}, false, 0}); }, {"no fanouts"});
  expect_error([&] { NeighborSampler(graph, {{10, -2}, false, 0}); }, {"fanout 2", "-2"});
  expect_error([&] { NeighborSampler(graph, {std::vector<int64_t>(65, 1), false, 0}); }, {"65 fanouts"});
  expect_error([&] { NeighborSampler(Graph::from_edges(3, 2, {0}, {1}), {{1}, false, 0}); }, {"bipartite"});
  const NeighborSampler sampler(graph, {{3}, false, 0});
  expect_error([&] { sampler.sample({1, 2, 1}, 0); }, {"seed 2", "node 1 again"});
  // The first violation in seed order, whichever kind: a later repeat or an earlier one.
  expect_error([&] { sampler.sample({4, 3, 9, 3, 4}, 0); }, {"seed 3 is node 3 again"});
  expect_error([&] { sampler.sample({4, 3, 50, 3}, 0); }, {"seed 2 is node 50, outside [0, 50)"});
  expect_error([&] { sampler.sample({4, 4, 50}, 0); }, {"seed 1 is node 4 again"});
  expect_error([&] { sampler.sample({50}, 0); }, {"seed 0", "outside [0, 50)"});
  expect_error([&] { sampler.sample({-1}, 0); }, {"outside"});
  expect_error([&] { sampler.sample({1}, uint64_t{1} << 57); }, {"batch key"});
}

// ops::sample_neighbors called directly, as a consumer may: on the CPU a destination outside the
// graph, or whose row pointers are out of order, is refused (they read memory out of bounds, a
// SIGSEGV for -100000, or asked for a buffer of billions of edges). A destination given twice
// sized its buffers by the graph's E (a bound only for distinct destinations) and wrote past them:
// it now gives its row twice.
TEST(NeighborSampler, SampleNeighborsChecksItsDestinationsOnTheCpu) {
  const Graph ring = Graph::from_edges(5, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 0});
  const auto nodes = [](std::vector<int32_t> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return Tensor::from_vector(std::move(v), {n});
  };
  ops::NeighborDraw draw;
  draw.fanout = 2;
  expect_error([&] { ops::sample_neighbors(ring.row_ptr(), ring.edge_src(), nodes({9}), draw); },
               {"dst_nodes[0] is 9, outside [0, 5)"});
  expect_error(
      [&] {
        ops::sample_neighbors(ring.row_ptr(), ring.edge_src(), nodes({2, -100000}), draw);
      },
      {"dst_nodes[1] is -100000"});
  expect_error(
      [&] {
        ops::sample_neighbors(nodes({0, 5, 1, 2, 3, 5}), ring.edge_src(), nodes({1}), draw);
      },
      {"dst_nodes[0] is node 1", "[5, 1)"});
  expect_error(
      [&] {
        ops::sample_neighbors(nodes({0, 1, 2, 3, 4, 9}), ring.edge_src(), nodes({4}), draw);
      },
      {"dst_nodes[0] is node 4", "[4, 9)", "[0, 5]"});
  // Node 0 has three in-edges, the graph three edges: {0, 0} keeps six.
  const Graph star = Graph::from_edges(4, {1, 2, 3}, {0, 0, 0});
  draw.fanout = 3;
  const ops::SampledLayer twice = ops::sample_neighbors(star.row_ptr(), star.edge_src(), nodes({0, 0}), draw);
  EXPECT_EQ(twice.row_ptr.to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 6}));
  EXPECT_EQ(twice.edge_ids.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
}
