// The CUDA runtime of the framework: one device, a main stream and a side stream (OnSideStream), a
// stream-ordered pool allocator, a cuBLAS handle bound to each stream.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"

namespace gat::cuda {

namespace {

struct Runtime {
  bool ok = false;
  std::string reason;
  cudaStream_t stream = nullptr;  // the main stream
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;
  // The side stream, its own cuBLAS handle (a workspace is one stream's at a time) and the events
  // that order it against the main stream: the fork, and the SideMarks' (kSideMarks made with the
  // rest and reused, more made when that many are in use).
  cudaStream_t side = nullptr;
  cublasHandle_t side_cublas = nullptr;
  void* side_cublas_workspace = nullptr;
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> free_marks;  // guarded by g_marks_mutex
  long long resident_threads = 0;
  int multiprocessors = 0;
};

constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
// SideMarks in use at once in a training step: the step's metrics, the loss's row counts, the
// backward pass's side gradients.
constexpr int kSideMarks = 8;
std::mutex g_marks_mutex;

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
    int sms = 0, threads_per_sm = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CUDA_CHECK(cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, 0));
    r.resident_threads = static_cast<long long>(sms) * threads_per_sm;
    r.multiprocessors = sms;
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    // Keep freed blocks in the pool: a training step then allocates without calling the driver.
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t threshold = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.side, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&r.fork, cudaEventDisableTiming));
    r.free_marks.resize(kSideMarks);
    for (cudaEvent_t& event : r.free_marks)
      CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    // Workspaces of our own: cuBLAS then never allocates inside a call, which graph capture
    // needs (cuBLAS's own default for Hopper is 32 MiB).
    auto make_cublas = [](cudaStream_t stream, cublasHandle_t& handle, void*& workspace) {
      CUBLAS_CHECK(cublasCreate(&handle));
      CUBLAS_CHECK(cublasSetStream(handle, stream));
      CUDA_CHECK(cudaMalloc(&workspace, kCublasWorkspaceBytes));
      CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, kCublasWorkspaceBytes));
    };
    make_cublas(r.stream, r.cublas, r.cublas_workspace);
    make_cublas(r.side, r.side_cublas, r.side_cublas_workspace);
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

// Whether this thread queues on the side stream (an OnSideStream scope is open).
thread_local bool t_on_side = false;
thread_local cudaStream_t t_own_stream = nullptr;  // while an OnOwnStream lives
// This thread's external stream and allocator (while t_external, a UseExternal scope is open):
// the stream then takes everything, the side stream's work included (in order, still correct).
// The stream may be the legacy default stream, null (PyTorch's default).
thread_local bool t_external = false;
thread_local cudaStream_t t_external_stream = nullptr;
thread_local ExternalAllocator* t_external_allocator = nullptr;

// Capture state (one capture at a time, begun on the main stream; the side stream joins it when
// it waits for the main stream's fork event).
struct CaptureState {
  bool active = false;
  std::unordered_map<void*, std::string> recorded;  // allocated while recording, not yet freed
  std::vector<void*> deferred;                      // allocated before, freed while recording
};
CaptureState g_capture;  // guarded by g_sizes_mutex
// Addresses of recordings that failed or were refused: no graph will ever allocate them, so
// freeing one only forgets it (a CUDA call would fail). Their holders should let them go before
// anything records again: a later graph may be given the same address (the trainer drops a
// failed recording's tensors at once and records at most once per run).
std::unordered_set<void*> g_dead;  // guarded by g_sizes_mutex

// Whether the capture on `stream` can still take a free node (an invalid operation ends it).
bool capture_still_valid(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) == cudaSuccess && status == cudaStreamCaptureStatusActive;
}

// Fails, before any CUDA call, an operation a capture cannot record (it would end the capture).
void check_not_capturing(const char* what) {
  std::lock_guard<std::mutex> lock(g_sizes_mutex);
  GAT_CHECK(!g_capture.active, what, " waits for the device, which a CUDA graph cannot record");
}

}  // namespace

bool built_with_cuda() { return true; }
bool available() { return runtime().ok; }
const char* unavailable_reason() { return runtime().reason.c_str(); }
long long resident_threads() { return checked_runtime("cuda::resident_threads").resident_threads; }
int multiprocessors() { return checked_runtime("cuda::multiprocessors").multiprocessors; }

