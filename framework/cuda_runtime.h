// The host side of the CUDA backend, callable from any translation unit.
//
// In builds without CUDA (GAT_WITH_CUDA=0) these exist too: cuda_available() is false and
// every other function throws a gat::Error saying the build has no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gat::cuda {

bool built_with_cuda();
// True when the build has CUDA and a device can be used (false, never throws, otherwise).
bool available();
// Why available() is false ("built without CUDA", "no CUDA device: ..."), empty when true.
const char* unavailable_reason();

// Stream-ordered allocation on the current stream (cudaMallocAsync). Out-of-memory throws a
// gat::Error naming `what` and the bytes asked for.
void* malloc(size_t bytes, const char* what);
void free(void* ptr);
void memcpy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes);
void memset_zero(void* ptr, size_t bytes);
void synchronize();

// Bytes in use and the high-water mark of the allocator since the last reset.
size_t memory_allocated();
size_t peak_memory_allocated();
void reset_peak_memory();

}  // namespace gat::cuda
