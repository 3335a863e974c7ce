#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "gat/framework/cuda_runtime.h"
#include "gat/framework/detail/host_parallel.h"
#include "gat/framework/graph.h"
#include "gat_testing.h"

using namespace gat;
using gat::testing::expect_error;

namespace {

std::vector<std::pair<int32_t, int32_t>> edge_pairs(const Graph& g) {  // (src, dst) in edge-id order
  const std::vector<int32_t> s = g.sources(), d = g.destinations();
  std::vector<std::pair<int32_t, int32_t>> out;
  for (size_t e = 0; e < s.size(); ++e) out.emplace_back(s[e], d[e]);
  return out;
}

// Every array of a graph, for exact comparisons.
struct HostGraphArrays {
  std::vector<int32_t> row_ptr, edge_src, edge_dst, t_row_ptr, t_edge_dst, t_edge_id, row_chunk_ptr,
      t_row_chunk_ptr, row_chunk_row, t_row_chunk_row, row_order, t_row_order;
  int64_t max_in = 0, max_out = 0, loops = 0, row_chunks = 0, t_row_chunks = 0;
  int chunk = 0;
  bool one_loop_per_node = false;
  bool operator==(const HostGraphArrays& o) const {
    return row_ptr == o.row_ptr && edge_src == o.edge_src && edge_dst == o.edge_dst &&
           t_row_ptr == o.t_row_ptr && t_edge_dst == o.t_edge_dst && t_edge_id == o.t_edge_id &&
           row_chunk_ptr == o.row_chunk_ptr && t_row_chunk_ptr == o.t_row_chunk_ptr &&
           row_chunk_row == o.row_chunk_row && t_row_chunk_row == o.t_row_chunk_row &&
           row_order == o.row_order && t_row_order == o.t_row_order && max_in == o.max_in &&
           max_out == o.max_out && loops == o.loops && row_chunks == o.row_chunks &&
           t_row_chunks == o.t_row_chunks && chunk == o.chunk && one_loop_per_node == o.one_loop_per_node;
  }
};
// The values of i32 offsets, or of i64 ones of a small graph (which fit int32).
std::vector<int32_t> offset_values(const Tensor& offsets) {
  if (offsets.dtype() == DType::i32) return offsets.to_vector<int32_t>();
  const std::vector<int64_t> wide = offsets.to_vector<int64_t>();
  return std::vector<int32_t>(wide.begin(), wide.end());
}
HostGraphArrays arrays_of(const Graph& g) {
  return {offset_values(g.row_ptr()),
          g.edge_src().to_vector<int32_t>(),
          g.edge_dst().to_vector<int32_t>(),
          offset_values(g.t_row_ptr()),
          g.t_edge_dst().to_vector<int32_t>(),
          offset_values(g.t_edge_id()),
          g.row_chunk_ptr().to_vector<int32_t>(),
          g.t_row_chunk_ptr().to_vector<int32_t>(),
          g.row_chunk_row().to_vector<int32_t>(),
          g.t_row_chunk_row().to_vector<int32_t>(),
          g.row_order().to_vector<int32_t>(),
          g.t_row_order().to_vector<int32_t>(),
          g.max_in_degree(),
          g.max_out_degree(),
          g.count_self_loops(),
          g.num_row_chunks(),
          g.num_t_row_chunks(),
          g.chunk_edges(),
          g.one_self_loop_per_node()};
}

// The graph's arrays built the simplest way: the (dst, src) pairs that the options keep, sorted
// (std::sort) and deduplicated (std::unique); the transpose by a stable sort of the edge ids by
// source; chunks counted row by row. ns sources and nd destinations (one node set: ns = nd);
// added self loops (i, i) for i < min(ns, nd).
HostGraphArrays reference_build(int32_t ns, int32_t nd, const std::vector<int32_t>& src,
                                const std::vector<int32_t>& dst, const GraphBuildOptions& o) {
  std::vector<std::pair<int32_t, int32_t>> pairs;  // (dst, src)
  for (size_t k = 0; k < src.size(); ++k) {
    if ((o.remove_self_loops || o.add_self_loops) && src[k] == dst[k]) continue;
    pairs.emplace_back(dst[k], src[k]);
    if (o.symmetrize && src[k] != dst[k]) pairs.emplace_back(src[k], dst[k]);
  }
  const int32_t loop_nodes = std::min(ns, nd);
  if (o.add_self_loops)
    for (int32_t i = 0; i < loop_nodes; ++i) pairs.emplace_back(i, i);
  std::sort(pairs.begin(), pairs.end());
  if (o.remove_duplicates) pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  const int32_t e = static_cast<int32_t>(pairs.size());
  HostGraphArrays r;
  r.row_ptr.assign(nd + 1, 0);
  r.t_row_ptr.assign(ns + 1, 0);
  std::vector<int32_t> loops_in_row(nd, 0);
  for (int32_t k = 0; k < e; ++k) {
    const auto [d, s] = pairs[k];
    r.edge_src.push_back(s);
    r.edge_dst.push_back(d);
    ++r.row_ptr[d + 1];
    ++r.t_row_ptr[s + 1];
    loops_in_row[d] += s == d;
    r.loops += s == d;
  }
  r.one_loop_per_node =
      std::count(loops_in_row.begin(), loops_in_row.end(), 1) == loop_nodes && r.loops == loop_nodes;
  for (int32_t i = 0; i < nd; ++i) {
    r.max_in = std::max<int64_t>(r.max_in, r.row_ptr[i + 1]);
    r.row_ptr[i + 1] += r.row_ptr[i];
  }
  for (int32_t j = 0; j < ns; ++j) {
    r.max_out = std::max<int64_t>(r.max_out, r.t_row_ptr[j + 1]);
    r.t_row_ptr[j + 1] += r.t_row_ptr[j];
  }
  r.t_edge_id.resize(e);
  std::iota(r.t_edge_id.begin(), r.t_edge_id.end(), 0);
  std::stable_sort(r.t_edge_id.begin(), r.t_edge_id.end(),
                   [&](int32_t a, int32_t b) { return r.edge_src[a] < r.edge_src[b]; });
  for (int32_t id : r.t_edge_id) r.t_edge_dst.push_back(r.edge_dst[id]);
  // chunk_edges as Graph documents it: 8 doubled while 4096 * chunk <= E, up to 512; 64 at
  // least when no row is longer than 64.
  r.chunk = 8;
  while (r.chunk < 512 && int64_t{r.chunk} * 4096 <= e) r.chunk *= 2;
  if (std::max(r.max_in, r.max_out) <= 64) r.chunk = std::max(r.chunk, 64);
  auto chunks = [&](const std::vector<int32_t>& rp, std::vector<int32_t>& out, std::vector<int32_t>& owner,
                    int64_t& total) {
    const int32_t n = static_cast<int32_t>(rp.size()) - 1;
    out.assign(n + 1, 0);
    owner.clear();
    for (int32_t i = 0; i < n; ++i) {
      const int32_t deg = rp[i + 1] - rp[i];
      const int32_t count = deg > r.chunk ? (deg + r.chunk - 1) / r.chunk : 0;
      out[i + 1] = out[i] + count;
      owner.insert(owner.end(), count, i);
    }
    total = out[n];
  };
  chunks(r.row_ptr, r.row_chunk_ptr, r.row_chunk_row, r.row_chunks);
  chunks(r.t_row_ptr, r.t_row_chunk_ptr, r.t_row_chunk_row, r.t_row_chunks);
  // The uncut rows, longest first, by index within a length.
  auto order = [&](const std::vector<int32_t>& rp, std::vector<int32_t>& out) {
    out.clear();
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(rp.size()); ++i)
      if (rp[i + 1] - rp[i] <= r.chunk) out.push_back(i);
    std::stable_sort(out.begin(), out.end(),
                     [&](int32_t a, int32_t b) { return rp[a + 1] - rp[a] > rp[b + 1] - rp[b]; });
  };
  order(r.row_ptr, r.row_order);
  order(r.t_row_ptr, r.t_row_order);
  return r;
}

