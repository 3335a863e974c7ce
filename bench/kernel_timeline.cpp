// kernel_timeline: a CUPTI injection library that writes every kernel's start and end as the GPU
// ran them, the kernels of replayed CUDA graphs included. ncu times a kernel on its own (and
// serialises a graph's nodes), and Nsight Systems is not on every GPU machine; this shows what a
// replayed training step's critical path is: which kernels follow one another, which overlap on
// the side streams, and the gaps between them. bench/step_timeline.py reads the file.
//
//   export KERNEL_TIMELINE_OUT=trace.txt CUDA_INJECTION64_PATH=$PWD/BUILD/bench/libkernel_timeline.so
//   BUILD/gat_train --dataset citeseer --device cuda --epochs 40 --quiet
//   python3 bench/step_timeline.py trace.txt
//
// One line per kernel: start and end (ns, the GPU's clock), stream id, graph id and graph node id
// (0 outside graphs), grid and block x sizes, the kernel's mangled name.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>

namespace {

FILE* g_out = nullptr;
constexpr size_t kBufferBytes = size_t(16) << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = kBufferBytes;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    std::fprintf(g_out, "%llu %llu %u %u %llu %d %d %s\n", static_cast<unsigned long long>(k->start),
                 static_cast<unsigned long long>(k->end), k->streamId, k->graphId,
                 static_cast<unsigned long long>(k->graphNodeId), k->gridX, k->blockX, k->name);
  }
  std::free(buffer);
}

void flush_at_exit() {
  cuptiActivityFlushAll(1);
  std::fclose(g_out);
}

}  // namespace

// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library.
extern "C" int InitializeInjection() {
  const char* chosen = std::getenv("KERNEL_TIMELINE_OUT");
  const char* path = chosen ? chosen : "kernel_timeline.txt";
  g_out = std::fopen(path, "w");
  if (!g_out) {
    std::fprintf(stderr, "kernel_timeline: cannot write %s\n", path);
    return 0;
  }
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_timeline: CUPTI refused the kernel activity\n");
    return 0;
  }
  std::atexit(flush_at_exit);
  return 1;
}
