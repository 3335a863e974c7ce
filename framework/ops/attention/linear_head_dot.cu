// linear_head_dot's fused CUDA kernels (linear_head_dot.h; docs/kernels.md, gat_linear_attention
// under "Bias, memory, and the projected op"). Every sum has a fixed order: results are bitwise
// reproducible.
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/attention/detail/attention_kernels.cuh"
#include "gat/framework/ops/attention/linear_head_dot.h"
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/reduce.h"

namespace gat::ops::cuda_impl {

namespace {

using attention::Compute;
using attention::load_row;
using attention::store_row;
using detail::load_vec;
using detail::store_vec;
using detail::Vec;

// S is the dtype of x and of the values and d values (N, ...): f32, f64, or bf16 (docs/precision.md),
// whose rows are widened as they are read (load_row) and rounded once as they are stored
// (store_row); T = Compute<S> that of the arithmetic, of the weights, att and their gradients, and
// of el, er and their gradients (per-node statistics, f32 beside bf16 rows). For f32 and f64 S is
// T and the kernels are the code they were. bf16 is compiled for heads of 8 features only (GAT's
// first layer, 8 x 8): linear_head_dot_takes_bf16.

constexpr int kWarp = 32;
constexpr size_t kMaxSharedBytes = 48 * 1024;  // dynamic shared memory without an opt-in

// Copies 4 values (8, 16 or 32 bytes, both ends aligned to that or to 16 bytes) from global to
// shared memory with cp.async, in the caller's commit group.
template <class T>
__device__ __forceinline__ void copy_vec4_async(T* dst, const T* src) {
  if constexpr (sizeof(T) < 4) {
    __pipeline_memcpy_async(dst, src, 4 * sizeof(T));
  } else {
#pragma unroll
    for (int part = 0; part < static_cast<int>(sizeof(T)) / 4; ++part)
      __pipeline_memcpy_async(dst + part * 16 / sizeof(T), src + part * 16 / sizeof(T), 16);
  }
}

// Forward: a thread computes kRows rows x kOctet columns of P = x W. A warp's lanes are the
// HF / kOctet octets of 32 / (HF / kOctet) row groups. A block keeps W whole in shared memory and
// x's tiles of tile_rows rows in two buffers (rows padded by 4 values, so that a warp's row
// groups read different banks).
constexpr int kForwardThreads = 128;
// f32: 5 blocks a multiprocessor (at most 102 registers: 95, no spills; unbounded, 113 allowed 4).
template <class T>
constexpr int kForwardBlocksPerSM = sizeof(T) == 4 ? 5 : 1;
constexpr int kRows = 4;
constexpr int kOctet = 8;

struct ForwardShape {
  int octets, groups, tile_rows;  // octets a row, row groups a warp, rows a block's tile
  __host__ __device__ explicit ForwardShape(int HF)
      : octets(HF / kOctet), groups(kWarp / octets), tile_rows(kForwardThreads / kWarp * groups * kRows) {}
};

// values = P * keep * keep_scale, out1 = P . a1 and out2 = P . a2 by head, from x (N, K) and
// w (K, HF), HF = H F with F dividing kOctet (a thread's octet holds whole heads). Each output
// adds its K products in k order and each dot its F terms in order; element (n, c) of P is kept by
// bit c & 3 of the Philox block (n HF + c) >> 2, as dropout's, and with keep_bits that decision is
// also bit c % 32 of word [n, c / 32].
template <class S, int F, class T = Compute<S>>
__global__ void __launch_bounds__(kForwardThreads, kForwardBlocksPerSM<T>)
    linear_head_dot_pair_dropout_kernel(const S* __restrict__ x,   // (N, K)
                                        const T* __restrict__ w,   // (K, HF)
                                        const T* __restrict__ a1,  // (HF,)
                                        const T* __restrict__ a2,  // (HF,)
                                        DropoutKey key, T keep_scale,
                                        S* __restrict__ values,            // (N, HF)
                                        T* __restrict__ out1,              // (N, H)
                                        T* __restrict__ out2,              // (N, H)
                                        uint32_t* __restrict__ keep_bits,  // (N, words) or null
                                        long long N, int K, int HF) {
  extern __shared__ __align__(32) unsigned char shared[];
  key = key.resolved();
  const ForwardShape shape(HF);
  const int x_stride = K + 4, quads = K / 4, H = HF / F;
  T* ws = reinterpret_cast<T*>(shared);             // (K, HF)
  S* const xs = reinterpret_cast<S*>(ws + K * HF);  // 2 x (tile_rows, x_stride): buffer b at xs + b * buffer
  const int buffer = shape.tile_rows * x_stride;
  // Copies tile `tile` of x into buffer b without registers (cp.async, 16 bytes at a time), zeros past
  // row N, as one commit group: the next tile's copy is in flight while this one is computed.
  auto fetch = [&](long long tile, int b) {
    for (int v = threadIdx.x; v < shape.tile_rows * quads; v += blockDim.x) {
      const int r = v / quads, q = v - r * quads;
      S* dst = xs + b * buffer + r * x_stride + 4 * q;
      if (tile + r < N)
        copy_vec4_async(dst, x + (tile + r) * K + 4 * q);
      else
        store_row<S, 4>(dst, Vec<T, 4>{});
    }
    __pipeline_commit();
  };
  for (int v = threadIdx.x; v < K * HF / 4; v += blockDim.x)
    store_vec<T, 4>(ws + 4 * v, load_vec<T, 4>(w + 4 * v));
  const int lane = threadIdx.x % kWarp, octet = lane % shape.octets, group = lane / shape.octets;
  const int first_row = threadIdx.x / kWarp * shape.groups * kRows + group;  // rows first_row + i groups
  const int c0 = octet * kOctet;
  T p1[kOctet], p2[kOctet];
#pragma unroll
  for (int c = 0; c < kOctet; ++c) p1[c] = a1[c0 + c], p2[c] = a2[c0 + c];
  const long long step = static_cast<long long>(gridDim.x) * shape.tile_rows;
  long long tile = blockIdx.x * static_cast<long long>(shape.tile_rows);
  if (tile < N) fetch(tile, 0);
  for (int b = 0; tile < N; tile += step, b ^= 1) {
    if (tile + step < N)
      fetch(tile + step, b ^ 1);
    else
      __pipeline_commit();     // an empty group: the wait below counts groups
    __pipeline_wait_prior(1);  // this tile's copies have landed
    __syncthreads();           // for every thread (and W is stored)
    T acc[kRows][kOctet] = {};
    for (int q = 0; q < quads; ++q) {
      Vec<T, 4> xv[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i)
        xv[i] = load_row<S, 4>(xs + b * buffer + (first_row + i * shape.groups) * x_stride + 4 * q);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const T* wk = ws + (4 * q + kk) * HF + c0;
        const Vec<T, 4> w0 = load_vec<T, 4>(wk), w1 = load_vec<T, 4>(wk + 4);
#pragma unroll
        for (int i = 0; i < kRows; ++i)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            acc[i][c] += xv[i].v[kk] * w0.v[c];
            acc[i][4 + c] += xv[i].v[kk] * w1.v[c];
          }
      }
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const long long n = tile + first_row + i * shape.groups;
      const long long flat = n * HF + c0;  // a multiple of 8: two whole Philox blocks
      const unsigned kept = key.active() ? key.keep4(static_cast<uint64_t>(flat >> 2)) |
                                               key.keep4(static_cast<uint64_t>(flat >> 2) + 1) << 4
                                         : 0xFFu;
      if (keep_bits) {  // a row's octets are adjacent lanes: 4 bytes a word (every lane takes part)
        unsigned word = kept << (8 * (octet & 3));
        if (shape.octets >= 2) word |= __shfl_xor_sync(0xffffffffu, word, 1);
        if (shape.octets >= 4) word |= __shfl_xor_sync(0xffffffffu, word, 2);
        if (n < N && (octet & 3) == 0) keep_bits[n * ((HF + 31) / 32) + octet / 4] = word;
      }
      if (n >= N) continue;
      Vec<T, 4> v0, v1;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        v0.v[c] = DropoutKey::apply_kept(acc[i][c], (kept >> c) & 1u, keep_scale);
        v1.v[c] = DropoutKey::apply_kept(acc[i][4 + c], (kept >> (4 + c)) & 1u, keep_scale);
      }
      store_row<S, 4>(values + flat, v0);
      store_row<S, 4>(values + flat + 4, v1);
#pragma unroll
      for (int head = 0; head < kOctet / F; ++head) {
        T d1 = 0, d2 = 0;
#pragma unroll
        for (int f = 0; f < F; ++f) {
          d1 += acc[i][head * F + f] * p1[head * F + f];
          d2 += acc[i][head * F + f] * p2[head * F + f];
        }
        const long long at = n * H + c0 / F + head;
        out1[at] = d1;
        out2[at] = d2;
      }
    }
    __syncthreads();  // buffer b is read before the tile after next lands in it
  }
}