// What with_self_loops makes of the graph `built` (ns sources, nd destinations): its loops removed,
// one (i, i) added for each i < min(ns, nd), duplicates kept as they are.
HostGraphArrays reference_with_self_loops(int32_t ns, int32_t nd, const HostGraphArrays& built) {
  GraphBuildOptions add;
  add.remove_duplicates = false;
  add.add_self_loops = true;
  return reference_build(ns, nd, built.edge_src, built.edge_dst, add);
}

// Restores the OpenMP thread count when a test ends.
struct ThreadCount {
  int saved = omp_get_max_threads();
  ~ThreadCount() { omp_set_num_threads(saved); }
};

}  // namespace

TEST(Graph, ParallelBuildsEqualAReferenceBuildForAnyThreadCount) {
  // Random graphs with duplicates, self loops, isolated nodes (ids >= 3/4 N send and receive
  // nothing) and a hub, large enough for the parallel paths; every option combination, on one
  // thread and on three (blocks of uneven sizes; more threads than cores is fine).
  ThreadCount restore;
  std::mt19937 rng(11);
  for (const int32_t n : {1, 40, 30000}) {
    const int64_t m = n < 100 ? 200 : 100000;
    std::vector<int32_t> src, dst;
    for (int64_t k = 0; k < m; ++k) {
      src.push_back(static_cast<int32_t>(rng() % (3 * n / 4 + 1)));
      dst.push_back(k % 10 == 0 ? src.back() : static_cast<int32_t>(rng() % (3 * n / 4 + 1)));
    }
    for (int32_t j = 0; j < std::min(n, 3000); ++j) src.push_back(j), dst.push_back(0);  // hub row 0
    for (int32_t j = 0; j < std::min(n, 3000); ++j) src.push_back(0), dst.push_back(j);  // hub source 0
    for (int options = 0; options < 16; ++options) {
      const GraphBuildOptions o{(options & 1) != 0, (options & 2) != 0, (options & 4) != 0,
                                (options & 8) != 0};
      const HostGraphArrays want = reference_build(n, n, src, dst, o);
      const HostGraphArrays want_looped = reference_with_self_loops(n, n, want);
      for (const int threads : {1, 3}) {
        omp_set_num_threads(threads);
        const Graph g = Graph::from_edges(n, src, dst, o);
        EXPECT_TRUE(arrays_of(g) == want) << "n " << n << ", options " << options << ", threads " << threads;
        EXPECT_TRUE(arrays_of(g.with_self_loops()) == want_looped)
            << "with_self_loops: n " << n << ", options " << options << ", threads " << threads;
      }
    }
  }
}

// An exception thrown inside a parallel region reaches the caller: one that left the region ended
// the process in std::terminate (out of memory while a large graph was sorted or generated was an
// abort, not an error). Two threads or one, the region is parallel and the item is thrown there.
TEST(HostParallel, AnExceptionInsideTheParallelSortReachesTheCaller) {
  const ThreadCount restore;
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    omp_set_num_threads(threads);
    const int64_t n = 4 * detail::kParallelItems, keys = 100000, bad = n / 2;
    std::vector<int32_t> staged_key(static_cast<size_t>(n)), staged_item(static_cast<size_t>(n));
    auto sort = [&] {
      detail::bucket_sort<int32_t>(
          "test", n, keys,
          [&](int64_t begin, int64_t end, auto&& emit) {
            for (int64_t i = begin; i < end; ++i) emit((i * 7919) % keys, static_cast<int32_t>(i));
          },
          [](int64_t) {},
          [&](int64_t pos, int32_t key, int32_t item) {
            staged_key[static_cast<size_t>(pos)] = key;
            staged_item[static_cast<size_t>(pos)] = item;
          },
          [&](int64_t pos) {
            GAT_CHECK(staged_item[static_cast<size_t>(pos)] != bad, "item ", bad, " cannot be read back");
            return std::make_pair(staged_key[static_cast<size_t>(pos)],
                                  staged_item[static_cast<size_t>(pos)]);
          },
          [](int64_t, int32_t) {});
    };
    expect_error(sort, {"item 131072 cannot be read back"});
  }
}

