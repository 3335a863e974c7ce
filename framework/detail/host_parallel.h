// Parallel building blocks for host-side preprocessing (graph construction, the dataset
// generator): a prefix sum, a search for the first index that fails a check, and stable sorts by
// an integer key. Every result is the same for any number of OpenMP threads.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <utility>
#include <vector>

#include "gat/framework/check.h"

namespace gat::detail {

// An exception may not leave an OpenMP region: one that does ends the process in std::terminate
// (out of memory inside a parallel loop was an abort, not an error). A region's body that can
// throw runs through capture(), which keeps the first exception any thread throws; rethrow()
// throws it on the calling thread once the region is over.
class FirstException {
 public:
  template <class Body>
  void capture(const Body& body) noexcept {
    try {
      body();
    } catch (...) {
#pragma omp critical(gat_first_exception)
      if (!first_) first_ = std::current_exception();
    }
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::exception_ptr first_;
};

// Below this many items a helper runs on the calling thread: forking costs more than it saves.
constexpr int64_t kParallelItems = 1 << 16;

// The number of contiguous blocks that n items are cut into: one per thread when n is large.
inline int parallel_blocks(int64_t n) {
  return n < kParallelItems ? 1
                            : std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(n / 1024)));
}
// The first item of block b of `blocks` over [0, n) (block b is [block_begin(b), block_begin(b + 1))).
inline int64_t block_begin(int64_t n, int64_t b, int64_t blocks) { return n * b / blocks; }

// x[0, n) replaced by its inclusive prefix sums (two passes over one block per thread); returns
// the total (0 when n is 0).
template <class T>
T inclusive_scan(T* x, int64_t n) {
  const int blocks = parallel_blocks(n);
  std::vector<T> block_sum(static_cast<size_t>(blocks) + 1, T(0));  // (blocks+1,) exclusive after the scan
#pragma omp parallel for schedule(static, 1) if (blocks > 1)
  for (int b = 0; b < blocks; ++b) {
    T sum(0);
    for (int64_t i = block_begin(n, b, blocks); i < block_begin(n, b + 1, blocks); ++i) x[i] = sum += x[i];
    block_sum[static_cast<size_t>(b) + 1] = sum;
  }
  for (int b = 0; b < blocks; ++b) block_sum[static_cast<size_t>(b) + 1] += block_sum[static_cast<size_t>(b)];
#pragma omp parallel for schedule(static, 1) if (blocks > 1)
  for (int b = 1; b < blocks; ++b) {
    const T carry = block_sum[static_cast<size_t>(b)];
    for (int64_t i = block_begin(n, b, blocks); i < block_begin(n, b + 1, blocks); ++i) x[i] += carry;
  }
  return block_sum[static_cast<size_t>(blocks)];
}

// The smallest i in [0, n) with bad(i) true, or n when there is none: callers report the first
// violation of a check, as a serial loop would.
template <class Bad>
int64_t first_index_where(int64_t n, const Bad& bad) {
  const int blocks = parallel_blocks(n);
  int64_t first = n;
#pragma omp parallel for schedule(static, 1) reduction(min : first) if (blocks > 1)
  for (int b = 0; b < blocks; ++b) {
    for (int64_t i = block_begin(n, b, blocks); i < block_begin(n, b + 1, blocks); ++i) {
      if (bad(i)) {
        first = std::min(first, i);
        break;
      }
    }
  }
  return first;
}

// Stable counting sort of items into `buckets` buckets, in parallel. The inputs [0, n) are cut
// into contiguous blocks (one per thread); visit(begin, end, emit) calls emit(bucket, item) for
// the items of inputs [begin, end) in input order, any number per input, the same each time it
// is called (twice: to count, then to place). Returns offsets (buckets+1,): bucket b's items go
// to positions [offsets[b], offsets[b+1]) in input order, each through store(position, item),
// after allocate(total) has been called once. Throws a gat::Error naming `what` when there are
// more than 2^32 - 1 items (the per-block counts are 32-bit: 4 bytes per bucket and thread).
template <class Visit, class Allocate, class Store>
std::vector<int64_t> counting_sort(const char* what, int64_t n, int64_t buckets, const Visit& visit,
                                   const Allocate& allocate, const Store& store) {
  const int blocks = parallel_blocks(n);
  const size_t nb = static_cast<size_t>(buckets);
  // cursor[t * buckets + b]: first the items of bucket b in block t, then the position of block
  // t's next item of bucket b relative to offsets[b].
  std::vector<uint32_t> cursor(static_cast<size_t>(blocks) * nb, 0);  // (blocks, buckets)
  std::vector<int64_t> block_items(static_cast<size_t>(blocks), 0);   // (blocks,)
#pragma omp parallel for schedule(static, 1) if (blocks > 1)
  for (int t = 0; t < blocks; ++t) {
    uint32_t* count = cursor.data() + static_cast<size_t>(t) * nb;
    int64_t items = 0;
    visit(block_begin(n, t, blocks), block_begin(n, t + 1, blocks), [&](int64_t bucket, const auto&) {
      ++count[bucket];
      ++items;
    });
    block_items[static_cast<size_t>(t)] = items;
  }
  int64_t total = 0;
  for (const int64_t items : block_items) total += items;
  GAT_CHECK(total <= std::numeric_limits<uint32_t>::max(), what, ": ", total,
            " items are more than a counting sort of 2^32 - 1 takes");

  std::vector<int64_t> offsets(nb + 1, 0);  // (buckets+1,)
  const int bucket_blocks = parallel_blocks(buckets * blocks);
#pragma omp parallel for schedule(static, 1) if (bucket_blocks > 1)
  for (int r = 0; r < bucket_blocks; ++r) {
    const int64_t lo = block_begin(buckets, r, bucket_blocks),
                  hi = block_begin(buckets, r + 1, bucket_blocks);
    for (int t = 0; t < blocks; ++t) {
      uint32_t* count = cursor.data() + static_cast<size_t>(t) * nb;
      for (int64_t b = lo; b < hi; ++b) {
        const uint32_t items = count[b];
        count[b] = static_cast<uint32_t>(offsets[static_cast<size_t>(b) + 1]);
        offsets[static_cast<size_t>(b) + 1] += items;
      }
    }
  }
  inclusive_scan(offsets.data() + 1, buckets);
  allocate(total);
#pragma omp parallel for schedule(static, 1) if (blocks > 1)
  for (int t = 0; t < blocks; ++t) {
    uint32_t* next = cursor.data() + static_cast<size_t>(t) * nb;
    visit(block_begin(n, t, blocks), block_begin(n, t + 1, blocks), [&](int64_t bucket, const auto& item) {
      store(offsets[static_cast<size_t>(bucket)] + next[bucket]++, item);
    });
  }
  return offsets;
}

