// The host side of the CUDA backend, callable from any translation unit.
//
// In builds without CUDA (GAT_WITH_CUDA=0) these exist too: cuda_available() is false and
// every other function throws a gat::Error saying the build has no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gat::cuda {

bool built_with_cuda();
// True when the build has CUDA and a device can be used (false, never throws, otherwise).
bool available();
// Threads the device keeps resident at once: multiprocessors x threads per multiprocessor (for
// kernels that size a grid-stride grid to the device). Throws without CUDA.
long long resident_threads();
int multiprocessors();  // the device's streaming multiprocessors. Throws without CUDA.
// Why available() is false ("built without CUDA", "no CUDA device: ..."), empty when true.
const char* unavailable_reason();

// Two streams: the main one, where everything is queued by default, and a side stream for work
// that nothing on the main stream needs until a join (a parameter's gradient, an epoch's
// metrics). On a device that small kernels leave mostly idle (Cora's step) the side work runs
// beside the main stream's kernels; in a recorded graph it is a parallel branch.
//
// While an OnSideStream lives, this thread's work (kernels, allocations, frees, copies, cuBLAS)
// goes to the side stream, after everything the main stream had queued when the scope opened;
// a SideMark made after it and joined makes everything the main stream queues afterwards wait
// for that work. Whoever queues side work keeps alive what it reads and writes until the join: a
// main-stream free would hand that memory to the main stream's next allocation while the side
// stream may still use it (SideWork in side_work.h does this). Every side scope is joined
// before a recording ends.
class OnSideStream {
 public:
  OnSideStream();   // the side stream waits for the main stream's work so far. Throws without CUDA.
  ~OnSideStream();  // back on the main stream
  OnSideStream(const OnSideStream&) = delete;
  OnSideStream& operator=(const OnSideStream&) = delete;
};
// A point of the side stream's work: join() makes everything the main stream queues afterwards
// wait for the side work queued before the mark, and not for side work queued after it (an
// epoch's metrics queued behind a loss's row counts: the loss's backward waits for the counts
// alone).
class SideMark {
 public:
  SideMark();  // after the side work queued so far. Throws without CUDA.
  ~SideMark();
  SideMark(const SideMark&) = delete;
  SideMark& operator=(const SideMark&) = delete;
  void join() const;

 private:
  void* event_ = nullptr;  // cudaEvent_t
};

// A stream of this thread's own, for a background thread that prepares work for the main stream
// (the mini-batch loader's sampling and copies): while an OnOwnStream lives, this thread's
// kernels, allocations and copies go to it, and it waits for nothing queued on the main stream.
// An Event recorded there and joined (Event::join) makes the main stream's later work wait for
// it; memory allocated there may then be used and freed on the main stream. cuBLAS is not for it
// (its handles are bound to the main and side streams): cublas_handle() throws there. The
// destructor waits for the stream's work. Throws without CUDA; scopes do not nest.
class OnOwnStream {
 public:
  OnOwnStream();
  ~OnOwnStream();
  OnOwnStream(const OnOwnStream&) = delete;
  OnOwnStream& operator=(const OnOwnStream&) = delete;

 private:
  void* stream_ = nullptr;  // cudaStream_t
};

// Memory and a stream that a host framework owns: inside PyTorch, its caching allocator and
// torch.cuda.current_stream(), so that a process has one memory pool and gat's kernels are
// ordered with PyTorch's without any host synchronisation.
class ExternalAllocator {
 public:
  virtual ~ExternalAllocator() = default;
  // Device memory for the stream installed with it (UseExternal); throws gat::Error on failure.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) noexcept = 0;
};
// While a UseExternal lives, this thread queues its kernels, copies and cuBLAS calls on `stream`
// (a cudaStream_t; null is the legacy default stream, PyTorch's default) and, when `allocator`
// is not null, takes the device memory of every new tensor
// from it (each storage returns its memory to the allocator it came from, whenever it is freed;
// the allocator must outlive it). Scopes do not nest. Throws without CUDA.
class UseExternal {
 public:
  UseExternal(void* stream, ExternalAllocator* allocator);
  ~UseExternal();
  UseExternal(const UseExternal&) = delete;
  UseExternal& operator=(const UseExternal&) = delete;
};
ExternalAllocator* external_allocator();  // this thread's, or null

// Stream-ordered allocation on the current stream (cudaMallocAsync). Out-of-memory throws a
// gat::Error naming `what` and the bytes asked for.
void* malloc(size_t bytes, const char* what);
void free(void* ptr);
void memcpy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes);
void memset_zero(void* ptr, size_t bytes);
void synchronize();  // waits for both streams
// Waits for both streams, then returns the memory the allocator keeps cached for reuse (freed
// blocks of the stream-ordered pool, and what destroyed graphs held) to the device: before the
// first replay of a recorded step, whose allocations come from the graphs' own pool.
void release_cached_memory();

