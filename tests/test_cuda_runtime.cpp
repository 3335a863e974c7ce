// The CUDA runtime (cuda_runtime.h) and side work on the device (side_work.h): CUDA graph
// recording, side streams joined before the main stream reads their results, the peak-memory
// breakdown, an external allocator and stream, a thread's own stream, host memory mapped for kernels. CUDA
// only: each test skips without a device.
#include <gtest/gtest.h>
#if GAT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/fill.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/side_work.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

TEST(CudaRuntime, ARecordedGraphWritesIntoEarlierMemoryAndKeepsNoneOfItsOwn) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  const Tensor a = random_tensor({5, 3}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor b = random_tensor({3, 4}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor c = random_tensor({4, 2}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor want = ops::matmul(ops::matmul(a, b), c);  // (5, 2)
  Tensor out = Tensor::zeros(want.shape(), DType::f32, Device::cuda);
  std::string why;
  // Temporaries made and freed while recording, the result copied into `out`.
  const cuda::CapturedGraph graph =
      cuda::capture([&] { out.copy_(ops::matmul(ops::matmul(a, b), c)); }, &why);
  ASSERT_TRUE(graph.valid()) << why;
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(want.numel(), 0.0f));  // nothing ran yet
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_TRUE(graph.replay()) << "replay " << replay;
    EXPECT_EQ(out.to_vector<float>(), want.to_vector<float>()) << "replay " << replay;
    out.zero_();
  }
  // A recording that would keep memory of its own is refused, and the stream works afterwards.
  Tensor kept;
  const cuda::CapturedGraph refused = cuda::capture([&] { kept = ops::matmul(a, b); }, &why);
  EXPECT_FALSE(refused.valid());
  EXPECT_NE(why.find("outlive"), std::string::npos) << why;
  kept = Tensor();
  expect_close(ops::matmul(a, b), ops::matmul(a.to(Device::cpu), b.to(Device::cpu)), "after refusal", 1e-5);
}

// Work that keeps the device busy for milliseconds in one launch (a product of two (4096, 4096)
// f64 matrices: the host queues what follows long before it ends) and then fills `out`, an (n,)
// f64 tensor, with `value`. Read on another stream before the product has finished, out holds
// zeros. The caller keeps all three tensors until it has read out: a free of the matrices would
// let another stream's allocation wait for the product.
struct SlowFill {
  Tensor out, matrix, product;
};
SlowFill slow_fill(int64_t n, double value) {
  SlowFill s;
  s.out = Tensor::zeros({n}, DType::f64, Device::cuda);
  s.matrix = Tensor::full({4096, 4096}, 1.0 / 4096, DType::f64, Device::cuda);
  s.product = ops::matmul(s.matrix, s.matrix);
  ops::fill_(s.out, value);
  return s;
}

// slow_fill as side work's outputs (out first): the caller's SideWork keeps all three to its join.
std::vector<Tensor> slow_fill_beside(int64_t n, double value) {
  SlowFill s = slow_fill(n, value);
  return {s.out, s.matrix, s.product};
}

TEST(CudaRuntime, SideWorkIsReadOnlyAfterItsJoin) {
  GAT_SKIP_WITHOUT_CUDA();
  const int64_t n = 1000;
  const Tensor small = Tensor::zeros({1}, DType::f64, Device::cuda);
  SideWork side;
  // A small CUDA input sends the work to the side stream.
  const Tensor out =
      side.run({small}, [&](const std::vector<Tensor>&) { return slow_fill_beside(n, 3.0); })[0];
  EXPECT_TRUE(side.pending(out));
  side.join();
  EXPECT_FALSE(side.pending(out));
  EXPECT_EQ(out.to_vector<double>(), std::vector<double>(n, 3.0));  // copied on the main stream

  // Side work reads what the main stream queued before it, finished or not.
  const SlowFill made_on_main = slow_fill(n, 5.0);
  const Tensor doubled = side.run({made_on_main.out}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::scale(in[0], 2.0)};
  })[0];
  side.join();
  EXPECT_EQ(doubled.to_vector<double>(), std::vector<double>(n, 10.0));

  // Inputs on the CPU, or more than kMaxSideBytes of them, run where they are called.
  const Tensor on_cpu = Tensor::full({4}, 1.0, DType::f64, Device::cpu);
  const Tensor big = Tensor::zeros({int64_t(SideWork::kMaxSideBytes / 8 + 1)}, DType::f64, Device::cuda);
  for (const Tensor& input : {on_cpu, big}) {
    const Tensor twice = side.run({input}, [](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{ops::scale(in[0], 2.0)};
    })[0];
    EXPECT_FALSE(side.pending(twice)) << input.describe();
  }
  // An output may not be one of the inputs (it would be freed on the main stream too early).
  expect_error([&] { side.run({small}, [](const std::vector<Tensor>& in) { return in; }); },
               {"shares the storage"});
}

