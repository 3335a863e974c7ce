// NeighborLoader: the batches of sampled training (PyG's NeighborLoader, DGL's DataLoader with a
// neighbour sampler). Each epoch the seed nodes are shuffled and cut into batches; a background
// thread samples each batch's blocks (NeighborSampler, framework/neighbor_sampler.h), adds their
// self loops and gathers the rows of the features, labels and edge features it reads, from host
// memory, up to `prefetch` batches ahead of the training step. next() hands them over on the
// loader's device.
// So the features need not fit on the device: only a batch's rows are copied there.
//
// On CUDA the thread works on a stream of its own (cuda::OnOwnStream), beside the training step:
// it samples there (on the device when sample_on_device, with the graph's CSR there; without
// edge features the blocks are then built there too, ops::block_graph). The GPU gathers the
// feature and label rows, reading x and y in host memory through a mapping (gather_on_device);
// the host gathers the edge features (and the rows where the mapping is refused) into
// page-locked buffers and queues their copies. next() makes the main stream wait for that batch's
// gathers and copies (an event), not the host. Two sets of page-locked buffers take turns, each
// reused once the copies out of it have run, and kept for the next epoch.
//
// What the thread and the caller share: the sampler and the host tensors (read only, never
// written after the loader is made) and the queue of finished batches (under a mutex). The
// caller never touches a batch before the thread has handed it over, nor the thread after. An
// exception in the thread reaches the caller at its next next(); the destructor and
// start_epoch stop the thread and wait for it (early stopping, an error in the step).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gat/framework/check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/graph.h"
#include "gat/framework/neighbor_sampler.h"
#include "gat/framework/tensor.h"

namespace gat {

struct NeighborLoaderOptions {
  int64_t batch_size = 512;      // seeds per batch; the last batch of an epoch may have fewer
  std::vector<int64_t> fanouts;  // NeighborSamplerOptions::fanouts (PyG's order: the seeds' hop first)
  bool replace = false;          // NeighborSamplerOptions::replace
  bool shuffle = true;           // a new order of the seeds every epoch (false: as given)
  uint64_t seed = 0;             // of the shuffles and the draws
  int64_t prefetch = 2;          // batches made ahead of the caller
  // With a CUDA loader: the sampler's CSR on the device and its draws there (the same blocks,
  // bit for bit); false: on the CPU (for a graph whose CSR does not fit the device).
  bool sample_on_device = true;
  // With a CUDA loader: x's and y's rows gathered by the GPU, which reads them in place in host
  // memory (registered once by the loader: cuda::HostMapping). false, or where the registration is
  // refused (a one-line notice on stderr): gathered on the host into page-locked buffers and
  // copied. The edge features are gathered on the host either way.
  bool gather_on_device = true;

  static constexpr Range<int64_t> kBatchSizeRange{1, std::numeric_limits<int32_t>::max()};
  static constexpr Range<int64_t> kPrefetchRange{1, 64};
  // Throws a gat::Error naming the first field outside its range (the fanouts as the sampler's).
  void validate() const;
};

// One batch, on the loader's device.
struct MiniBatch {
  // Input layer first: SampledBatch::blocks' graphs with the self loops the layers add
  // (Graph::with_self_loops; the layers use them as they are).
  std::vector<Graph> blocks;
  // Per block (E_l, D) in its edge order: rows edge_ids of edge_attr, and the loops' placeholder
  // rows (with_self_loops, train/trainer.h); empty without.
  std::vector<Tensor> edge_attrs;
  Tensor x;                    // (Ns0, F) the rows of x of blocks[0]'s sources
  Tensor y;                    // (B,) i32 the seeds' labels
  std::vector<int32_t> seeds;  // (B,) the seeds, in the blocks' order (host)
  // A CUDA batch from the thread: recorded after its copies on the thread's stream. next() makes
  // the main stream wait for it, then clears it.
  std::shared_ptr<const cuda::Event> copied;
};

class NeighborLoader {
 public:
  // graph: on the CPU, without the self loops the layers add. x (N, F) dense, y (N,) i32 and
  // edge_attr (E, D) in graph's edge order (undefined: none): on the CPU; only the graph's CSR
  // goes to a CUDA `device` (options.sample_on_device), and x and y are registered there for the
  // GPU to read in place (options.gather_on_device), until the loader goes. seeds: the nodes to
  // train on (distinct, in [0, N)). Batches go to `device`.
  NeighborLoader(Graph graph, Tensor x, Tensor y, Tensor edge_attr, std::vector<int32_t> seeds,
                 NeighborLoaderOptions options, Device device);
  ~NeighborLoader();
  NeighborLoader(const NeighborLoader&) = delete;
  NeighborLoader& operator=(const NeighborLoader&) = delete;

  int64_t num_batches() const;
  // Starts epoch `epoch` (from 0): stops the thread of the one before (its batches not taken are
  // dropped) and starts making this one's, in order.
  void start_epoch(int64_t epoch);
  // The epoch's next batch, waiting for it; none after its last. Rethrows what the thread threw
  // (once the batches before it have been taken).
  std::optional<MiniBatch> next();

  // The seeds in epoch `epoch`'s order: batch b is entries [b * batch_size, (b + 1) * batch_size).
  std::vector<int32_t> epoch_order(int64_t epoch) const;
  // Batch `batch` of epoch `epoch` (order: epoch_order(epoch)) made on the calling thread, on the
  // host: what the thread makes, before a CUDA loader's copies.
  MiniBatch make_batch(int64_t epoch, int64_t batch, const std::vector<int32_t>& order) const;

 private:
  struct Staging;  // a batch's page-locked buffers and the event after the copies out of them
  // Batch `batch`'s seeds in `order`, written into `seeds` and returned.
  const std::vector<int32_t>& batch_seeds(int64_t batch, const std::vector<int32_t>& order,
                                          std::vector<int32_t>& seeds) const;
  uint64_t batch_key(int64_t epoch, int64_t batch) const;  // the sampler's key of a batch
  // The batch's seeds (into `seeds`) and their blocks, on the host.
  SampledBatch sample_batch(int64_t epoch, int64_t batch, const std::vector<int32_t>& order,
                            std::vector<int32_t>& seeds) const;
  // make_batch's batch on CUDA, its feature and label rows through `staging`; on the thread.
  MiniBatch make_device_batch(int64_t epoch, int64_t batch, const std::vector<int32_t>& order,
                              Staging& staging) const;
  void stop();  // stops and joins the thread, empties the queue
  // mapped_x_ and mapped_y_, or a notice on stderr and neither where the driver refuses.
  void map_features();

  NeighborSampler sampler_;
  Tensor x_, y_, edge_attr_;
  // A CUDA loader's x and y as CUDA tensors over their host memory, mapped for the gather kernel
  // (each keeps its cuda::HostMapping alive); undefined where the host gathers. Declared after
  // x_ and y_, so they go first; the destructor joins the thread, whose stream then has run
  // every gather, before they go.
  Tensor mapped_x_, mapped_y_;
  std::vector<int32_t> seeds_;
  NeighborLoaderOptions options_;
  Device device_;
  int threads_ = 1;  // OpenMP threads of the caller, for the thread's parallel loops
  // A CUDA loader's two sets of page-locked buffers, taking turns by batch: the thread's alone, kept
  // from epoch to epoch (page-locked allocations take milliseconds).
  std::vector<Staging> staging_;

  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a batch was queued or taken, the thread ended or must stop
  std::deque<MiniBatch> ready_;      // host batches, oldest first
  bool stop_ = false, finished_ = false;
  std::exception_ptr error_;
};

}  // namespace gat