// At most this many coarse buckets in bucket_sort's first pass: each thread then writes to few
// enough places at a time that they stay in its caches.
constexpr int64_t kCoarseBuckets = 4096;

// Stable sort of items by key in [0, keys), in parallel, in two cache-friendly passes (a
// most-significant-digit radix sort; a one-pass counting sort over millions of keys writes to a
// random place for every item): a counting sort by coarse bucket (key >> shift, at most
// kCoarseBuckets buckets) into a staging area, then, within each coarse bucket, a counting sort by
// key through a thread-local buffer. visit(begin, end, emit) is counting_sort's, with
// emit(key, item). The staging area belongs to the caller: after allocate(total),
// stage(position, key, item) keeps an item and staged(position) returns it as a
// std::pair<int32_t, Item> (key, item); store(position, item) writes the sorted result. A
// bucket's staged items are all read before any of its results is stored, so staging and result
// may share memory. Returns the key offsets (keys+1,): key k's items are at [offsets[k],
// offsets[k+1]), in input order.
template <class Item, class Visit, class Allocate, class Stage, class Staged, class Store>
std::vector<int64_t> bucket_sort(const char* what, int64_t n, int64_t keys, const Visit& visit,
                                 const Allocate& allocate, const Stage& stage, const Staged& staged,
                                 const Store& store) {
  int shift = 0;
  while ((keys >> shift) >= kCoarseBuckets) ++shift;
  const int64_t coarse = (keys >> shift) + 1, width = int64_t{1} << shift;
  const std::vector<int64_t> coarse_start = counting_sort(  // (coarse+1,)
      what, n, coarse,
      [&](int64_t begin, int64_t end, auto&& emit) {
        visit(begin, end, [&](int64_t key, const Item& item) {
          emit(key >> shift, std::make_pair(static_cast<int32_t>(key), item));
        });
      },
      allocate,
      [&](int64_t pos, const std::pair<int32_t, Item>& entry) { stage(pos, entry.first, entry.second); });
  std::vector<int64_t> offsets(static_cast<size_t>(keys) + 1, 0);  // (keys+1,)
  offsets[static_cast<size_t>(keys)] = coarse_start.back();
  FirstException error;  // the thread-local buffers may not fit in memory
#pragma omp parallel if (coarse_start.back() > kParallelItems)
  {
    std::vector<std::pair<int32_t, Item>> local;  // one bucket's staged items
    std::vector<int64_t> next;                    // (width,) counts, then positions
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < coarse; ++b)
      error.capture([&] {
        next.resize(static_cast<size_t>(width));  // allocated at the thread's first bucket
        const int64_t first_key = b << shift, bucket_keys = std::min(width, keys - first_key);
        local.clear();
        for (int64_t pos = coarse_start[static_cast<size_t>(b)];
             pos < coarse_start[static_cast<size_t>(b) + 1]; ++pos)
          local.push_back(staged(pos));
        std::fill(next.begin(), next.begin() + std::max<int64_t>(bucket_keys, 0), 0);
        for (const auto& entry : local) ++next[static_cast<size_t>(entry.first - first_key)];
        int64_t run = coarse_start[static_cast<size_t>(b)];
        for (int64_t k = 0; k < bucket_keys; ++k) {
          const int64_t items = next[static_cast<size_t>(k)];
          offsets[static_cast<size_t>(first_key + k)] = next[static_cast<size_t>(k)] = run;
          run += items;
        }
        for (const auto& entry : local)
          store(next[static_cast<size_t>(entry.first - first_key)]++, entry.second);
      });
  }
  error.rethrow();
  return offsets;
}

}  // namespace gat::detail