// y = x, whose backward hands x a gradient of `value`s made by slow side work of the pass.
Tensor with_side_gradient(const Tensor& x, double value) {
  return autograd::record("side gradient", x.detach().clone(), {x}, [value, n = x.numel()](const Tensor& g) {
    return std::vector<Tensor>{autograd::side_gradients(
        {g}, [&](const std::vector<Tensor>&) { return slow_fill_beside(n, value); })[0]};
  });
}

TEST(CudaRuntime, ABackwardPassJoinsItsSideGradientsBeforeTheMainStreamReadsThem) {
  GAT_SKIP_WITHOUT_CUDA();
  const int64_t n = 1000;
  auto weight = [&] { return Tensor::full({n}, 1.0, DType::f64, Device::cuda).set_requires_grad(true); };
  {  // straight into the parameter's .grad, read after the pass
    Tensor w = weight();
    ops::sum(with_side_gradient(w, 3.0)).backward();
    EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(n, 3.0));
  }
  {  // into an intermediate tensor, whose backward reads it on the main stream: d w = 2 * 3
    Tensor w = weight();
    ops::sum(with_side_gradient(ops::scale(w, 2.0), 3.0)).backward();
    EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(n, 6.0));
  }
  for (bool side_first : {true, false}) {  // added to, or added to a main-stream gradient: 3 + 5
    Tensor w = weight();
    const Tensor on_side = ops::sum(with_side_gradient(w, 3.0));
    const Tensor on_main = ops::sum(ops::scale(w, 5.0));
    ops::add(side_first ? on_side : on_main, side_first ? on_main : on_side).backward();
    EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(n, 8.0)) << "side first " << side_first;
  }
}

TEST(CudaRuntime, PeakBreakdownListsTheBlocksAliveAtTheHighWaterMark) {
  GAT_SKIP_WITHOUT_CUDA();
  cuda::synchronize();
  cuda::reset_peak_memory();
  const size_t before = cuda::peak_memory_allocated();
  {
    const Tensor big = Tensor::empty({1000, 64}, DType::f32, Device::cuda, "test big block");
    const Tensor small1 = Tensor::empty({10}, DType::f64, Device::cuda, "test small block");
    const Tensor small2 = Tensor::empty({10}, DType::f64, Device::cuda, "test small block");
  }
  // Freed, then a smaller block: the peak and its breakdown stay those of the three blocks.
  const Tensor later = Tensor::empty({4}, DType::f32, Device::cuda, "test later block");
  EXPECT_EQ(cuda::peak_memory_allocated(), before + 1000 * 64 * 4 + 2 * 10 * 8);
  std::map<std::string, std::pair<size_t, size_t>> seen;  // name -> (bytes, count)
  for (const cuda::PeakBlocks& b : cuda::peak_memory_breakdown()) seen[b.what] = {b.bytes, b.count};
  EXPECT_EQ(seen["test big block"], std::make_pair(size_t{1000 * 64 * 4}, size_t{1}));
  EXPECT_EQ(seen["test small block"], std::make_pair(size_t{80}, size_t{2}));
  EXPECT_EQ(seen.count("test later block"), 0u);
  const std::vector<cuda::PeakBlocks> blocks = cuda::peak_memory_breakdown();
  ASSERT_FALSE(blocks.empty());
  EXPECT_EQ(blocks.front().what, "test big block");  // the most bytes first
}

#if GAT_WITH_CUDA
namespace {
// Device memory from gat's pool with a count of what is live: an allocator that is not gat's.
class CountingAllocator final : public cuda::ExternalAllocator {
 public:
  void* allocate(size_t bytes) override {
    ++live;
    return cuda::malloc(bytes, "CountingAllocator");
  }
  void deallocate(void* ptr) noexcept override {
    --live;
    cuda::free(ptr);
  }
  int live = 0;
};
}  // namespace

