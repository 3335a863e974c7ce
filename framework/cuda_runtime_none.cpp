// The CUDA entry points of a build without CUDA: nothing is available, everything else throws.
#if !GAT_WITH_CUDA
#include "gat/framework/check.h"
#include "gat/framework/cuda_runtime.h"

namespace gat::cuda {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  GAT_FAIL(what, ": this build of gat has no CUDA backend (configure with GAT_CUDA=ON)");
}
}  // namespace

bool built_with_cuda() { return false; }
bool available() { return false; }
const char* unavailable_reason() { return "built without CUDA"; }
long long resident_threads() { no_cuda("cuda::resident_threads"); }
int multiprocessors() { no_cuda("cuda::multiprocessors"); }
OnSideStream::OnSideStream() { no_cuda("cuda::OnSideStream"); }
OnSideStream::~OnSideStream() = default;
SideMark::SideMark() { no_cuda("cuda::SideMark"); }
SideMark::~SideMark() = default;
void SideMark::join() const { no_cuda("cuda::SideMark::join"); }
OnOwnStream::OnOwnStream() { no_cuda("cuda::OnOwnStream"); }
OnOwnStream::~OnOwnStream() = default;
UseExternal::UseExternal(void*, ExternalAllocator*) { no_cuda("cuda::UseExternal"); }
UseExternal::~UseExternal() = default;
ExternalAllocator* external_allocator() { return nullptr; }
void* malloc(size_t, const char* what) { no_cuda(what); }
void free(void*) {}
void memcpy(void*, bool, const void*, bool, size_t) { no_cuda("cuda::memcpy"); }
void memset_zero(void*, size_t) { no_cuda("cuda::memset_zero"); }
void synchronize() {}
void release_cached_memory() { no_cuda("cuda::release_cached_memory"); }
CapturedGraph::~CapturedGraph() = default;
CapturedGraph::CapturedGraph(CapturedGraph&&) noexcept = default;
CapturedGraph& CapturedGraph::operator=(CapturedGraph&&) noexcept = default;
bool CapturedGraph::replay() const { no_cuda("cuda::CapturedGraph::replay"); }
void CapturedGraph::release() {}
CapturedGraph capture(const std::function<void()>&, std::string*) { no_cuda("cuda::capture"); }
bool capturing() { return false; }
DeviceCounter::DeviceCounter() { no_cuda("cuda::DeviceCounter"); }
DeviceCounter::~DeviceCounter() = default;
void DeviceCounter::set(uint64_t) { no_cuda("cuda::DeviceCounter::set"); }
void DeviceCounter::advance(uint64_t) { no_cuda("cuda::DeviceCounter::advance"); }
Event::Event() { no_cuda("cuda::Event"); }
Event::~Event() = default;
void Event::record() { no_cuda("cuda::Event::record"); }
double Event::elapsed_ms(const Event&, const Event&) { no_cuda("cuda::Event::elapsed_ms"); }
void Event::synchronize() const { no_cuda("cuda::Event::synchronize"); }
void Event::join() const { no_cuda("cuda::Event::join"); }
HostBuffer::HostBuffer(size_t) { no_cuda("cuda::HostBuffer"); }
HostBuffer::~HostBuffer() = default;
void HostBuffer::copy_from_device(const void*, size_t) { no_cuda("cuda::HostBuffer::copy_from_device"); }
void HostBuffer::copy_to_device(void*, size_t) const { no_cuda("cuda::HostBuffer::copy_to_device"); }
HostMapping::HostMapping(const void*, size_t) { no_cuda("cuda::HostMapping"); }
HostMapping::~HostMapping() = default;
size_t memory_allocated() { return 0; }
size_t peak_memory_allocated() { return 0; }
void reset_peak_memory() {}
std::vector<PeakBlocks> peak_memory_breakdown() { return {}; }

}  // namespace gat::cuda
#endif