TEST(Graph, BipartiteBuildsEqualAReferenceBuild) {
  // Ns < Nd and Ns > Nd, with duplicates, (i, i) pairs (one node pair only when i < min(Ns, Nd)),
  // sources and destinations without edges and a hub each way; every option but symmetrize, on
  // one thread and on three; with_self_loops adds (i, i) for i < min(Ns, Nd) only.
  ThreadCount restore;
  std::mt19937 rng(12);
  for (const auto& [ns, nd] : {std::pair<int32_t, int32_t>{7, 40}, {40, 7}, {3000, 20000}, {20000, 3000}}) {
    const int64_t m = nd < 100 ? 300 : 60000;
    std::vector<int32_t> src, dst;
    for (int64_t k = 0; k < m; ++k) {
      src.push_back(static_cast<int32_t>(rng() % (3 * ns / 4 + 1)));
      const int32_t d = static_cast<int32_t>(rng() % (3 * nd / 4 + 1));
      dst.push_back(k % 10 == 0 && src.back() < nd ? src.back() : d);
    }
    for (int32_t j = 0; j < std::min(ns, 2000); ++j) src.push_back(j), dst.push_back(0);  // hub row 0
    for (int32_t i = 0; i < std::min(nd, 2000); ++i) src.push_back(0), dst.push_back(i);  // hub source 0
    for (int options = 0; options < 8; ++options) {
      const GraphBuildOptions o{false, (options & 1) != 0, (options & 2) != 0, (options & 4) != 0};
      const HostGraphArrays want = reference_build(ns, nd, src, dst, o);
      const HostGraphArrays want_looped = reference_with_self_loops(ns, nd, want);
      for (const int threads : {1, 3}) {
        omp_set_num_threads(threads);
        const Graph g = Graph::from_edges(ns, nd, src, dst, o);
        g.validate();
        EXPECT_EQ(g.num_src_nodes(), ns);
        EXPECT_EQ(g.num_dst_nodes(), nd);
        EXPECT_TRUE(g.is_bipartite());
        EXPECT_TRUE(arrays_of(g) == want)
            << ns << " -> " << nd << ", options " << options << ", threads " << threads;
        const Graph looped = g.with_self_loops();
        looped.validate();
        EXPECT_TRUE(arrays_of(looped) == want_looped) << "with_self_loops: " << ns << " -> " << nd
                                                      << ", options " << options << ", threads " << threads;
        EXPECT_EQ(looped.num_src_nodes(), ns);
        EXPECT_EQ(looped.num_dst_nodes(), nd);
      }
    }
  }
}

TEST(Graph, BipartiteSelfLoopsFollowPygsGatConvRule) {
  // 3 sources, 5 destinations: loops (i, i) for i < 3 only; the existing (1, 1) is replaced, the
  // duplicate of it too.
  const Graph g = Graph::from_edges(3, 5, {1, 1, 2, 0, 2}, {1, 1, 4, 3, 0}, GraphBuildOptions{false, false});
  EXPECT_EQ(g.count_self_loops(), 2);
  EXPECT_FALSE(g.one_self_loop_per_node());
  const Graph l = g.with_self_loops();
  l.validate();
  EXPECT_EQ(edge_pairs(l),
            (std::vector<std::pair<int32_t, int32_t>>{{0, 0}, {2, 0}, {1, 1}, {2, 2}, {0, 3}, {2, 4}}));
  EXPECT_TRUE(l.one_self_loop_per_node());
  EXPECT_EQ(l.count_self_loops(), 3);
  EXPECT_EQ(l.in_degrees(), (std::vector<int32_t>{2, 1, 1, 1, 1}));
  EXPECT_EQ(l.with_self_loops().row_ptr().data<int32_t>(), l.row_ptr().data<int32_t>());  // itself
  // The same rule at build time, and the other way round: 5 sources, 3 destinations.
  GraphBuildOptions loops;
  loops.add_self_loops = true;
  EXPECT_EQ(edge_pairs(Graph::from_edges(3, 5, {1, 1, 2, 0, 2}, {1, 1, 4, 3, 0}, loops)), edge_pairs(l));
  const Graph r = Graph::from_edges(5, 3, {4, 3, 1}, {0, 2, 1}, loops);
  r.validate();
  EXPECT_EQ(edge_pairs(r),
            (std::vector<std::pair<int32_t, int32_t>>{{0, 0}, {4, 0}, {1, 1}, {2, 2}, {3, 2}}));
  EXPECT_TRUE(r.one_self_loop_per_node());
  // A graph without sources or destinations gets no loop.
  EXPECT_EQ(Graph::from_edges(0, 4, {}, {}).with_self_loops().num_edges(), 0);
  EXPECT_TRUE(Graph::from_edges(4, 0, {}, {}).one_self_loop_per_node());
}

