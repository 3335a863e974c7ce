// The CUDA runtime of the framework: one device, one stream, a stream-ordered pool allocator,
// one cuBLAS handle bound to the stream.
#include <mutex>
#include <string>
#include <unordered_map>

#include "framework/cuda_check.h"
#include "framework/cuda_runtime.h"

namespace gat::cuda {

namespace {

struct Runtime {
  bool ok = false;
  std::string reason;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
};

Runtime& runtime() {
  static Runtime rt = [] {
    Runtime r;
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
      r.reason = std::string("no CUDA device: ") +
                 (status != cudaSuccess ? cudaGetErrorString(status) : "device count is 0");
      cudaGetLastError();  // clear the sticky-free error so later queries are clean
      return r;
    }
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    // Keep freed blocks in the pool: a training step then allocates without calling the driver.
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t threshold = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    CUBLAS_CHECK(cublasCreate(&r.cublas));
    CUBLAS_CHECK(cublasSetStream(r.cublas, r.stream));
    r.ok = true;
    return r;
  }();
  return rt;
}

Runtime& checked_runtime(const char* what) {
  Runtime& r = runtime();
  GAT_CHECK(r.ok, what, ": CUDA is not available (", r.reason, ")");
  return r;
}

size_t g_allocated = 0;  // guarded by g_sizes_mutex
size_t g_peak = 0;
std::mutex g_sizes_mutex;

}  // namespace

bool built_with_cuda() { return true; }
bool available() { return runtime().ok; }
const char* unavailable_reason() { return runtime().reason.c_str(); }

cudaStream_t stream() { return checked_runtime("cuda::stream").stream; }
cublasHandle_t cublas_handle() { return checked_runtime("cuda::cublas_handle").cublas; }

// Sizes of live blocks, kept on the host so free() needs no device round trip.
namespace {
std::unordered_map<void*, size_t>& live_sizes() {
  static std::unordered_map<void*, size_t> sizes;
  return sizes;
}
}  // namespace

void* malloc(size_t bytes, const char* what) {
  Runtime& r = checked_runtime(what);
  void* ptr = nullptr;
  cudaError_t status = cudaMallocAsync(&ptr, bytes, r.stream);
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    GAT_FAIL(what, ": CUDA out of memory allocating ", bytes, " bytes (", free_bytes,
             " bytes free of ", total_bytes, "): ", cudaGetErrorString(status));
  }
  std::lock_guard<std::mutex> lock(g_sizes_mutex);
  live_sizes()[ptr] = bytes;
  g_allocated += bytes;
  if (g_allocated > g_peak) g_peak = g_allocated;
  return ptr;
}

void free(void* ptr) {
  if (!ptr) return;
  {
    std::lock_guard<std::mutex> lock(g_sizes_mutex);
    auto it = live_sizes().find(ptr);
    if (it != live_sizes().end()) {
      g_allocated -= it->second;
      live_sizes().erase(it);
    }
  }
  cudaFreeAsync(ptr, runtime().stream);  // no throw from destructors; errors surface later
}

void memcpy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes) {
  Runtime& r = checked_runtime("cuda::memcpy");
  cudaMemcpyKind kind = dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, r.stream));
  if (!dst_on_device || !src_on_device) CUDA_CHECK(cudaStreamSynchronize(r.stream));
}

void memset_zero(void* ptr, size_t bytes) {
  CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, checked_runtime("cuda::memset_zero").stream));
}

void synchronize() {
  if (runtime().ok) CUDA_CHECK(cudaStreamSynchronize(runtime().stream));
}

size_t memory_allocated() {
  std::lock_guard<std::mutex> lock(g_sizes_mutex);
  return g_allocated;
}
size_t peak_memory_allocated() {
  std::lock_guard<std::mutex> lock(g_sizes_mutex);
  return g_peak;
}
void reset_peak_memory() {
  std::lock_guard<std::mutex> lock(g_sizes_mutex);
  g_peak = g_allocated;
}

}  // namespace gat::cuda