// Backward: S = x^T B (K, C) with B = [base * keep * keep_scale | g1 | g2] (N, C), C = HF + 2H,
// padded to Cp columns (a multiple of 8). Block b sums its rows [b rows_per_block, (b + 1)
// rows_per_block), kChunkRows at a time: x's and B's rows copied into shared memory by cp.async
// (two buffers, the next chunk in flight while this one is computed), each thread copying the
// same quads of the same rows of every chunk (StagedUnits: no division per chunk) and applying
// the dropout to the base quads it copied as soon as they land (each decision read or drawn
// once); a thread owns a 4 x 8 tile of (K, Cp) and every `phases`-th row of a chunk, and writes
// its tile of partial[b phases + phase] (K, C). sum_axis then adds the partials in order.
constexpr int kBackwardThreads = 256;
template <class T>
constexpr int kChunkRows = 128 /
                           static_cast<int>(sizeof(T));  // 32 rows of f32, 16 of f64: two chunks in 31 KB
constexpr long long kMinRowsPerBlock = 1024;
constexpr long long kMaxBlocks = 4096;

struct BackwardShape {
  int C, Cp, x_stride, b_stride, k_tiles, tiles, phases;
  __host__ __device__ BackwardShape(int K, int HF, int H)
      : C(HF + 2 * H),
        Cp((C + 7) / 8 * 8),
        x_stride(K + 4),
        b_stride(Cp + 4),
        k_tiles(K / 4),
        tiles(k_tiles * (Cp / 8)),
        phases(tiles > 0 ? kBackwardThreads / tiles : 0) {}
};