TEST(Graph, BipartiteSidesAndErrors) {
  const Graph g = Graph::from_edges(2, 4, {0, 1, 1}, {3, 0, 3});
  g.validate();
  EXPECT_EQ(g.row_ptr().numel(), 5);    // Nd + 1
  EXPECT_EQ(g.t_row_ptr().numel(), 3);  // Ns + 1
  EXPECT_EQ(g.row_chunk_ptr().numel(), 5);
  EXPECT_EQ(g.t_row_chunk_ptr().numel(), 3);
  EXPECT_EQ(g.in_degrees(), (std::vector<int32_t>{1, 0, 0, 2}));
  EXPECT_EQ(g.t_row_ptr().to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(g.t_edge_dst().to_vector<int32_t>(), (std::vector<int32_t>{3, 0, 3}));
  expect_error([&] { (void)g.num_nodes(); }, {"bipartite", "2 sources", "4 destinations", "num_src_nodes"});
  EXPECT_FALSE(Graph::from_edges(3, 3, {0}, {1}).is_bipartite());  // equal counts: one node set
  EXPECT_EQ(Graph::from_edges(3, 3, {0}, {1}).num_nodes(), 3);
  // Each side's range is its own.
  expect_error([] { Graph::from_edges(2, 4, {0, 2}, {3, 3}); }, {"edge 1", "source 2", "[0, 2)"});
  expect_error([] { Graph::from_edges(4, 2, {3, 3}, {1, 2}); }, {"edge 1", "destination 2", "[0, 2)"});
  expect_error([] { Graph::from_edges(-1, 2, {}, {}); }, {"-1 sources"});
  GraphBuildOptions sym;
  sym.symmetrize = true;
  expect_error([&] { Graph::from_edges(2, 4, {0}, {3}, sym); }, {"symmetrize", "bipartite", "2 sources"});
  // from_csr with the source count.
  const Graph c = Graph::from_csr(2, {0, 1, 1, 1, 3}, {1, 1, 0});  // row 3 unsorted
  c.validate();
  EXPECT_EQ(edge_pairs(c), edge_pairs(g));
  EXPECT_EQ(c.t_edge_id().to_vector<int32_t>(), g.t_edge_id().to_vector<int32_t>());
  expect_error([] { Graph::from_csr(2, {0, 1, 2}, {0, 2}); }, {"edge 1", "source 2", "[0, 2)"});
  // validate knows the sides: a transposed entry's destination beyond Nd, t_row_ptr of Nd + 1.
  Graph bad = Graph::from_edges(2, 4, {0, 1, 1}, {3, 0, 3});
  bad.t_edge_dst().data<int32_t>()[0] = 4;
  expect_error([&] { bad.validate(); }, {"transpose", "source 4", "[0, 4)"});
}

TEST(Graph, BipartiteCudaRoundTripKeepsEveryArray) {
  GAT_SKIP_WITHOUT_CUDA();
  const Graph g = Graph::from_edges(3, 6, {0, 1, 2, 2, 0}, {5, 1, 4, 0, 1});
  const Graph d = g.with_self_loops().to(Device::cuda);
  d.validate();
  EXPECT_EQ(d.num_src_nodes(), 3);
  EXPECT_EQ(d.num_dst_nodes(), 6);
  EXPECT_TRUE(arrays_of(d) == arrays_of(g.with_self_loops()));
  const Graph l = g.to(Device::cuda).with_self_loops();
  EXPECT_EQ(l.device(), Device::cuda);
  EXPECT_TRUE(arrays_of(l.to(Device::cpu)) == arrays_of(g.with_self_loops()));
}

// Graph::from_arrays takes what another front end built (the PyTorch package sorts on the
// device and plans with plan_rows): the same arrays give the same graph, and validate() catches
// arrays that do not belong together.
TEST(Graph, FromArraysRebuildsAGraphFromItsArraysAndPlanRowsGivesItsPlans) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int32_t> source(0, 39), destination(0, 69);
  std::vector<int32_t> src, dst;
  for (int k = 0; k < 900; ++k) src.push_back(source(rng)), dst.push_back(destination(rng));
  // A graph whose long rows are cut into chunks (a hub of 300 edges each way), and a bipartite one.
  const Graph hub = gat::testing::random_graph(300, 5000, 300, rng).with_self_loops();
  ASSERT_GT(hub.num_row_chunks(), 0);
  ASSERT_GT(hub.num_t_row_chunks(), 0);
  for (const Graph& g : {hub, Graph::from_edges(40, 70, src, dst)}) {
    GraphArrays a;
    a.num_src_nodes = g.num_src_nodes();
    a.num_dst_nodes = g.num_dst_nodes();
    a.row_ptr = g.row_ptr(), a.edge_src = g.edge_src(), a.edge_dst = g.edge_dst();
    a.t_row_ptr = g.t_row_ptr(), a.t_edge_dst = g.t_edge_dst(), a.t_edge_id = g.t_edge_id();
    a.plans = plan_rows(g.num_edges(), g.row_ptr(), g.t_row_ptr());
    a.num_self_loops = g.count_self_loops();
    a.one_self_loop_per_node = g.one_self_loop_per_node();
    const Graph h = Graph::from_arrays(a);
    h.validate();
    EXPECT_TRUE(arrays_of(h) == arrays_of(g));  // every array and count
    // Plans of another graph's rows do not pass.
    GraphArrays wrong = a;
    wrong.plans.chunk_edges *= 2;
    expect_error([&] { Graph::from_arrays(wrong).validate(); }, {"chunk_edges"});
  }
  // Negative node counts with empty row pointers (what a front end gets from a 0-element
  // row_ptr, N = numel - 1) pass every shape check ({N + 1} = {0}); validate() then read
  // row_ptr[0] out of bounds.
  GraphArrays empty;
  empty.num_src_nodes = empty.num_dst_nodes = -1;
  empty.row_ptr = empty.t_row_ptr = empty.t_edge_id = Tensor::zeros({0}, DType::i32);
  empty.edge_src = empty.edge_dst = empty.t_edge_dst = Tensor::zeros({0}, DType::i32);
  empty.plans.row_chunk_ptr = empty.plans.t_row_chunk_ptr = Tensor::zeros({0}, DType::i32);
  empty.plans.row_chunk_row = empty.plans.t_row_chunk_row = Tensor::zeros({0}, DType::i32);
  empty.plans.row_order = empty.plans.t_row_order = Tensor::zeros({0}, DType::i32);
  expect_error([&] { Graph::from_arrays(empty).validate(); }, {"-1 sources and -1 destinations", "negative"});
}

TEST(Graph, FromEdgesSortsByDestinationThenSource) {
  // 0->2, 3->1, 1->2, 2->0, 0->1 (unsorted input)
  Graph g = Graph::from_edges(4, {0, 3, 1, 2, 0}, {2, 1, 2, 0, 1});
  g.validate();
  EXPECT_EQ(g.num_nodes(), 4);
  EXPECT_EQ(g.num_edges(), 5);
  EXPECT_EQ(g.row_ptr().to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 3, 5, 5}));
  EXPECT_EQ(g.edge_src().to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 3, 0, 1}));
  EXPECT_EQ(g.edge_dst().to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 2, 2}));
  // Transpose by source, sorted by destination: 0 -> {1 (edge 1), 2 (edge 3)}, 1 -> {2 (4)},
  // 2 -> {0 (0)}, 3 -> {1 (2)}.
  EXPECT_EQ(g.t_row_ptr().to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 3, 4, 5}));
  EXPECT_EQ(g.t_edge_dst().to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 2, 0, 1}));
  EXPECT_EQ(g.t_edge_id().to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 4, 0, 2}));
  EXPECT_EQ(g.in_degrees(), (std::vector<int32_t>{1, 2, 2, 0}));
  EXPECT_EQ(g.max_in_degree(), 2);
  EXPECT_EQ(g.max_out_degree(), 2);
  EXPECT_EQ(g.count_self_loops(), 0);
}