// cuda::UseExternal: every tensor made inside the scope comes from the external allocator and
// goes back to it, even when freed after the scope; results are those of gat's own stream.
TEST(CudaRuntime, AnExternalAllocatorAndStreamServeEveryTensorMadeInTheirScope) {
  GAT_SKIP_WITHOUT_CUDA();
  CountingAllocator allocator;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, Device::cuda);
  const Tensor b = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2}, Device::cuda);
  const std::vector<float> want = ops::matmul(a, b).to_vector<float>();  // cuBLAS on gat's stream
  Tensor kept;
  {
    cuda::UseExternal use(stream, &allocator);
    EXPECT_EQ(cuda::external_allocator(), &allocator);
    expect_error([&] { cuda::UseExternal again(stream, &allocator); }, {"do not nest"});
    kept = ops::matmul(a, b);  // cuBLAS and the output on the external stream and memory
    EXPECT_GE(allocator.live, 1);
    EXPECT_EQ(kept.to_vector<float>(), want);
  }
  EXPECT_EQ(cuda::external_allocator(), nullptr);
  EXPECT_EQ(allocator.live, 1);  // `kept` outlives the scope and still belongs to the allocator
  kept = Tensor();
  EXPECT_EQ(allocator.live, 0);
  EXPECT_EQ(ops::matmul(a, b).to_vector<float>(), want);  // gat's own stream and pool again
  EXPECT_EQ(allocator.live, 0);
  {
    cuda::UseExternal use(nullptr, &allocator);  // the legacy default stream, PyTorch's default
    EXPECT_EQ(ops::matmul(a, b).to_vector<float>(), want);
  }
  EXPECT_EQ(allocator.live, 0);
  cudaStreamDestroy(stream);
}
#endif  // GAT_WITH_CUDA

// A thread's own stream (the mini-batch loader's): a page-locked buffer's copy to memory
// allocated there, read on the main stream after the main stream joined an event recorded after
// the copy, then freed on the main stream; the host reuses the buffer after Event::synchronize.
// cuBLAS and a second scope are refused there.
TEST(CudaRuntime, AThreadsOwnStreamIsReadOnTheMainStreamAfterItsEventIsJoined) {
  GAT_SKIP_WITHOUT_CUDA();
  const int64_t n = int64_t{1} << 25;  // 256 MiB of f64: a copy of milliseconds
  cuda::HostBuffer pinned(static_cast<size_t>(n) * sizeof(double));
  Tensor on_device;
  std::shared_ptr<cuda::Event> copied;
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      cuda::OnOwnStream own;
      for (int round = 1; round <= 2; ++round) {
        if (copied) copied->synchronize();  // the copy out of the buffer has run
        double* host = static_cast<double*>(pinned.data());
        for (int64_t i = 0; i < n; ++i) host[i] = static_cast<double>(round);
        on_device = Tensor::empty({n}, DType::f64, Device::cuda, "own stream test");
        pinned.copy_to_device(on_device.raw_data(), pinned.size());
        copied = std::make_shared<cuda::Event>();
        copied->record();
      }
      expect_error(
          [] {
            ops::matmul(Tensor::zeros({512, 512}, DType::f64, Device::cuda),
                        Tensor::zeros({512, 512}, DType::f64, Device::cuda));
          },
          {"cuBLAS is not for a thread's own stream"});
      expect_error([] { cuda::OnOwnStream nested; }, {"scopes do not nest"});
    } catch (...) {
      error = std::current_exception();
    }
  });
  worker.join();
  if (error) std::rethrow_exception(error);
  copied->join();
  const std::vector<double> got = ops::scale(on_device, 1.0).to_vector<double>();  // on the main stream
  EXPECT_EQ(got.front(), 2.0);
  EXPECT_EQ(got.back(), 2.0);
  EXPECT_EQ(std::count(got.begin(), got.end(), 2.0), n);
  on_device = Tensor();  // freed on the main stream
}

