// graph_replay_floor: what one kernel costs in a replayed CUDA graph on this GPU, the floor under
// a small graph's training step (Cora's is a chain of some 50 kernels, replayed as one graph).
// K dependent kernels on one stream are captured once and replayed R times; the time per replay
// divided by K, for three kernels: empty (1 block), a Cora-sized grid writing one float per thread
// (2,708 x 64), and 132 blocks that each spin for 2 us (what a replay adds around real work).
// Usage: graph_replay_floor (prints one line per K).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

constexpr const char* kProgram = "graph_replay_floor";
#include "cuda_check.cuh"

__global__ void empty_kernel() {}
__global__ void write_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.5f + 1.0f;
}
__global__ void spin_kernel(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

template <class Launch>
double per_replay_us(cudaStream_t s, int K, Launch launch) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < K; ++k) launch();
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&e, g, 0));
  for (int r = 0; r < 20; ++r) CHECK(cudaGraphLaunch(e, s));  // warm-up
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  const int R = 200;
  CHECK(cudaEventRecord(a, s));
  for (int r = 0; r < R; ++r) CHECK(cudaGraphLaunch(e, s));
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  CHECK(cudaGraphExecDestroy(e));
  CHECK(cudaGraphDestroy(g));
  return ms * 1000.0 / R;
}

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* x;
  const int n = 2708 * 64;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long spin2us = static_cast<long long>(clock_khz) * 2 / 1000;  // cycles in 2 us
  for (int K : {1, 10, 50, 100}) {
    const double e = per_replay_us(s, K, [&] { empty_kernel<<<1, 32, 0, s>>>(); });
    const double w = per_replay_us(s, K, [&] { write_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, n); });
    const double p = per_replay_us(s, K, [&] { spin_kernel<<<132, 256, 0, s>>>(spin2us); });
    std::printf(
        "K=%3d  empty %7.2f us (%5.2f/kernel)  write 2708x64 %7.2f us (%5.2f/kernel)  spin 2us x132 blocks "
        "%7.2f us (%5.2f/kernel)\n",
        K, e, e / K, w, w / K, p, p / K);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaFree(x));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