// The units (of 4 values, or single values) a thread copies of every staged chunk of `rows` rows
// of `units` units each: unit `unit` of rows first_row, first_row + row_step, ... Threads past
// row_step * units copy nothing. units <= blockDim.x (the host's shape check).
struct StagedUnits {
  int unit, first_row, row_step;
  __device__ StagedUnits(int units, int rows) {
    row_step = static_cast<int>(blockDim.x) / units;
    unit = static_cast<int>(threadIdx.x) % units;
    first_row = static_cast<int>(threadIdx.x) / units;
    if (first_row >= row_step) first_row = rows;  // copies nothing
  }
};

// f32: at most 64 registers (4 blocks a multiprocessor; a few bytes spill): 1.36 ms at 100M edges
// (H200, ncu) against 1.39 ms at 79 registers (3 blocks).
template <class T>
constexpr int kBackwardBlocksPerSM = sizeof(T) == 4 ? 4 : 1;
// Beside bf16 rows B is staged in f32 (T) all the same: the base quads are copied as bf16 into a
// staging area of their own (R, HF) after B in each buffer, and widened into B by the thread
// that copied them, with the dropout, once they land. x's rows stay bf16 in shared memory.
template <class S>
constexpr bool kStagedBase = !std::is_same_v<S, Compute<S>>;

// The bytes of one of the backward's two shared buffers: x's rows (R, x_stride) of S, B's (R,
// b_stride) of T, and for bf16 the base's staging rows (R, HF) of S.
template <class S>
__host__ __device__ constexpr size_t backward_buffer_bytes(int R, int x_stride, int b_stride, int HF) {
  return static_cast<size_t>(R) * x_stride * sizeof(S) +
         static_cast<size_t>(R) * b_stride * sizeof(Compute<S>) +
         (kStagedBase<S> ? static_cast<size_t>(R) * HF * sizeof(S) : 0);
}

