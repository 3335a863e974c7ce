// Does compute-sanitizer memcheck follow memory that CUDA graphs allocate? The trainer's recorded
// step and evaluation (train/trainer.cpp, --cuda-graphs) were reported writing outside any
// allocation when replayed under memcheck, always just past a small allocation at the start of
// the reported region (once 4 bytes: the size of the loss the step graph keeps).
//
// The hypothesis this program tests: an allocation that outlives the graph (the loss) is made
// after a temporary of the same graph was freed, so the graph gives it the temporary's address.
// With cudaGraphInstantiateFlagAutoFreeOnLaunch the next launch frees it implicitly and
// allocates the temporary there again; if memcheck misses that implicit free, it still sees the
// small allocation when the temporary is written and reports the write as out of bounds.
//
//   escape-first    the kept allocation is made before the temporary (no address reuse)
//   escape-reuses   the kept allocation is made after the temporary is freed, AutoFreeOnLaunch
//   explicit-free   the same graph without AutoFreeOnLaunch; the host frees the kept allocation
//                   (cudaFreeAsync) before each launch
//
//   nvcc -arch=sm_90 -o /tmp/graph_memcheck_repro scripts/graph_memcheck_repro.cu
//   for m in escape-first escape-reuses explicit-free; do
//     compute-sanitizer --tool memcheck /tmp/graph_memcheck_repro $m; done
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

__global__ void fill(float* p, int n, float v) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
__global__ void sum(const float* p, int n, float* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < n; ++i) s += p[i];
    *out = s;
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "escape-reuses";
  const bool kept_first = !strcmp(mode, "escape-first");
  const bool explicit_free = !strcmp(mode, "explicit-free");
  if (!kept_first && !explicit_free && strcmp(mode, "escape-reuses")) {
    fprintf(stderr, "usage: %s escape-first|escape-reuses|explicit-free\n", argv[0]);
    return 2;
  }
  const int n = 4096;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t g;
  cudaGraphExec_t e;
  float *temp = nullptr, *kept = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (kept_first) cudaMallocAsync((void**)&kept, 4, s);
  cudaMallocAsync((void**)&temp, n * 4, s);
  fill<<<(n + 255) / 256, 256, 0, s>>>(temp, n, 1.0f);
  float* partial;  // a second temporary alive across temp's free, as in the trainer
  cudaMallocAsync((void**)&partial, 4, s);
  sum<<<1, 32, 0, s>>>(temp, n, partial);
  cudaFreeAsync(temp, s);
  if (!kept_first) cudaMallocAsync((void**)&kept, 4, s);
  sum<<<1, 32, 0, s>>>(partial, 1, kept);
  cudaFreeAsync(partial, s);
  cudaStreamEndCapture(s, &g);
  const cudaError_t made =
      cudaGraphInstantiateWithFlags(&e, g, explicit_free ? 0 : cudaGraphInstantiateFlagAutoFreeOnLaunch);
  printf("%s: instantiate %s; temp %p, kept %p (%s)\n", mode, cudaGetErrorString(made), temp, kept,
         temp == kept ? "same address" : "different addresses");
  for (int k = 0; k < 3; ++k) {
    if (explicit_free && k > 0) cudaFreeAsync(kept, s);
    cudaGraphLaunch(e, s);
    float h = 0;
    cudaMemcpyAsync(&h, kept, 4, cudaMemcpyDeviceToHost, s);
    const cudaError_t done = cudaStreamSynchronize(s);
    printf("launch %d: %s, sum %.0f (want %d)\n", k, cudaGetErrorString(done), h, n);
  }
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaFreeAsync(kept, s);
  cudaStreamSynchronize(s);
  return 0;
}