cudaStream_t stream() {
  const Runtime& r = checked_runtime("cuda::stream");
  if (t_external) return t_external_stream;
  if (t_own_stream) return t_own_stream;
  return t_on_side ? r.side : r.stream;
}
cublasHandle_t cublas_handle() {
  const Runtime& r = checked_runtime("cuda::cublas_handle");
  GAT_CHECK(!t_own_stream,
            "cuda::cublas_handle: cuBLAS is not for a thread's own stream (cuda::OnOwnStream)");
  return t_on_side && !t_external ? r.side_cublas : r.cublas;  // UseExternal binds r.cublas
}

UseExternal::UseExternal(void* external_stream, ExternalAllocator* allocator) {
  const Runtime& r = checked_runtime("cuda::UseExternal");
  GAT_CHECK(!t_external, "cuda::UseExternal: scopes do not nest");
  CUBLAS_CHECK(cublasSetStream(r.cublas, static_cast<cudaStream_t>(external_stream)));
  t_external = true;
  t_external_stream = static_cast<cudaStream_t>(external_stream);
  t_external_allocator = allocator;
}

UseExternal::~UseExternal() {
  cublasSetStream(runtime().cublas, runtime().stream);  // a valid handle and stream: cannot fail
  t_external = false;
  t_external_stream = nullptr;
  t_external_allocator = nullptr;
}

ExternalAllocator* external_allocator() { return t_external_allocator; }

OnOwnStream::OnOwnStream() {
  checked_runtime("cuda::OnOwnStream");
  GAT_CHECK(!t_own_stream && !t_on_side && !t_external,
            "cuda::OnOwnStream: this thread is already on another stream (scopes do not nest)");
  cudaStream_t own = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  stream_ = own;
  t_own_stream = own;
}
OnOwnStream::~OnOwnStream() {
  t_own_stream = nullptr;
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

OnSideStream::OnSideStream() {
  const Runtime& r = checked_runtime("cuda::OnSideStream");
  GAT_CHECK(!t_on_side, "cuda::OnSideStream: already on the side stream");
  CUDA_CHECK(cudaEventRecord(r.fork, r.stream));
  CUDA_CHECK(cudaStreamWaitEvent(r.side, r.fork, 0));
  t_on_side = true;
}
OnSideStream::~OnSideStream() { t_on_side = false; }

SideMark::SideMark() {
  Runtime& r = checked_runtime("cuda::SideMark");
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_marks_mutex);
    if (!r.free_marks.empty()) event = r.free_marks.back(), r.free_marks.pop_back();
  }
  if (!event) CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  event_ = event;
  CUDA_CHECK(cudaEventRecord(event, r.side));
}
// The event goes back to the pool: a wait queued on it holds the work it marked, whatever the
// event is recorded for next.
SideMark::~SideMark() {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(g_marks_mutex);
  r.free_marks.push_back(static_cast<cudaEvent_t>(event_));
}
void SideMark::join() const {
  const Runtime& r = checked_runtime("cuda::SideMark::join");
  GAT_CHECK(!t_on_side, "cuda::SideMark::join: called on the side stream");
  CUDA_CHECK(cudaStreamWaitEvent(r.stream, static_cast<cudaEvent_t>(event_), 0));
}

// Sizes and names of live blocks, kept on the host so free() needs no device round trip, and
// the live blocks at the last high-water mark (peak_memory_breakdown).
namespace {
struct LiveBlock {
  size_t bytes;
  std::string what;
};
std::unordered_map<void*, LiveBlock>& live_blocks() {  // guarded by g_sizes_mutex
  static std::unordered_map<void*, LiveBlock> blocks;
  return blocks;
}
std::vector<LiveBlock> g_at_peak;  // guarded by g_sizes_mutex

void remember_peak() {  // with g_sizes_mutex held
  g_peak = g_allocated;
  g_at_peak.clear();
  for (const auto& entry : live_blocks()) g_at_peak.push_back(entry.second);
}
}  // namespace

void* malloc(size_t bytes, const char* what) {
  checked_runtime(what);
  void* ptr = nullptr;
  cudaError_t status = cudaMallocAsync(&ptr, bytes, stream());
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    GAT_FAIL(what, ": CUDA out of memory allocating ", bytes, " bytes (", free_bytes, " bytes free of ",
             total_bytes, "): ", cudaGetErrorString(status));
  }
  std::lock_guard<std::mutex> lock(g_sizes_mutex);
  if (g_capture.active) g_capture.recorded[ptr] = what ? what : "unnamed";
  live_blocks()[ptr] = {bytes, what ? what : "unnamed"};
  g_allocated += bytes;
  if (g_allocated > g_peak) remember_peak();
  return ptr;
}