// CUDA graphs. capture(record) runs `record` with the stream in capture mode and instantiates
// what it queued; replay() queues all of it again in one launch. While recording, allocations
// become the graph's own (stream-ordered, same addresses at every replay) and must be freed
// before the recording ends: a graph writes its results into tensors allocated before it
// (e.g. with Tensor::copy_), and one that would keep memory of its own fails to record. (Memory
// kept past a recording gets an address the graph also uses for a temporary, which is legal
// but which compute-sanitizer's memcheck cannot follow: scripts/graph_memcheck_repro.cu.) Memory
// allocated before the capture but freed while recording is kept alive until the graph is
// destroyed (the graph may still read it). Anything that needs the host while recording (a copy
// to the host, a synchronisation) fails the capture too: capture() then returns an empty
// CapturedGraph and says why in `why`, the stream is usable again, and the caller runs the work
// eagerly (whatever the failed recording allocated must not be read).
class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(CapturedGraph&&) noexcept;
  CapturedGraph& operator=(CapturedGraph&&) noexcept;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  bool valid() const { return exec_ != nullptr; }
  // Queues the graph on the stream. False, with nothing queued, when the device has no memory
  // left for the graph's own allocations (they are made at launch); other failures throw.
  bool replay() const;

 private:
  friend CapturedGraph capture(const std::function<void()>& record, std::string* why);
  void release();
  void* exec_ = nullptr;           // cudaGraphExec_t
  std::vector<void*> kept_alive_;  // freed while recording, freed for real with the graph
};
CapturedGraph capture(const std::function<void()>& record, std::string* why);
bool capturing();  // true while capture() records

// A device-side 64-bit counter (e.g. the dropout stream offset of a captured step): set from
// the host, advanced on the stream (so a replayed graph advances it too).
class DeviceCounter {
 public:
  DeviceCounter();
  ~DeviceCounter();
  DeviceCounter(const DeviceCounter&) = delete;
  DeviceCounter& operator=(const DeviceCounter&) = delete;
  const uint64_t* get() const { return ptr_; }
  void set(uint64_t value);   // queued on the stream
  void advance(uint64_t by);  // queued on the stream: *get() += by

 private:
  uint64_t* ptr_ = nullptr;
};

// A point in the stream's work (a cudaEvent with timing): record() queues it, and once the
// host has waited for the stream past two of them, elapsed_ms gives the device time between them.
// Timing a stretch of work this way does not make the host wait for that stretch alone.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record();                                                   // queued on the stream
  static double elapsed_ms(const Event& start, const Event& end);  // both passed
  void synchronize() const;  // the host waits until the stream has passed it
  // Everything this thread queues afterwards on its current stream (the main one in a training
  // step) waits for it: an event recorded on an OnOwnStream's stream, say a batch's copies.
  void join() const;

 private:
  void* event_ = nullptr;  // cudaEvent_t
};

// Page-locked host memory (cudaMallocHost): a copy from or to it is queued on the stream without
// the staging copy of pageable memory, so the host goes on while it runs. Bytes copied into it
// may be read once the host has waited for the stream (the epoch's metrics); bytes copied from
// it must not be written until the copy has run (a mini-batch's features: an Event recorded
// after it, then synchronize()).
class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void copy_from_device(const void* src, size_t bytes);  // queued on the stream; bytes <= size()
  void copy_to_device(void* dst, size_t bytes) const;    // queued on the stream; bytes <= size()
  const void* data() const { return data_; }
  void* data() { return data_; }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Host memory that kernels read in place, over PCIe (zero-copy): [data, data + bytes) page-locked
// and mapped into the device's address space by cudaHostRegister (read-only where the device
// supports it), read through device_data(). The mini-batch loader's features: its gather kernel
// reads a batch's rows straight from them, with no copy through the host.
//
// A range is registered once however many HostMappings hold it: the first registers it, the
// last one destroyed unregisters it (two loaders over one tensor). Memory that other code has
// page-locked (cudaMallocHost, PyTorch's pinned memory, a registration of its own) is used as it
// is and never unregistered here: its owner keeps it so while this lives. The memory must outlive
// the mapping, and no kernel may read through device_data() once the mapping is gone.
// Registering pins every page: it takes time in proportion to the bytes (docs/minibatch.md).
class HostMapping {
 public:
  // Throws a gat::Error saying why when the range cannot be mapped: no bytes, device memory,
  // registration refused (a lock limit, memory the driver cannot pin), memory page-locked
  // elsewhere that does not hold the whole range, or no CUDA. No refusal leaves a CUDA error on
  // the calling thread (the next launch check would report it as its own).
  HostMapping(const void* data, size_t bytes);
  ~HostMapping();
  HostMapping(const HostMapping&) = delete;
  HostMapping& operator=(const HostMapping&) = delete;
  const void* device_data() const { return device_data_; }  // data's address for a kernel

 private:
  const void* data_ = nullptr;  // the first address of the held range (which may contain this one)
  const void* device_data_ = nullptr;
};

// Bytes in use and the high-water mark of the allocator since the last reset.
size_t memory_allocated();
size_t peak_memory_allocated();
void reset_peak_memory();

// What was allocated when the high-water mark was reached: blocks grouped by the name given to
// malloc (Tensor::empty's `what`; op outputs are "tensor") and size, the most bytes first.
struct PeakBlocks {
  std::string what;
  size_t bytes = 0;  // of one block
  size_t count = 0;  // blocks of this name and size
};
std::vector<PeakBlocks> peak_memory_breakdown();

}  // namespace gat::cuda