// Host memory mapped for kernels (cuda::HostMapping), as the mini-batch loader reads its
// features: a gather through the device address gives the host's rows; mappings of one range, or
// of a range inside a held one, share its registration, which outlives all but the last of them
// and is then undone; memory page-locked elsewhere is used and left page-locked; a range that
// only partly overlaps a held one or one registered by other code, device memory, or no bytes, is
// refused. No path leaves a CUDA error on the thread for the next launch check (issue 47).
TEST(CudaRuntime, HostMappingsShareOneRegistrationAndTheLastUndoesIt) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(4);
  const int64_t n = 300, f = 12;
  const Tensor host = random_tensor({n, f}, rng, -1, 1, DType::f32, Device::cpu);
  const Tensor rows = Tensor::from_vector(std::vector<int32_t>{99, 0, 7, 7, 50}, {5});
  const size_t row_bytes = static_cast<size_t>(f) * sizeof(float);
  // Rows `rows` of the n - first rows from row `first`, read by the GPU through `mapping`.
  auto gathered = [&](const cuda::HostMapping& mapping, int64_t first) {
    const Tensor view =
        Tensor::from_blob(const_cast<void*>(mapping.device_data()), {n - first, f}, DType::f32, Device::cuda);
    return ops::index_rows(view, rows.to(Device::cuda)).to(Device::cpu);
  };
  const char* data = static_cast<const char*>(host.raw_data());
  auto whole = std::make_unique<cuda::HostMapping>(data, host.nbytes());
  EXPECT_TRUE(bitwise_equal(gathered(*whole, 0), ops::index_rows(host, rows)));
  auto again = std::make_unique<cuda::HostMapping>(data, host.nbytes());
  EXPECT_EQ(again->device_data(), whole->device_data());
  const size_t tail = 100 * row_bytes;  // rows 100 and after
  auto inside = std::make_unique<cuda::HostMapping>(data + tail, host.nbytes() - tail);
  EXPECT_EQ(inside->device_data(), static_cast<const char*>(whole->device_data()) + tail);
  whole.reset();  // the others still hold the registration
  EXPECT_TRUE(bitwise_equal(gathered(*again, 0), ops::index_rows(host, rows)));
  EXPECT_TRUE(bitwise_equal(gathered(*inside, 100), ops::index_rows(host.rows(100, n), rows)));
  again.reset();
  inside.reset();
#if GAT_WITH_CUDA
  // Undone: the range registers again (a range still registered would be refused).
  ASSERT_EQ(cudaHostRegister(const_cast<char*>(data), host.nbytes(), cudaHostRegisterDefault), cudaSuccess);
  ASSERT_EQ(cudaHostUnregister(const_cast<char*>(data)), cudaSuccess);
#endif
  expect_no_cuda_error_left("mappings made and undone");
  {
    const cuda::HostMapping first_rows(data, tail);
    expect_error([&] { cuda::HostMapping partly(data, host.nbytes()); },
                 {"page-locked elsewhere in part only"});
    expect_no_cuda_error_left("a partial overlap with a held range refused");
    EXPECT_TRUE(bitwise_equal(gathered(first_rows, 0), ops::index_rows(host, rows)));  // rows below 100
  }
#if GAT_WITH_CUDA
  // Rows below 100 registered by other code, not held here: the driver refuses the whole range.
  ASSERT_EQ(cudaHostRegister(const_cast<char*>(data), tail, cudaHostRegisterDefault), cudaSuccess);
  expect_error([&] { cuda::HostMapping partly(data, host.nbytes()); },
               {"page-locked elsewhere in part only"});
  expect_no_cuda_error_left("a partial overlap with another registration refused by the driver");
  ASSERT_EQ(cudaHostUnregister(const_cast<char*>(data)), cudaSuccess);
#endif
  const Tensor on_device = host.to(Device::cuda);
  expect_error([&] { cuda::HostMapping device_memory(on_device.raw_data(), on_device.nbytes()); },
               {"not host memory", "device memory"});
  expect_no_cuda_error_left("device memory refused");
  expect_error([&] { cuda::HostMapping none(data, 0); }, {"nothing to map"});
  // Page-locked by cudaMallocHost: mapped as it is, still page-locked after the mapping.
  cuda::HostBuffer pinned(host.nbytes());
  std::copy(data, data + host.nbytes(), static_cast<char*>(pinned.data()));
  {
    const cuda::HostMapping mapped(pinned.data(), pinned.size());
    EXPECT_TRUE(bitwise_equal(gathered(mapped, 0), ops::index_rows(host, rows)));
  }
  expect_no_cuda_error_left("memory page-locked elsewhere mapped");
#if GAT_WITH_CUDA
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, pinned.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
#endif
}