template <class S, class T = Compute<S>>
__global__ void __launch_bounds__(kBackwardThreads, kBackwardBlocksPerSM<T>)
    linear_head_dot_pair_grad_kernel(const S* __restrict__ x,     // (N, K)
                                     const S* __restrict__ base,  // (N, HF)
                                     const T* __restrict__ g1,    // (N, H)
                                     const T* __restrict__ g2,    // (N, H)
                                     DropoutKey key, T keep_scale,
                                     const uint32_t* __restrict__ keep_bits,  // (N, words) or null
                                     T* __restrict__ partial,                 // (blocks * phases, K, C)
                                     long long N, int K, int HF, int H, long long rows_per_block) {
  extern __shared__ __align__(32) unsigned char shared[];
  key = key.resolved();
  constexpr int R = kChunkRows<T>;
  const BackwardShape s(K, HF, H);
  // Buffer b at shared + b * buffer bytes: x's rows (R, x_stride), B's (R, b_stride) and, for bf16,
  // the base's staging rows (R, HF).
  const size_t buffer = backward_buffer_bytes<S>(R, s.x_stride, s.b_stride, HF);
  auto x_rows = [&](int b) { return reinterpret_cast<S*>(shared + b * buffer); };
  auto b_rows = [&](int b) {
    return reinterpret_cast<T*>(shared + b * buffer + static_cast<size_t>(R) * s.x_stride * sizeof(S));
  };
  auto staged_base = [&](int b) { return reinterpret_cast<S*>(b_rows(b) + R * s.b_stride); };
  const int tile = threadIdx.x % s.tiles, phase = threadIdx.x / s.tiles;
  const int k0 = tile % s.k_tiles * 4, c0 = tile / s.k_tiles * 8;
  // g1 and g2 by quads when a row of each is whole quads (H % 4 == 0), else value by value.
  const bool g_quads = H % 4 == 0;
  const StagedUnits xq(K / 4, R), bq(HF / 4, R), gq(g_quads ? H / 2 : 2 * H, R);
  const int words = (HF + 31) / 32;
  const int bits_word = bq.unit / 8, bits_shift = 4 * (bq.unit % 8);  // bq's quad's decisions in keep_bits
  const long long begin = blockIdx.x * rows_per_block, end = min(N, begin + rows_per_block);
  // B's padding columns [C, Cp) are never copied: zeros in both buffers once.
  for (int v = threadIdx.x; v < 2 * R * (s.Cp - s.C); v += blockDim.x) {
    const int r = v / (s.Cp - s.C), c = v - r * (s.Cp - s.C);
    b_rows(r / R)[(r % R) * s.b_stride + s.C + c] = T(0);
  }
  // Copies this thread's units of rows [chunk, chunk + R) of x, base, g1 and g2 (those before
  // `end`) into buffer b, as one commit group.
  auto fetch = [&](long long chunk, int b) {
    S* xs = x_rows(b);
    T* bs = b_rows(b);
    const int rows = static_cast<int>(min(static_cast<long long>(R), end - chunk));
    for (int r = xq.first_row; r < rows; r += xq.row_step)
      copy_vec4_async(xs + r * s.x_stride + 4 * xq.unit, x + (chunk + r) * K + 4 * xq.unit);
    for (int r = bq.first_row; r < rows; r += bq.row_step) {
      if constexpr (kStagedBase<S>)
        copy_vec4_async(staged_base(b) + r * HF + 4 * bq.unit, base + (chunk + r) * HF + 4 * bq.unit);
      else
        copy_vec4_async(bs + r * s.b_stride + 4 * bq.unit, base + (chunk + r) * HF + 4 * bq.unit);
    }
    if (g_quads) {
      const int half = H / 4, u = gq.unit < half ? gq.unit : gq.unit - half;
      const T* g = gq.unit < half ? g1 : g2;
      for (int r = gq.first_row; r < rows; r += gq.row_step)
        copy_vec4_async(bs + r * s.b_stride + HF + 4 * gq.unit, g + (chunk + r) * H + 4 * u);
    } else {
      const int u = gq.unit < H ? gq.unit : gq.unit - H;
      const T* g = gq.unit < H ? g1 : g2;
      for (int r = gq.first_row; r < rows; r += gq.row_step)
        __pipeline_memcpy_async(bs + r * s.b_stride + HF + gq.unit, g + (chunk + r) * H + u, sizeof(T));
    }
    __pipeline_commit();
  };
  T acc[4][8] = {};
  if (begin < end) fetch(begin, 0);
  for (long long chunk = begin, b = 0; chunk < end; chunk += R, b ^= 1) {
    const int rows = static_cast<int>(min(static_cast<long long>(R), end - chunk));
    if (chunk + R < end)
      fetch(chunk + R, static_cast<int>(b ^ 1));
    else
      __pipeline_commit();     // an empty group: the wait below counts groups
    __pipeline_wait_prior(1);  // this thread's copies of this chunk have landed
    const S* xs = x_rows(static_cast<int>(b));
    T* bs = b_rows(static_cast<int>(b));
    // The dropout on the base quads this thread copied, in place (bf16: widened from their staging
    // rows into B, dropped out or not).
    if (kStagedBase<S> || keep_bits || key.active()) {
      for (int r = bq.first_row; r < rows; r += bq.row_step) {
        const long long n = chunk + r;
        const unsigned kept = keep_bits      ? keep_bits[n * words + bits_word] >> bits_shift & 0xFu
                              : key.active() ? key.keep4(static_cast<uint64_t>((n * HF >> 2) + bq.unit))
                                             : 0xFu;
        T* at = bs + r * s.b_stride + 4 * bq.unit;
        Vec<T, 4> d;
        if constexpr (kStagedBase<S>)
          d = load_row<S, 4>(staged_base(static_cast<int>(b)) + r * HF + 4 * bq.unit);
        else
          d = load_vec<T, 4>(at);
#pragma unroll
        for (int c = 0; c < 4; ++c) d.v[c] = DropoutKey::apply_kept(d.v[c], (kept >> c) & 1u, keep_scale);
        store_vec<T, 4>(at, d);
      }
    }
    __syncthreads();  // every thread's copies (and dropout) of this chunk are done
    for (int r = phase; phase < s.phases && r < rows; r += s.phases) {
      const Vec<T, 4> xv = load_row<S, 4>(xs + r * s.x_stride + k0);
      const Vec<T, 4> b0 = load_vec<T, 4>(bs + r * s.b_stride + c0),
                      b1 = load_vec<T, 4>(bs + r * s.b_stride + c0 + 4);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[i][c] += xv.v[i] * b0.v[c];
          acc[i][4 + c] += xv.v[i] * b1.v[c];
        }
    }
    __syncthreads();  // buffer b is read before the chunk after next lands in it
  }
  if (phase >= s.phases) return;
  T* out = partial + (blockIdx.x * static_cast<long long>(s.phases) + phase) * K * s.C;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int c = 0; c < 8; ++c)
      if (c0 + c < s.C) out[(k0 + i) * s.C + c0 + c] = acc[i][c];
}