TEST(Graph, BuildOptions) {
  const std::vector<int32_t> src = {0, 0, 1, 2, 2}, dst = {1, 1, 1, 0, 2};  // dup 0->1, loops 1,2
  GraphBuildOptions keep;
  keep.remove_duplicates = false;
  EXPECT_EQ(Graph::from_edges(3, src, dst, keep).num_edges(), 5);

  Graph dedup = Graph::from_edges(3, src, dst);  // defaults: deduplicate only
  EXPECT_EQ(edge_pairs(dedup), (std::vector<std::pair<int32_t, int32_t>>{{2, 0}, {0, 1}, {1, 1}, {2, 2}}));

  GraphBuildOptions no_loops;
  no_loops.remove_self_loops = true;
  EXPECT_EQ(edge_pairs(Graph::from_edges(3, src, dst, no_loops)),
            (std::vector<std::pair<int32_t, int32_t>>{{2, 0}, {0, 1}}));

  GraphBuildOptions sym;
  sym.symmetrize = true;
  sym.remove_self_loops = true;
  Graph u = Graph::from_edges(3, src, dst, sym);
  u.validate();
  EXPECT_EQ(edge_pairs(u), (std::vector<std::pair<int32_t, int32_t>>{{1, 0}, {2, 0}, {0, 1}, {0, 2}}));

  GraphBuildOptions loops;
  loops.add_self_loops = true;
  Graph l = Graph::from_edges(3, src, dst, loops);
  l.validate();
  EXPECT_EQ(l.count_self_loops(), 3);
  EXPECT_EQ(edge_pairs(l),
            (std::vector<std::pair<int32_t, int32_t>>{{0, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 2}}));
}

TEST(Graph, WithSelfLoopsReplacesExistingLoops) {
  Graph g = Graph::from_edges(3, {1, 1, 0}, {1, 2, 2});
  Graph l = g.with_self_loops();
  l.validate();
  EXPECT_EQ(edge_pairs(l),
            (std::vector<std::pair<int32_t, int32_t>>{{0, 0}, {1, 1}, {0, 2}, {1, 2}, {2, 2}}));
  EXPECT_EQ(l.with_self_loops().num_edges(), l.num_edges());
}

TEST(Graph, WithSelfLoopsGivesEachEdgesOriginAsAddRemainingSelfLoops) {
  // Node 1 has two self loops (edges 1 and 2 of row 1), node 3 one; 0 and 2 none.
  GraphBuildOptions keep;
  keep.remove_duplicates = false;
  const Graph graph = Graph::from_edges(4, {0, 1, 1, 2, 3, 1}, {1, 1, 1, 3, 3, 2}, keep);
  ASSERT_EQ(graph.sources(), (std::vector<int32_t>{0, 1, 1, 1, 2, 3}));
  std::vector<int32_t> origins;
  const Graph looped = graph.with_self_loops(origins);
  EXPECT_EQ(looped.sources(), (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3}));
  EXPECT_EQ(looped.destinations(), (std::vector<int32_t>{0, 1, 1, 2, 2, 3, 3}));
  // (0,0) new; (0,1) edge 0; (1,1) the last loop of node 1, edge 2; (1,2) edge 3; (2,2) new;
  // (2,3) edge 4; (3,3) edge 5.
  EXPECT_EQ(origins, (std::vector<int32_t>{-1, 0, 2, 3, -1, 4, 5}));
  std::vector<int32_t> again;
  EXPECT_EQ(looped.with_self_loops(again).num_edges(), looped.num_edges());
  EXPECT_EQ(again, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));  // already looped: itself
  // 2 sources, 3 destinations: loops for 0 and 1 only; destination 2 keeps its one edge.
  const Graph bipartite = Graph::from_edges(2, 3, {1, 0}, {2, 0});
  std::vector<int32_t> bipartite_origins;
  EXPECT_EQ(bipartite.with_self_loops(bipartite_origins).sources(), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(bipartite_origins, (std::vector<int32_t>{0, -1, 1}));
}

TEST(Graph, SymmetrizingKeepsASelfLoopSingleEvenWithDuplicatesKept) {
  // A self loop is its own reverse: symmetrize adds nothing for it, duplicates kept or not.
  GraphBuildOptions opt;
  opt.symmetrize = true;
  opt.remove_duplicates = false;
  const Graph g = Graph::from_edges(3, {0, 2, 0}, {1, 2, 1}, opt);
  EXPECT_EQ(edge_pairs(g),
            (std::vector<std::pair<int32_t, int32_t>>{{1, 0}, {1, 0}, {0, 1}, {0, 1}, {2, 2}}));
  EXPECT_EQ(g.count_self_loops(), 1);
}

TEST(Graph, RandomGraphMatchesAReferenceSort) {
  std::mt19937 rng(7);
  const int32_t n = 300;
  std::vector<int32_t> src(5000), dst(5000);
  for (size_t k = 0; k < src.size(); ++k) {
    src[k] = static_cast<int32_t>(rng() % n);
    dst[k] = static_cast<int32_t>(rng() % n);
  }
  GraphBuildOptions opt;
  opt.symmetrize = true;
  opt.remove_self_loops = true;
  Graph g = Graph::from_edges(n, src, dst, opt);
  g.validate();
  std::set<std::pair<int32_t, int32_t>> ref;  // (dst, src)
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == dst[k]) continue;
    ref.emplace(dst[k], src[k]);
    ref.emplace(src[k], dst[k]);
  }
  std::vector<std::pair<int32_t, int32_t>> expect;
  for (auto [d, s] : ref) expect.emplace_back(s, d);
  EXPECT_EQ(edge_pairs(g), expect);
  // from_csr of the same arrays, rows shuffled, gives the same graph.
  std::vector<int32_t> rp = g.row_ptr().to_vector<int32_t>(), ci = g.edge_src().to_vector<int32_t>();
  for (int32_t i = 0; i < n; ++i) std::shuffle(ci.begin() + rp[i], ci.begin() + rp[i + 1], rng);
  Graph c = Graph::from_csr(rp, ci);
  c.validate();
  EXPECT_EQ(edge_pairs(c), expect);
  EXPECT_EQ(c.t_edge_id().to_vector<int32_t>(), g.t_edge_id().to_vector<int32_t>());
  EXPECT_EQ(c.max_out_degree(), g.max_out_degree());
}

