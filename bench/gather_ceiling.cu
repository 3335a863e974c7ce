// gather_ceiling: how fast this GPU reads random 256-byte rows, the access pattern of GAT's first
// layer at scale (8 heads x 8 features of float per source row, sources uniform at random), so the
// aggregate kernels can be compared with what the memory system gives to the pattern itself and
// not only with a sequential copy.
//
// A CSR of N rows, each with `degree` sources drawn uniformly from [0, N), and V (N, 64) floats;
// out[i] = sum over i's sources j of V[j], nothing else. A group of `lanes` threads per row (each
// lane 16 / lanes float4 of the row), `unroll` of the row's sources loaded before they are added,
// rows taken in grid-stride order. Every combination of lanes {4, 8, 16} and unroll {1, 2, 4, 8}
// runs; each prints its time (median of 9) and the bytes it must move (row pointers, indices,
// one V row per entry, one out row per row) per second, beside a device-to-device copy of V.
// Then the same with small terms read per entry beside the row: in separate arrays, packed in a
// row of their own, or at the end of the entry's V row (gather_rows_terms).
// Usage: gather_ceiling [N=5000000] [degree=20]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr const char* kProgram = "gather_ceiling";
#include "cuda_check.cuh"

constexpr int kRowFloat4 = 16;  // a row: 64 floats

// Sources of entry p: a 64-bit mix of p (splitmix64's finaliser) reduced to [0, N).
__global__ void fill_graph(int* ptr, int* src, long long n, int degree) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; p < n * degree;
       p += stride) {
    unsigned long long z = static_cast<unsigned long long>(p) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    src[p] = static_cast<int>(z % static_cast<unsigned long long>(n));
    if (p % degree == 0) ptr[p / degree] = static_cast<int>(p);
    if (p == n * degree - 1) ptr[n] = static_cast<int>(n * degree);
  }
}

__global__ void fill_values(float4* v, long long count) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count; i += stride)
    v[i] = make_float4(1e-3f * (i % 7), 1e-3f * (i % 5), 1e-3f * (i % 3), 1e-3f);
}

// out (N, 64) = sum of V (N, 64) over each row's sources; kLanes lanes a row, kUnroll sources in
// flight a group.
template <int kLanes, int kUnroll>
__global__ void __launch_bounds__(256)
    gather_rows(const int* __restrict__ ptr, const int* __restrict__ src, const float4* __restrict__ v,
                float4* __restrict__ out, long long n) {
  constexpr int kPer = kRowFloat4 / kLanes;  // float4s a lane holds
  const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long groups = static_cast<long long>(gridDim.x) * blockDim.x / kLanes;
  const int lane = static_cast<int>(thread % kLanes);
  for (long long r = thread / kLanes; r < n; r += groups) {
    float4 acc[kPer] = {};
    const int begin = ptr[r], end = ptr[r + 1];
    for (int p0 = begin; p0 < end; p0 += kUnroll) {
      float4 row[kUnroll][kPer];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = p0 + u;
        const long long j = p < end ? src[p] : -1;
#pragma unroll
        for (int k = 0; k < kPer; ++k)
          row[u][k] = j >= 0 ? v[j * kRowFloat4 + lane + k * kLanes] : make_float4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          acc[k].x += row[u][k].x;
          acc[k].y += row[u][k].y;
          acc[k].z += row[u][k].z;
          acc[k].w += row[u][k].w;
        }
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) out[r * kRowFloat4 + lane + k * kLanes] = acc[k];
  }
}

// The same gather with small per-source terms beside each row, as the attention kernels read
// them (el[j] in the forward; er, lse and D of a destination in the backward walk): kTerms rows
// of 8 floats at j, in kTerms separate (N, 8) arrays (kTerms more random accesses an entry), in
// one (N, 32) array of packed rows (one more access), or inline: at the end of V's row j, which is
// then 64 + 8 kTerms floats long (`terms` unused; no access of their own). Lanes 0 .. 2 kTerms - 1
// each load one float4 of them; a group of 16 lanes, 2 entries in flight.
enum class TermLayout { separate, packed, inline_row };
template <int kTerms, TermLayout kLayout>
__global__ void __launch_bounds__(256)
    gather_rows_terms(const int* __restrict__ ptr, const int* __restrict__ src, const float4* __restrict__ v,
                      const float4* __restrict__ terms, float4* __restrict__ out, long long n) {
  constexpr int kLanes = 16, kUnroll = 2;
  const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long groups = static_cast<long long>(gridDim.x) * blockDim.x / kLanes;
  const int lane = static_cast<int>(thread % kLanes);
  const bool term_lane = lane < 2 * kTerms;
  constexpr bool kInline = kLayout == TermLayout::inline_row;
  constexpr int kVRow = kInline ? kRowFloat4 + 2 * kTerms : kRowFloat4;  // float4s of a V row
  // float4 offset of this lane's term within row j: after the values, packed rows of 8 float4,
  // or array lane / 2.
  const float4* term_rows = kInline ? v : terms;
  const long long term_base = kInline                         ? kRowFloat4 + lane
                              : kLayout == TermLayout::packed ? lane
                                                              : (lane / 2) * n * 2 + lane % 2;
  const int term_stride = kInline ? kVRow : kLayout == TermLayout::packed ? 8 : 2;
  for (long long r = thread / kLanes; r < n; r += groups) {
    float4 acc = {};
    const int begin = ptr[r], end = ptr[r + 1];
    for (int p0 = begin; p0 < end; p0 += kUnroll) {
      float4 row[kUnroll], term[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = p0 + u;
        const long long j = p < end ? src[p] : -1;
        row[u] = j >= 0 ? v[j * kVRow + lane] : make_float4(0, 0, 0, 0);
        term[u] = j >= 0 && term_lane ? term_rows[term_base + j * term_stride] : make_float4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        acc.x += row[u].x + term[u].x;
        acc.y += row[u].y + term[u].y;
        acc.z += row[u].z + term[u].z;
        acc.w += row[u].w + term[u].w;
      }
    }
    out[r * kRowFloat4 + lane] = acc;
  }
}