void free(void* ptr) {
  if (!ptr) return;
  {
    std::lock_guard<std::mutex> lock(g_sizes_mutex);
    bool dead = g_dead.erase(ptr) > 0;
    if (g_capture.active) {
      if (g_capture.recorded.erase(ptr) == 0) {
        g_capture.deferred.push_back(ptr);  // not the graph's: a free node may not take it
        return;
      }
      dead = !capture_still_valid(stream());
    }
    auto it = live_blocks().find(ptr);
    if (it != live_blocks().end()) {
      g_allocated -= it->second.bytes;
      live_blocks().erase(it);
    }
    if (dead) return;
  }
  // No throw from destructors: an unexpected failure is cleared so that the next launch check
  // does not report it.
  if (cudaFreeAsync(ptr, stream()) != cudaSuccess) cudaGetLastError();
}

void memcpy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes) {
  checked_runtime("cuda::memcpy");
  cudaMemcpyKind kind = dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  if (!dst_on_device || !src_on_device) check_not_capturing("a copy between host and device");
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream()));
  if (!dst_on_device || !src_on_device) CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void memset_zero(void* ptr, size_t bytes) {
  checked_runtime("cuda::memset_zero");
  CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream()));
}

void synchronize() {
  if (!runtime().ok) return;
  check_not_capturing("cuda::synchronize");
  CUDA_CHECK(cudaStreamSynchronize(runtime().stream));
  CUDA_CHECK(cudaStreamSynchronize(runtime().side));  // work not joined yet
}

// ---- CUDA graphs ----------------------------------------------------------------------------

bool capturing() {
  std::lock_guard<std::mutex> lock(g_sizes_mutex);
  return g_capture.active;
}

CapturedGraph capture(const std::function<void()>& record, std::string* why) {
  Runtime& r = checked_runtime("cuda::capture");
  GAT_CHECK(!capturing(), "cuda::capture: a capture is already recording");
  GAT_CHECK(!t_on_side, "cuda::capture: called on the side stream (a capture begins on the main stream)");
  synchronize();
  CUDA_CHECK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
  {
    std::lock_guard<std::mutex> lock(g_sizes_mutex);
    g_capture = CaptureState{};
    g_capture.active = true;
  }
  std::string failure;
  try {
    record();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(r.stream, &graph);
  CaptureState state;
  {
    std::lock_guard<std::mutex> lock(g_sizes_mutex);
    state = std::move(g_capture);
    g_capture = CaptureState{};
    // Anything still recorded fails the capture below: no graph will make these addresses.
    for (const auto& kept : state.recorded) g_dead.insert(kept.first);
  }
  if (failure.empty() && ended != cudaSuccess)
    failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
  if (failure.empty() && !state.recorded.empty())
    failure = std::to_string(state.recorded.size()) + " allocation(s) made while recording outlive it (" +
              state.recorded.begin()->second + ", ...): a recorded graph writes its results " +
              "into memory allocated before it";
  CapturedGraph out;
  out.kept_alive_ = std::move(state.deferred);
  if (failure.empty()) {
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    if (made == cudaSuccess)
      out.exec_ = exec;
    else
      failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made);
  }
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a failed capture leaves non-sticky errors behind; the stream is fine
  if (!failure.empty()) {
    out.release();  // frees what was kept alive: nothing will replay
    if (why) *why = failure;
  }
  return out;
}

CapturedGraph::~CapturedGraph() { release(); }

CapturedGraph::CapturedGraph(CapturedGraph&& other) noexcept
    : exec_(other.exec_), kept_alive_(std::move(other.kept_alive_)) {
  other.exec_ = nullptr;
  other.kept_alive_.clear();
}

CapturedGraph& CapturedGraph::operator=(CapturedGraph&& other) noexcept {
  if (this != &other) {
    release();
    exec_ = other.exec_;
    kept_alive_ = std::move(other.kept_alive_);
    other.exec_ = nullptr;
    other.kept_alive_.clear();
  }
  return *this;
}

void CapturedGraph::release() {
  if (exec_) {
    cudaStreamSynchronize(runtime().stream);  // a replay in flight may still use what follows
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    exec_ = nullptr;
  }
  for (void* p : kept_alive_) free(p);
  kept_alive_.clear();
}

bool CapturedGraph::replay() const {
  GAT_CHECK(valid(), "CapturedGraph::replay: nothing was captured");
  const cudaError_t launched = cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), runtime().stream);
  if (launched == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: the stream and the context stay usable
    return false;
  }
  CUDA_CHECK(launched);
  return true;
}