TEST(Graph, ErrorsNameTheEdgeAndTheValue) {
  expect_error([] { Graph::from_edges(3, {0, 1, 5}, {1, 2, 0}); }, {"edge 2", "source 5", "[0, 3)"});
  expect_error([] { Graph::from_edges(3, {0, 1}, {1, -1}); }, {"edge 1", "destination -1"});
  expect_error([] { Graph::from_edges(3, {0, 1}, {1}); }, {"2 sources", "1 destinations"});
  expect_error([] { Graph::from_csr({0, 2, 1}, {0, 1}); }, {"row_ptr decreases at node 1"});
  expect_error([] { Graph::from_csr({0, 1, 2}, {0, 7}); }, {"edge 1", "source 7"});
  expect_error([] { Graph::from_csr({0, 1, 3}, {0, 1}); }, {"row_ptr[N] is 3"});
  expect_error([] { Graph::from_csr({}, {}); }, {"row_ptr is empty"});
}

TEST(Graph, ValidateFindsCorruptedArrays) {
  auto fresh = [] { return Graph::from_edges(4, {0, 1, 2, 3, 0}, {1, 2, 3, 0, 2}); };
  Graph g = fresh();
  g.validate();
  g.edge_src().data<int32_t>()[1] = 9;  // a source outside the graph
  expect_error([&] { g.validate(); }, {"edge 1", "source 9"});
  g = fresh();
  std::swap(g.edge_src().data<int32_t>()[2], g.edge_src().data<int32_t>()[3]);  // row 2 unsorted
  expect_error([&] { g.validate(); }, {"row 2 is not sorted"});
  g = fresh();
  g.t_edge_id().data<int32_t>()[0] = g.t_edge_id().data<int32_t>()[1];  // an edge id twice
  expect_error([&] { g.validate(); }, {"transpose position 0"});
  g = fresh();
  g.edge_dst().data<int32_t>()[4] = 0;
  expect_error([&] { g.validate(); }, {"edge_dst[4]"});
  g = fresh();
  std::swap(g.row_order().data<int32_t>()[0], g.row_order().data<int32_t>()[1]);  // 2 edges after 1
  expect_error([&] { g.validate(); }, {"row_order is not the uncut rows longest first"});
  g = fresh();
  g.t_row_ptr().data<int32_t>()[1] = 3;
  EXPECT_THROW(g.validate(), Error);
}