// From S (K, C): grad_w[k,c] = S[k,c] + S[k, HF + h] a1[c] + S[k, HF + H + h] a2[c] and
// grad_a1[c] = sum_k w[k,c] S[k, HF + h], grad_a2[c] = sum_k w[k,c] S[k, HF + H + h] (in k
// order), c = h F + f: a thread per column c.
template <class T>
__global__ void linear_head_dot_pair_fold_kernel(const T* __restrict__ S,   // (K, C)
                                                 const T* __restrict__ w,   // (K, HF)
                                                 const T* __restrict__ a1,  // (HF,)
                                                 const T* __restrict__ a2,  // (HF,)
                                                 T* __restrict__ grad_w,    // (K, HF)
                                                 T* __restrict__ grad_a1,   // (HF,)
                                                 T* __restrict__ grad_a2,   // (HF,)
                                                 int K, int HF, int F) {
  const int H = HF / F, C = HF + 2 * H;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < HF; c += gridDim.x * blockDim.x) {
    const int h = c / F;
    T d1 = 0, d2 = 0;
    for (int k = 0; k < K; ++k) {
      const T s1 = S[k * C + HF + h], s2 = S[k * C + HF + H + h];
      grad_w[k * HF + c] = S[k * C + c] + s1 * a1[c] + s2 * a2[c];
      d1 += w[k * HF + c] * s1;
      d2 += w[k * HF + c] * s2;
    }
    grad_a1[c] = d1;
    grad_a2[c] = d2;
  }
}

