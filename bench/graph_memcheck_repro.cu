// Does compute-sanitizer memcheck follow memory that CUDA graphs allocate? The trainer's recorded
// step and evaluation (train/trainer.cpp, --cuda-graphs) are reported writing outside any
// allocation when replayed under memcheck; this program has the same pattern in miniature: two
// graphs with their own allocations (freed inside the graph, and one outliving each launch, as
// the loss does), AutoFreeOnLaunch, recorded one after the other and launched in turn. On an
// H200 with CUDA 13 it runs clean under memcheck, so the trainer's report is not explained by
// these features alone. Not yet tried: an address the graph frees and allocates again within one
// recording (the trainer's step does that constantly, this program never does); in one report
// the nearest allocation was a 4-byte one, the size of the loss the graph keeps.
//
//   nvcc -arch=sm_90 -o /tmp/graph_memcheck_repro bench/graph_memcheck_repro.cu
//   compute-sanitizer --tool memcheck /tmp/graph_memcheck_repro
#include <cstdio>
#include <cuda_runtime.h>
__global__ void fill(float* p, int n, float v) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = v; }
__global__ void sum(const float* p, int n, float* out) { if (threadIdx.x == 0 && blockIdx.x == 0) { float s = 0; for (int i = 0; i < n; ++i) s += p[i]; *out = s; } }
cudaGraphExec_t record(cudaStream_t s, int n, float v, float** esc) {
  cudaGraph_t g; cudaGraphExec_t e;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  float* p; cudaMallocAsync((void**)&p, n * 4, s);
  float* q; cudaMallocAsync((void**)&q, n * 4, s);
  cudaMallocAsync((void**)esc, 4, s);
  fill<<<(n + 255) / 256, 256, 0, s>>>(p, n, v);
  fill<<<(n + 255) / 256, 256, 0, s>>>(q, n, v);
  cudaFreeAsync(p, s);
  sum<<<1, 32, 0, s>>>(q, n, *esc);
  cudaFreeAsync(q, s);
  cudaStreamEndCapture(s, &g);
  printf("instantiate %s\n", cudaGetErrorString(cudaGraphInstantiateWithFlags(&e, g, cudaGraphInstantiateFlagAutoFreeOnLaunch)));
  return e;
}
int main() {
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float* counter; cudaMallocAsync((void**)&counter, 8, s);
  cudaStreamSynchronize(s);
  float *esc1, *esc2;
  cudaGraphExec_t a = record(s, 100000, 1.0f, &esc1), b = record(s, 50000, 2.0f, &esc2);
  for (int k = 0; k < 3; ++k) {
    cudaGraphLaunch(a, s);
    float h1 = 0; cudaMemcpyAsync(&h1, esc1, 4, cudaMemcpyDeviceToHost, s);
    cudaGraphLaunch(b, s);
    float h2 = 0; cudaMemcpyAsync(&h2, esc2, 4, cudaMemcpyDeviceToHost, s);
    printf("round %d: sync %s, sums %.0f %.0f (want 100000 100000)\n", k, cudaGetErrorString(cudaStreamSynchronize(s)), h1, h2);
  }
  return 0;
}