TEST(Graph, EmptyGraphs) {
  Graph none;
  none.validate();
  EXPECT_EQ(none.num_edges(), 0);
  EXPECT_TRUE(none.sources().empty());
  Graph zero = Graph::from_edges(0, {}, {});
  zero.validate();
  EXPECT_EQ(zero.num_nodes(), 0);
  Graph isolated = Graph::from_edges(4, {}, {});
  isolated.validate();
  EXPECT_EQ(isolated.in_degrees(), (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(isolated.with_self_loops().num_edges(), 4);
}

TEST(Graph, LongRowsAreCutIntoChunksByTheEdgeCount) {
  // Node 0 receives from 1..300 and sends to 1..100; every other node receives one edge.
  std::vector<int32_t> src, dst;
  for (int32_t j = 1; j <= 300; ++j) src.push_back(j), dst.push_back(0);
  for (int32_t j = 1; j <= 100; ++j) src.push_back(0), dst.push_back(j);
  const Graph small = Graph::from_edges(301, src, dst);
  small.validate();
  EXPECT_EQ(small.chunk_edges(), 8);                    // 400 edges: the smallest chunk
  std::vector<int32_t> rows(302, 38), t_rows(302, 13);  // ceil(300 / 8) = 38, ceil(100 / 8) = 13
  rows[0] = t_rows[0] = 0;
  EXPECT_EQ(small.row_chunk_ptr().to_vector<int32_t>(), rows);
  EXPECT_EQ(small.t_row_chunk_ptr().to_vector<int32_t>(), t_rows);
  EXPECT_EQ(small.num_row_chunks(), 38);
  EXPECT_EQ(small.num_t_row_chunks(), 13);
  EXPECT_EQ(small.row_chunk_row().to_vector<int32_t>(), std::vector<int32_t>(38, 0));  // node 0's
  EXPECT_EQ(small.t_row_chunk_row().to_vector<int32_t>(), std::vector<int32_t>(13, 0));
  // Long rows of several nodes: each chunk names the row it belongs to.
  std::vector<int32_t> src2, dst2;
  for (int32_t j = 1; j <= 300; ++j) src2.push_back(j), dst2.push_back(0);  // row 0: 38 chunks
  for (int32_t j = 10; j < 30; ++j) src2.push_back(j), dst2.push_back(7);   // row 7: 3 chunks
  for (int32_t j = 40; j < 60; ++j) src2.push_back(9), dst2.push_back(j);   // source 9: 21 edges
  const Graph several = Graph::from_edges(301, src2, dst2);
  several.validate();
  std::vector<int32_t> owners(38, 0);
  owners.insert(owners.end(), 3, 7);
  EXPECT_EQ(several.row_chunk_row().to_vector<int32_t>(), owners);
  EXPECT_EQ(several.t_row_chunk_row().to_vector<int32_t>(), (std::vector<int32_t>{9, 9, 9}));
  // The kernels' row orders leave the cut rows out and take the others longest first, by index
  // within a length: rows 40-59 receive one edge (from 9), the others but 0 and 7 none; sources
  // 10-29 send two (to 0 and 7), the others but 0 and 9 one (to 0), source 0 none.
  const std::vector<int32_t> order = several.row_order().to_vector<int32_t>();
  ASSERT_EQ(order.size(), 299u);  // every row but 0 and 7
  for (int k = 0; k < 20; ++k) EXPECT_EQ(order[k], 40 + k);
  EXPECT_EQ(order[20], 1);
  EXPECT_EQ(order.back(), 300);
  const std::vector<int32_t> t_order = several.t_row_order().to_vector<int32_t>();
  ASSERT_EQ(t_order.size(), 300u);  // every source but 9
  for (int k = 0; k < 20; ++k) EXPECT_EQ(t_order[k], 10 + k);
  EXPECT_EQ(t_order[20], 1);
  EXPECT_EQ(t_order.back(), 0);
  // A small graph whose rows all fit in 64 edges is not cut (node 0 receives from 1..64).
  const Graph short_rows =
      Graph::from_edges(301, {src.begin(), src.begin() + 64}, {dst.begin(), dst.begin() + 64});
  EXPECT_EQ(short_rows.chunk_edges(), 64);
  EXPECT_EQ(short_rows.num_row_chunks(), 0);
  // Chunks grow with the edge count: a row of 300 edges is whole in a graph of 3M edges.
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int32_t> node(0, 199999);
  for (int64_t k = 0; k < 3000000; ++k) src.push_back(node(rng)), dst.push_back(node(rng));
  const Graph large = Graph::from_edges(200000, src, dst, GraphBuildOptions{false, false});
  EXPECT_EQ(large.chunk_edges(), 512);
  EXPECT_EQ(large.num_row_chunks(), 0);
  EXPECT_EQ(large.num_t_row_chunks(), 0);
}

TEST(Graph, CudaRoundTripKeepsEveryArray) {
  GAT_SKIP_WITHOUT_CUDA();
  Graph g = Graph::from_edges(5, {0, 1, 2, 3, 4, 0}, {1, 2, 3, 4, 0, 3}).with_self_loops();
  Graph d = g.to(Device::cuda);
  EXPECT_EQ(d.device(), Device::cuda);
  EXPECT_EQ(d.t_edge_id().device(), Device::cuda);
  d.validate();
  EXPECT_EQ(edge_pairs(d), edge_pairs(g));
  EXPECT_EQ(d.in_degrees(), g.in_degrees());
  Graph l = d.with_self_loops();
  EXPECT_EQ(l.device(), Device::cuda);
  EXPECT_EQ(edge_pairs(l), edge_pairs(g));
  Graph back = d.to(Device::cpu);
  EXPECT_EQ(back.t_edge_dst().to_vector<int32_t>(), g.t_edge_dst().to_vector<int32_t>());
  EXPECT_EQ(d.t_row_chunk_ptr().device(), Device::cuda);
  EXPECT_EQ(back.row_chunk_ptr().to_vector<int32_t>(), g.row_chunk_ptr().to_vector<int32_t>());
  EXPECT_EQ(d.row_chunk_row().device(), Device::cuda);
  EXPECT_EQ(back.t_row_chunk_row().to_vector<int32_t>(), g.t_row_chunk_row().to_vector<int32_t>());
}

// ---- 64-bit offsets ----

TEST(Graph, OffsetsAreI32UpTo2To31Minus1EdgesAndI64FromThere) {
  EXPECT_EQ(offset_dtype_for(0, false), DType::i32);
  EXPECT_EQ(offset_dtype_for(kMaxNarrowEdges, false), DType::i32);  // 2^31 - 1: row_ptr[Nd] fits
  EXPECT_EQ(offset_dtype_for(kMaxNarrowEdges + 1, false), DType::i64);
  EXPECT_EQ(offset_dtype_for(int64_t{3} << 31, false), DType::i64);
  EXPECT_EQ(offset_dtype_for(0, true), DType::i64);  // wide_offsets forces them
  EXPECT_EQ(offset_dtype_for(kMaxNarrowEdges, true), DType::i64);
  EXPECT_EQ(Graph().offset_dtype(), DType::i32);
}

// Every build option on a graph with hubs (chunked rows both ways): the wide graph is the narrow
// one, value for value, with i64 row pointers and edge ids; its self loops keep it wide.
TEST(Graph, WideOffsetsHoldTheSameGraphForEveryBuildOption) {
  std::mt19937_64 rng(8);
  std::uniform_int_distribution<int32_t> node(0, 399);
  std::vector<int32_t> src, dst;
  for (int k = 0; k < 6000; ++k) src.push_back(node(rng)), dst.push_back(node(rng));
  for (int32_t j = 1; j < 300; ++j) src.push_back(j), dst.push_back(0), src.push_back(1), dst.push_back(j);
  for (int options = 0; options < 16; ++options) {
    GraphBuildOptions o;
    o.symmetrize = options & 1;
    o.remove_duplicates = options & 2;
    o.remove_self_loops = options & 4;
    o.add_self_loops = options & 8;
    SCOPED_TRACE(options);
    const Graph narrow = Graph::from_edges(400, src, dst, o);
    o.wide_offsets = true;
    const Graph wide = Graph::from_edges(400, src, dst, o);
    ASSERT_EQ(narrow.offset_dtype(), DType::i32);
    ASSERT_EQ(wide.offset_dtype(), DType::i64);
    for (const Tensor* t : {&wide.row_ptr(), &wide.t_row_ptr(), &wide.t_edge_id()})
      EXPECT_EQ(t->dtype(), DType::i64);
    EXPECT_EQ(wide.edge_src().dtype(), DType::i32);  // node ids stay i32
    ASSERT_GT(wide.num_row_chunks(), 0);
    wide.validate();
    EXPECT_TRUE(arrays_of(wide) == arrays_of(narrow));
    EXPECT_EQ(wide.in_degrees(), narrow.in_degrees());
    std::vector<int32_t> narrow_origins, wide_origins;
    const Graph narrow_looped = narrow.with_self_loops(narrow_origins),
                wide_looped = wide.with_self_loops(wide_origins);
    EXPECT_EQ(wide_looped.offset_dtype(), DType::i64);
    wide_looped.validate();
    EXPECT_TRUE(arrays_of(wide_looped) == arrays_of(narrow_looped));
    EXPECT_EQ(wide_origins, narrow_origins);
  }
}

TEST(Graph, FromWideCsrTakesI64RowPointersAndValidatesThem) {
  // Row 1 unsorted: from_wide_csr sorts it as from_csr does.
  const Graph narrow = Graph::from_csr(3, {0, 2, 5, 5, 6}, {2, 0, 1, 0, 2, 1});
  const Graph wide = Graph::from_wide_csr(3, {0, 2, 5, 5, 6}, {2, 0, 1, 0, 2, 1});
  EXPECT_EQ(wide.offset_dtype(), DType::i64);
  wide.validate();
  EXPECT_TRUE(arrays_of(wide) == arrays_of(narrow));
  expect_error([] { Graph::from_wide_csr(3, {}, {}); }, {"Graph::from_csr", "row_ptr is empty"});
  expect_error([] { Graph::from_wide_csr(3, {1, 2}, {0, 1}); }, {"row_ptr[0] is 1"});
  expect_error(
      [] {
        Graph::from_wide_csr(3, {0, 2, 1}, {0, 1});
      },
      {"row_ptr decreases at node 1", "2 then 1"});
  expect_error([] { Graph::from_wide_csr(3, {0, 1, 3}, {0, 1}); }, {"row_ptr[N] is 3", "col_idx has 2"});
  // An offset past 2^31 - 1 is out of range like any other: never read as an edge.
  expect_error(
      [] {
        Graph::from_wide_csr(3, {0, int64_t{1} << 32, 2}, {0, 1});
      },
      {"row_ptr decreases at node 1", "4294967296 then 2"});
  expect_error([] { Graph::from_wide_csr(3, {0, 1, 2}, {0, 3}); }, {"edge 1", "source 3", "[0, 3)"});
}

// validate() takes i32 or i64 offsets, all three alike, and checks wide edge ids like narrow ones.
TEST(Graph, FromArraysTakesWideOffsetsAndValidateChecksThem) {
  std::mt19937_64 rng(4);
  const Graph narrow = gat::testing::random_graph(300, 5000, 300, rng);
  auto arrays = [](const Graph& g, const Tensor& row_ptr, const Tensor& t_row_ptr, const Tensor& t_edge_id) {
    GraphArrays a;
    a.num_src_nodes = g.num_src_nodes();
    a.num_dst_nodes = g.num_dst_nodes();
    a.row_ptr = row_ptr, a.edge_src = g.edge_src(), a.edge_dst = g.edge_dst();
    a.t_row_ptr = t_row_ptr, a.t_edge_dst = g.t_edge_dst(), a.t_edge_id = t_edge_id;
    a.plans = plan_rows(g.num_edges(), row_ptr, t_row_ptr);
    a.num_self_loops = g.count_self_loops();
    a.one_self_loop_per_node = g.one_self_loop_per_node();
    return a;
  };
  auto widen = [](const Tensor& t) {
    const std::vector<int32_t> v = t.to_vector<int32_t>();
    return Tensor::from_vector(std::vector<int64_t>(v.begin(), v.end()), t.shape());
  };
  const Tensor rp = widen(narrow.row_ptr()), trp = widen(narrow.t_row_ptr()), tid = widen(narrow.t_edge_id());
  const Graph g = Graph::from_arrays(arrays(narrow, rp, trp, tid));
  EXPECT_EQ(g.offset_dtype(), DType::i64);
  g.validate();
  EXPECT_TRUE(arrays_of(g) == arrays_of(narrow));
  // Mixed offset types, and a corrupt wide edge id.
  GraphArrays mixed = arrays(narrow, rp, trp, tid);
  mixed.t_edge_id = narrow.t_edge_id();
  expect_error([&] { Graph::from_arrays(mixed).validate(); }, {"t_edge_id", "i64"});
  const Tensor bad_id = tid.clone();
  bad_id.data<int64_t>()[7] = int64_t{1} << 32;
  expect_error([&] { Graph::from_arrays(arrays(narrow, rp, trp, bad_id)).validate(); },
               {"t_edge_id[7] is 4294967296", "outside [0, "});
  const Tensor bad_ptr = rp.clone();
  bad_ptr.data<int64_t>()[rp.numel() - 1] = int64_t{1} << 31;
  expect_error([&] { Graph::from_arrays(arrays(narrow, bad_ptr, trp, tid)).validate(); },
               {"row_ptr[N] is 2147483648"});
  // plan_rows: the plans of wide row pointers are those of narrow ones; mixed types are refused.
  const RowPlans a = plan_rows(narrow.num_edges(), narrow.row_ptr(), narrow.t_row_ptr()),
                 b = plan_rows(narrow.num_edges(), rp, trp);
  EXPECT_EQ(a.chunk_edges, b.chunk_edges);
  EXPECT_EQ(a.num_row_chunks, b.num_row_chunks);
  ASSERT_GT(b.num_row_chunks, 0);
  for (auto [x, y] :
       {std::pair(&a.row_chunk_ptr, &b.row_chunk_ptr), std::pair(&a.t_row_chunk_ptr, &b.t_row_chunk_ptr),
        std::pair(&a.row_chunk_row, &b.row_chunk_row), std::pair(&a.t_row_chunk_row, &b.t_row_chunk_row),
        std::pair(&a.row_order, &b.row_order), std::pair(&a.t_row_order, &b.t_row_order)}) {
    EXPECT_EQ(y->dtype(), DType::i32);
    EXPECT_EQ(x->to_vector<int32_t>(), y->to_vector<int32_t>());
  }
  expect_error([&] { plan_rows(narrow.num_edges(), rp, narrow.t_row_ptr()); },
               {"plan_rows", "must both be i32 or both i64"});
}

// The CUDA kernels read 32-bit offsets: a wide graph is refused on its way there, before any
// device is touched (so this holds in a CPU-only build too).
TEST(Graph, WideGraphsStayOnTheHost) {
  GraphBuildOptions o;
  o.wide_offsets = true;
  const Graph wide = gat::testing::mixed_graph(o);
  expect_error([&] { wide.to(Device::cuda); }, {"Graph::to", "i64 offsets", "cannot go to CUDA"});
  EXPECT_EQ(wide.to(Device::cpu).offset_dtype(), DType::i64);
}

// narrow_offsets: for readers of 32-bit offsets only (segments, the sampler); the boundary is
// checked on the last offset, so 2^31 is tested without 2^31 edges.
TEST(Graph, NarrowOffsetsKeepsValuesThatFitAndRefusesThoseThatDoNot) {
  const Tensor narrow = Tensor::from_vector<int32_t>({0, 2, 5}, {3});
  EXPECT_TRUE(narrow_offsets("test", narrow).same(narrow));
  const Tensor fits = Tensor::from_vector<int64_t>({0, 2, kMaxNarrowEdges}, {3});
  const Tensor n = narrow_offsets("test", fits);
  EXPECT_EQ(n.dtype(), DType::i32);
  EXPECT_EQ(n.to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 2147483647}));
  expect_error(
      [] {
        narrow_offsets("reader", Tensor::from_vector<int64_t>({0, kMaxNarrowEdges + 1}, {2}));
      },
      {"reader", "2147483648", "32-bit offsets"});
}