// Calls f(Int<F>) for F in {1, 2, 4, 8}; false for another F.
template <class Fn>
bool with_head_width(int F, Fn&& f) {
  switch (F) {
    case 1:
      f(std::integral_constant<int, 1>{});
      return true;
    case 2:
      f(std::integral_constant<int, 2>{});
      return true;
    case 4:
      f(std::integral_constant<int, 4>{});
      return true;
    case 8:
      f(std::integral_constant<int, 8>{});
      return true;
    default:
      return false;
  }
}

// The forward's and the backward's shape conditions (else the op composes). The dynamic shared
// memory of either must fit kMaxSharedBytes; S is the dtype of x's rows.
template <class S>
size_t forward_shared_bytes(int K, int HF) {
  const ForwardShape shape(HF);
  return static_cast<size_t>(K) * HF * sizeof(Compute<S>) +
         2 * static_cast<size_t>(shape.tile_rows) * (K + 4) * sizeof(S);
}
bool forward_shapes_fit(long long N, int K, int HF) {
  return N > 0 && K > 0 && K % 4 == 0 && HF % kOctet == 0 && kWarp % (HF / kOctet) == 0;
}
template <class S>
size_t backward_shared_bytes(int K, int HF, int H) {
  const BackwardShape s(K, HF, H);
  return 2 * backward_buffer_bytes<S>(kChunkRows<Compute<S>>, s.x_stride, s.b_stride, HF);
}
bool backward_shapes_fit(long long N, int K, int HF, int H) {
  const BackwardShape s(K, HF, H);
  return N > 0 && K > 0 && K % 4 == 0 && HF > 0 && HF % 4 == 0 && s.tiles <= kBackwardThreads &&
         std::max({K / 4, HF / 4, 2 * H}) <= kBackwardThreads;  // StagedUnits' units
}

// Calls f(Int<F>) with the forward kernel's head width: F in {1, 2, 4, 8} for f32 and f64, 8 alone
// for bf16 rows (the benchmarked first layer: linear_head_dot_takes_bf16); false for another F.
template <class S, class Fn>
bool with_compiled_width(int F, Fn&& f) {
  if constexpr (std::is_same_v<S, Compute<S>>) return with_head_width(F, f);
  if (F != kOctet) return false;
  f(std::integral_constant<int, kOctet>{});
  return true;
}

}  // namespace

bool linear_head_dot_takes_bf16(int64_t N, int64_t K, int64_t H, int64_t F) {
  if (N <= 0 || K <= 0 || H <= 0 || F != kOctet || K > kBackwardThreads * 4 || H > kBackwardThreads)
    return false;
  const int k = static_cast<int>(K), h = static_cast<int>(H), hf = h * kOctet;
  return forward_shapes_fit(N, k, hf) && backward_shapes_fit(N, k, hf, h) &&
         forward_shared_bytes<bf16>(k, hf) <= kMaxSharedBytes &&
         backward_shared_bytes<bf16>(k, hf, h) <= kMaxSharedBytes;
}

bool linear_head_dot_pair_dropout_forward(const Tensor& x, const Tensor& w, const Tensor& a1,
                                          const Tensor& a2, const DropoutKey& key, double keep_scale,
                                          Tensor& values, Tensor& out1, Tensor& out2, Tensor* keep_bits) {
  const long long N = x.size(0);
  const int K = static_cast<int>(x.size(1)), H = static_cast<int>(a1.size(0)),
            F = static_cast<int>(a1.size(1));
  const int HF = H * F;
  if (!forward_shapes_fit(N, K, HF)) return false;
  bool launched = false;
  attention::dispatch_rows(x.dtype(), "linear_head_dot_pair_dropout_forward", [&](auto zero) {
    using S = decltype(zero);
    using T = Compute<S>;
    const ForwardShape shape(HF);
    const size_t bytes = forward_shared_bytes<S>(K, HF);
    if (bytes > kMaxSharedBytes || !detail::all_aligned(4 * sizeof(S), {x.data<S>(), values.data<S>()}) ||
        !detail::all_aligned(4 * sizeof(T), {w.data<T>()}))
      return;
    const long long tiles = (N + shape.tile_rows - 1) / shape.tile_rows;
    const unsigned blocks = static_cast<unsigned>(
        std::min<long long>(tiles, std::max(1LL, 4 * cuda::resident_threads() / kForwardThreads)));
    launched = with_compiled_width<S>(F, [&](auto f) {
      linear_head_dot_pair_dropout_kernel<S, decltype(f)::value>
          <<<blocks, kForwardThreads, bytes, cuda::stream()>>>(
              x.data<S>(), w.data<T>(), a1.data<T>(), a2.data<T>(), key, static_cast<T>(keep_scale),
              values.data<S>(), out1.data<T>(), out2.data<T>(),
              keep_bits ? reinterpret_cast<uint32_t*>(keep_bits->data<int32_t>()) : nullptr, N, K, HF);
      CUDA_CHECK_LAUNCH("linear_head_dot_pair_dropout_kernel");
    });
  });
  return launched;
}