void release_cached_memory() {
  checked_runtime("cuda::release_cached_memory");
  synchronize();
  cudaMemPool_t pool;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
  CUDA_CHECK(cudaDeviceGraphMemTrim(0));
}

namespace {
__global__ void set_counter_kernel(uint64_t* counter, uint64_t value) { *counter = value; }
__global__ void advance_counter_kernel(uint64_t* counter, uint64_t by) { *counter += by; }
}  // namespace

DeviceCounter::DeviceCounter() : ptr_(static_cast<uint64_t*>(malloc(sizeof(uint64_t), "DeviceCounter"))) {
  set(0);
}
DeviceCounter::~DeviceCounter() { free(ptr_); }

void DeviceCounter::set(uint64_t value) {
  set_counter_kernel<<<1, 1, 0, stream()>>>(ptr_, value);
  CUDA_CHECK_LAUNCH("set_counter_kernel");
}

void DeviceCounter::advance(uint64_t by) {
  advance_counter_kernel<<<1, 1, 0, stream()>>>(ptr_, by);
  CUDA_CHECK_LAUNCH("advance_counter_kernel");
}

Event::Event() {
  checked_runtime("cuda::Event");
  cudaEvent_t event;
  CUDA_CHECK(cudaEventCreate(&event));
  event_ = event;
}
Event::~Event() { cudaEventDestroy(static_cast<cudaEvent_t>(event_)); }
void Event::record() { CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), stream())); }
void Event::synchronize() const { CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_))); }
void Event::join() const { CUDA_CHECK(cudaStreamWaitEvent(stream(), static_cast<cudaEvent_t>(event_), 0)); }
double Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_),
                                  static_cast<cudaEvent_t>(end.event_)));
  return ms;
}

HostBuffer::HostBuffer(size_t bytes) : bytes_(bytes) {
  checked_runtime("cuda::HostBuffer");
  CUDA_CHECK(cudaMallocHost(&data_, bytes));
}
HostBuffer::~HostBuffer() { cudaFreeHost(data_); }
void HostBuffer::copy_from_device(const void* src, size_t bytes) {
  GAT_CHECK(bytes <= bytes_, "cuda::HostBuffer::copy_from_device: ", bytes, " bytes do not fit the buffer's ",
            bytes_);
  check_not_capturing("a copy to the host");
  CUDA_CHECK(cudaMemcpyAsync(data_, src, bytes, cudaMemcpyDeviceToHost, stream()));
}

void HostBuffer::copy_to_device(void* dst, size_t bytes) const {
  GAT_CHECK(bytes <= bytes_, "cuda::HostBuffer::copy_to_device: ", bytes, " bytes exceed the buffer's ",
            bytes_);
  CUDA_CHECK(cudaMemcpyAsync(dst, data_, bytes, cudaMemcpyHostToDevice, stream()));
}

namespace {

// The ranges HostMappings hold, by first address: their holders and whether a HostMapping
// registered the range (the last holder then unregisters it).
struct MappedRange {
  size_t bytes = 0;
  const char* device_data = nullptr;
  int holders = 0;
  bool registered_here = false;
};
std::mutex g_mapped_mutex;
std::map<const char*, MappedRange> g_mapped;  // guarded by g_mapped_mutex

// The held range that contains [data, data + bytes), or end().
std::map<const char*, MappedRange>::iterator held_range(const char* data, size_t bytes) {
  auto after = g_mapped.upper_bound(data);
  if (after == g_mapped.begin()) return g_mapped.end();
  const auto range = std::prev(after);
  return static_cast<size_t>(data - range->first) + bytes <= range->second.bytes ? range : g_mapped.end();
}

// Whether a held range overlaps [data, data + bytes) (the registry holds a few ranges per loader).
bool overlaps_held(const char* data, size_t bytes) {
  for (auto range = g_mapped.begin(); range != g_mapped.end() && range->first < data + bytes; ++range)
    if (range->first + range->second.bytes > data) return true;
  return false;
}

// What the driver knows of address p. cudaPointerGetAttributes answers for any address (pageable
// host memory is cudaMemoryTypeUnregistered): HostMapping asks it instead of trying calls that
// fail, so that no error is left on this thread for the next launch check to report.
cudaPointerAttributes attributes_of(const char* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // not sticky: an address the driver does not know, so not page-locked
    attributes = cudaPointerAttributes{};
    attributes.type = cudaMemoryTypeUnregistered;
  }
  return attributes;
}