// The output layer's pattern: rows of 8 floats (one head of 8 classes), 2 lanes of a float4 each,
// and el[j] (one float) per entry, either in its own (N,) array (kPacked false: two random
// sectors an entry) or at float 8 of a 16-float (64-byte) row that holds the values first
// (kPacked true: one 64-byte access). 4 entries in flight a group.
template <bool kPacked>
__global__ void __launch_bounds__(256)
    gather_short_rows(const int* __restrict__ ptr, const int* __restrict__ src, const float* __restrict__ v,
                      const float* __restrict__ el, float4* __restrict__ out, long long n) {
  constexpr int kLanes = 2, kUnroll = 4, kStride = kPacked ? 16 : 8;  // floats of a V row
  const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long groups = static_cast<long long>(gridDim.x) * blockDim.x / kLanes;
  const int lane = static_cast<int>(thread % kLanes);
  for (long long r = thread / kLanes; r < n; r += groups) {
    float4 acc = {};
    const int begin = ptr[r], end = ptr[r + 1];
    for (int p0 = begin; p0 < end; p0 += kUnroll) {
      float4 row[kUnroll];
      float term[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = p0 + u;
        const long long j = p < end ? src[p] : -1;
        row[u] = j >= 0 ? reinterpret_cast<const float4*>(v + j * kStride)[lane] : make_float4(0, 0, 0, 0);
        term[u] = j >= 0 ? (kPacked ? v[j * kStride + 8] : el[j]) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        acc.x += row[u].x * term[u];
        acc.y += row[u].y * term[u];
        acc.z += row[u].z * term[u];
        acc.w += row[u].w * term[u];
      }
    }
    out[r * kLanes + lane] = acc;
  }
}

template <class Launch>
float median_ms(Launch launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();  // warm-up
  std::vector<float> ms(9);
  for (float& t : ms) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&t, a, b));
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <int kLanes, int kUnroll>
void run(const int* ptr, const int* src, const float4* v, float4* out, long long n, int degree, int sms) {
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gather_rows<kLanes, kUnroll>, 256, 0));
  const unsigned blocks = static_cast<unsigned>(
      std::min<long long>(static_cast<long long>(sms) * per_sm, (n * kLanes + 255) / 256));
  const float ms = median_ms([&] { gather_rows<kLanes, kUnroll><<<blocks, 256>>>(ptr, src, v, out, n); });
  const double bytes = (n + 1) * 4.0 + n * static_cast<double>(degree) * (4.0 + 256.0) + n * 256.0;
  std::printf("lanes %2d unroll %d: %8.3f ms  %5.2f TB/s\n", kLanes, kUnroll, ms, bytes / (ms * 1e-3) / 1e12);
}

// Rate of the bytes every entry must move (as run's) plus its kTerms x 32 bytes of terms.
template <int kTerms, TermLayout kLayout>
void run_terms(const int* ptr, const int* src, const float4* v, const float4* terms, float4* out, long long n,
               int degree, int sms) {
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gather_rows_terms<kTerms, kLayout>, 256, 0));
  const unsigned blocks =
      static_cast<unsigned>(std::min<long long>(static_cast<long long>(sms) * per_sm, (n * 16 + 255) / 256));
  const float ms =
      median_ms([&] { gather_rows_terms<kTerms, kLayout><<<blocks, 256>>>(ptr, src, v, terms, out, n); });
  const double bytes =
      (n + 1) * 4.0 + n * static_cast<double>(degree) * (4.0 + 256.0 + 32.0 * kTerms) + n * 256.0;
  const char* where = kLayout == TermLayout::separate ? "in separate arrays  "
                      : kLayout == TermLayout::packed ? "packed in one row   "
                                                      : "at the end of V's row";
  std::printf("lanes 16 unroll 2, %d term rows of 32 B %s: %8.3f ms  %5.2f TB/s\n", kTerms, where, ms,
              bytes / (ms * 1e-3) / 1e12);
}