bool linear_head_dot_pair_backward(const Tensor& x, const Tensor& w, const Tensor& a1, const Tensor& a2,
                                   const DropoutKey& key, double keep_scale, const Tensor& keep_bits,
                                   const Tensor& base, const Tensor& g1, const Tensor& g2, Tensor& grad_w,
                                   Tensor& grad_a1, Tensor& grad_a2) {
  const long long N = x.size(0);
  const int K = static_cast<int>(x.size(1)), H = static_cast<int>(a1.size(0)),
            F = static_cast<int>(a1.size(1));
  const int HF = H * F;
  const BackwardShape s(K, HF, H);
  if (!backward_shapes_fit(N, K, HF, H)) return false;
  bool launched = false;
  attention::dispatch_rows(x.dtype(), "linear_head_dot_pair_backward", [&](auto zero) {
    using S = decltype(zero);
    using T = Compute<S>;
    const size_t bytes = backward_shared_bytes<S>(K, HF, H);
    if (bytes > kMaxSharedBytes || !detail::all_aligned(4 * sizeof(S), {x.data<S>(), base.data<S>()}) ||
        (H % 4 == 0 && !detail::all_aligned(4 * sizeof(T), {g1.data<T>(), g2.data<T>()})))  // g by quads
      return;
    if constexpr (!std::is_same_v<S, T>)
      if (F != kOctet) return;  // (the forward's bf16 width: linear_head_dot_takes_bf16)
    const long long rows_per_block = std::max(kMinRowsPerBlock, (N + kMaxBlocks - 1) / kMaxBlocks);
    const long long blocks = (N + rows_per_block - 1) / rows_per_block;
    const DType sums_dtype = dtype_of<T>::value;
    Tensor partial = Tensor::empty({blocks * s.phases, static_cast<int64_t>(K) * s.C}, sums_dtype,
                                   Device::cuda, "linear_head_dot_pair_backward partials");
    linear_head_dot_pair_grad_kernel<S>
        <<<static_cast<unsigned>(blocks), kBackwardThreads, bytes, cuda::stream()>>>(
            x.data<S>(), base.data<S>(), g1.data<T>(), g2.data<T>(), key, static_cast<T>(keep_scale),
            keep_bits.defined() ? reinterpret_cast<const uint32_t*>(keep_bits.data<int32_t>()) : nullptr,
            partial.data<T>(), N, K, HF, H, rows_per_block);
    CUDA_CHECK_LAUNCH("linear_head_dot_pair_grad_kernel");
    Tensor sums = Tensor::empty({static_cast<int64_t>(K), s.C}, sums_dtype, Device::cuda,
                                "linear_head_dot_pair_backward sums");
    sum_axis(partial, 1, blocks * s.phases, static_cast<int64_t>(K) * s.C, sums);
    linear_head_dot_pair_fold_kernel<T><<<cuda::blocks_for(HF), 256, 0, cuda::stream()>>>(
        sums.data<T>(), w.data<T>(), a1.data<T>(), a2.data<T>(), grad_w.data<T>(), grad_a1.data<T>(),
        grad_a2.data<T>(), K, HF, F);
    CUDA_CHECK_LAUNCH("linear_head_dot_pair_fold_kernel");
    launched = true;
  });
  return launched;
}

}  // namespace gat::ops::cuda_impl
