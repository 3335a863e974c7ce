// CHECK(call) for the standalone CUDA benchmark programs (graph_replay_floor, gather_ceiling):
// a failed CUDA call prints the program's name (kProgram, defined by the including file before
// this header), the call and CUDA's message, and exits with status 1.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    const cudaError_t status_ = (call);                                                   \
    if (status_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s: %s: %s\n", kProgram, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