template <bool kPacked>
void run_short(const int* ptr, const int* src, const float* v, const float* el, float4* out, long long n,
               int degree, int sms) {
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gather_short_rows<kPacked>, 256, 0));
  const unsigned blocks =
      static_cast<unsigned>(std::min<long long>(static_cast<long long>(sms) * per_sm, (n * 2 + 255) / 256));
  const float ms = median_ms([&] { gather_short_rows<kPacked><<<blocks, 256>>>(ptr, src, v, el, out, n); });
  std::printf("rows of 8 floats + el[j], 2 lanes, unroll 4, %s: %8.3f ms  %5.1f G entries/s\n",
              kPacked ? "in one 64-byte row " : "el in its own array", ms,
              n * static_cast<double>(degree) / (ms * 1e-3) / 1e9);
}

template <int kLanes>
void run_unrolls(const int* ptr, const int* src, const float4* v, float4* out, long long n, int degree,
                 int sms) {
  run<kLanes, 1>(ptr, src, v, out, n, degree, sms);
  run<kLanes, 2>(ptr, src, v, out, n, degree, sms);
  run<kLanes, 4>(ptr, src, v, out, n, degree, sms);
  run<kLanes, 8>(ptr, src, v, out, n, degree, sms);
}

int main(int argc, char** argv) {
  const long long n = argc > 1 ? std::atoll(argv[1]) : 5000000;
  const int degree = argc > 2 ? std::atoi(argv[2]) : 20;
  if (n <= 0 || degree <= 0 || n * degree >= (1ll << 31)) {
    std::fprintf(stderr, "gather_ceiling: need N > 0, degree > 0 and N * degree < 2^31\n");
    return 2;
  }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int *ptr, *src;
  float4 *v, *out, *copy;
  CHECK(cudaMalloc(&ptr, (n + 1) * sizeof(int)));
  CHECK(cudaMalloc(&src, n * degree * sizeof(int)));
  CHECK(cudaMalloc(&v, n * kRowFloat4 * sizeof(float4)));
  CHECK(cudaMalloc(&out, n * kRowFloat4 * sizeof(float4)));
  CHECK(cudaMalloc(&copy, n * kRowFloat4 * sizeof(float4)));
  fill_graph<<<sms * 8, 256>>>(ptr, src, n, degree);
  fill_values<<<sms * 8, 256>>>(v, n * kRowFloat4);
  CHECK(cudaDeviceSynchronize());
  const double row_bytes = n * kRowFloat4 * sizeof(float4);
  const float copy_ms = median_ms(
      [&] { CHECK(cudaMemcpyAsync(copy, v, static_cast<size_t>(row_bytes), cudaMemcpyDeviceToDevice)); });
  std::printf("N %lld, degree %d; copy of V (%.2f GB): %.3f ms  %5.2f TB/s (read + write)\n", n, degree,
              row_bytes / 1e9, copy_ms, 2 * row_bytes / (copy_ms * 1e-3) / 1e12);
  run_unrolls<4>(ptr, src, v, out, n, degree, sms);
  run_unrolls<8>(ptr, src, v, out, n, degree, sms);
  run_unrolls<16>(ptr, src, v, out, n, degree, sms);
  // Terms: 3 arrays of (N, 8) floats, or one of (N, 32), in the same allocation.
  float4* terms;
  CHECK(cudaMalloc(&terms, n * 8 * sizeof(float4)));
  fill_values<<<sms * 8, 256>>>(terms, n * 8);
  run_terms<1, TermLayout::separate>(ptr, src, v, terms, out, n, degree, sms);
  run_terms<3, TermLayout::separate>(ptr, src, v, terms, out, n, degree, sms);
  run_terms<1, TermLayout::packed>(ptr, src, v, terms, out, n, degree, sms);
  run_terms<3, TermLayout::packed>(ptr, src, v, terms, out, n, degree, sms);
  CHECK(cudaFree(terms));
  // Inline: V's rows 64 + 8 kTerms floats long, the terms at their end.
  float4* wide;
  CHECK(cudaMalloc(&wide, n * (kRowFloat4 + 6) * sizeof(float4)));
  fill_values<<<sms * 8, 256>>>(wide, n * (kRowFloat4 + 6));
  run_terms<1, TermLayout::inline_row>(ptr, src, wide, nullptr, out, n, degree, sms);
  run_terms<3, TermLayout::inline_row>(ptr, src, wide, nullptr, out, n, degree, sms);
  CHECK(cudaFree(wide));
  // The output layer's short rows: (N, 8) values and (N,) el, or (N, 16) rows holding both.
  float* short_rows;
  CHECK(cudaMalloc(&short_rows, n * 16 * sizeof(float)));
  fill_values<<<sms * 8, 256>>>(reinterpret_cast<float4*>(short_rows), n * 4);
  run_short<false>(ptr, src, short_rows, short_rows + n * 8, out, n, degree, sms);
  run_short<true>(ptr, src, short_rows, nullptr, out, n, degree, sms);
  CHECK(cudaFree(short_rows));
  CHECK(cudaFree(ptr));
  CHECK(cudaFree(src));
  CHECK(cudaFree(v));
  CHECK(cudaFree(out));
  CHECK(cudaFree(copy));
  return 0;
}