// data's address for a kernel where [data, data + bytes) is page-locked and mapped, its first and
// last bytes in one piece; else null.
const char* mapped_address(const char* data, size_t bytes) {
  const cudaPointerAttributes first = attributes_of(data), last = attributes_of(data + bytes - 1);
  if (first.type != cudaMemoryTypeHost || last.type != cudaMemoryTypeHost || !first.devicePointer ||
      !last.devicePointer ||
      static_cast<const char*>(last.devicePointer) - static_cast<const char*>(first.devicePointer) !=
          static_cast<std::ptrdiff_t>(bytes - 1))
    return nullptr;
  return static_cast<const char*>(first.devicePointer);
}

}  // namespace

HostMapping::HostMapping(const void* data, size_t bytes) {
  checked_runtime("cuda::HostMapping");
  GAT_CHECK(data != nullptr && bytes > 0, "cuda::HostMapping: nothing to map (", bytes, " bytes)");
  const char* first = static_cast<const char*>(data);
  const cudaMemoryType type = attributes_of(first).type;
  GAT_CHECK(type == cudaMemoryTypeUnregistered || type == cudaMemoryTypeHost, "cuda::HostMapping: ", bytes,
            " bytes at ", data, " are not host memory (",
            type == cudaMemoryTypeDevice ? "device memory" : "managed memory", ")");
  std::lock_guard<std::mutex> lock(g_mapped_mutex);
  const auto held = held_range(first, bytes);
  if (held != g_mapped.end()) {
    ++held->second.holders;
    data_ = held->first;
    device_data_ = held->second.device_data + (first - held->first);
    return;
  }
  // Page-locked by other code already: used as it is. Else registered here.
  const char* device_data = mapped_address(first, bytes);
  const bool registered_here = device_data == nullptr;
  if (registered_here) {
    // The driver would refuse it too (cudaErrorHostMemoryAlreadyRegistered), leaving the error.
    GAT_CHECK(!overlaps_held(first, bytes), "cuda::HostMapping: ", bytes,
              " bytes are page-locked elsewhere in part only (they overlap a range mapped here)");
    int read_only = 0;
    if (cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, 0) != cudaSuccess) {
      cudaGetLastError();  // not sticky: registered writable
      read_only = 0;
    }
    const unsigned flags = cudaHostRegisterMapped | (read_only ? cudaHostRegisterReadOnly : 0u);
    const cudaError_t status = cudaHostRegister(const_cast<char*>(first), bytes, flags);
    if (status != cudaSuccess) {
      cudaGetLastError();  // not sticky
      GAT_CHECK(status != cudaErrorHostMemoryAlreadyRegistered, "cuda::HostMapping: ", bytes,
                " bytes are page-locked elsewhere in part only (cudaHostRegister: ", cudaGetErrorName(status),
                ")");
      GAT_FAIL("cuda::HostMapping: cudaHostRegister of ", bytes, " bytes refused: ", cudaGetErrorName(status),
               " (", cudaGetErrorString(status), ")");
    }
    device_data = mapped_address(first, bytes);
    if (!device_data) {
      if (cudaHostUnregister(const_cast<char*>(first)) != cudaSuccess) cudaGetLastError();
      GAT_FAIL("cuda::HostMapping: ", bytes, " bytes were registered but have no device address");
    }
  }
  g_mapped[first] = {bytes, device_data, 1, registered_here};
  data_ = first;
  device_data_ = device_data;
}

HostMapping::~HostMapping() {
  std::lock_guard<std::mutex> lock(g_mapped_mutex);
  const auto held = g_mapped.find(static_cast<const char*>(data_));
  if (--held->second.holders > 0) return;
  if (held->second.registered_here && cudaHostUnregister(const_cast<void*>(data_)) != cudaSuccess)
    cudaGetLastError();  // no throw from a destructor
  g_mapped.erase(held);
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
  remember_peak();
}

std::vector<PeakBlocks> peak_memory_breakdown() {
  std::map<std::pair<std::string, size_t>, size_t> counts;  // (name, bytes) -> blocks
  {
    std::lock_guard<std::mutex> lock(g_sizes_mutex);
    for (const LiveBlock& b : g_at_peak) ++counts[{b.what, b.bytes}];
  }
  std::vector<PeakBlocks> out;
  for (const auto& [key, count] : counts) out.push_back({key.first, key.second, count});
  std::sort(out.begin(), out.end(), [](const PeakBlocks& a, const PeakBlocks& b) {
    return a.bytes * a.count != b.bytes * b.count ? a.bytes * a.count > b.bytes * b.count : a.what < b.what;
  });
  return out;
}

}  // namespace gat::cuda
