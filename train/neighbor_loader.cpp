#include "gat/train/neighbor_loader.h"

#include <omp.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <utility>

#include "gat/framework/ops/block_graph.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/train/trainer.h"

namespace gat {

namespace {

Tensor index_of(const std::vector<int32_t>& rows) {
  return Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())});
}

// rows `rows` of the host table (N, ...) -> (K, ...) on the host.
Tensor gather_rows(const Tensor& table, const std::vector<int32_t>& rows) {
  return ops::index_rows(table, index_of(rows));
}

// The rows of `table` (N, ...) in 32-bit words, as ops::kernels::gather_rows takes them.
int64_t row_words(const Tensor& table) {
  return table.numel() / std::max<int64_t>(table.size(0), 1) *
         static_cast<int64_t>(dtype_size(table.dtype())) / 4;
}

// A CUDA tensor over the memory of the host tensor `host`, mapped (cuda::HostMapping, kept alive
// by the tensor): the GPU reads it in place.
Tensor mapped_view(const Tensor& host) {
  auto mapping = std::make_shared<cuda::HostMapping>(host.raw_data(), host.nbytes());
  void* device_data = const_cast<void*>(mapping->device_data());
  return Tensor::from_blob(device_data, host.shape(), host.dtype(), Device::cuda, std::move(mapping));
}

// Rows `rows` (K,) i32 on the device (sampled: in range) of a mapped host table (N, ...):
// (K, ...) on the device, read by the GPU from host memory on this thread's stream.
Tensor gather_mapped(const Tensor& mapped, const Tensor& rows) {
  Shape shape = mapped.shape();
  shape[0] = rows.numel();
  Tensor out = Tensor::empty(shape, mapped.dtype(), Device::cuda, "mini-batch rows");
  ops::kernels::gather_rows(mapped, ops::RowIndex::unchecked(rows), row_words(mapped), out);
  return out;
}

// A sampled block with the self loops the layers add (Graph::with_self_loops), and its edge
// features (rows edge_ids of edge_attr, undefined: none) with the loops' placeholder rows: added
// here, on the loader's thread, a layer uses the block as it is instead of adding them in the step
// (for a CUDA block, through the host).
std::pair<Graph, Tensor> looped_block(const SampledBlock& block, const Tensor& edge_attr) {
  return with_self_loops(block.graph,
                         edge_attr.defined() ? gather_rows(edge_attr, block.edge_ids) : Tensor());
}

// Where the sampler's CSR lives and its draws run.
Device sampler_device(const NeighborLoaderOptions& options, Device device) {
  return options.sample_on_device ? device : Device::cpu;
}

}  // namespace

// Page-locked memory for one batch's feature and label rows (or, gathered by the GPU but sampled
// on the host, their row ids) and its blocks' edge features, grown as batches need, and the event
// after the copies out of it: the thread waits for it before writing there again.
struct NeighborLoader::Staging {
  std::unique_ptr<cuda::HostBuffer> x, y;
  std::vector<std::unique_ptr<cuda::HostBuffer>> edge_attrs;  // one per block
  std::shared_ptr<const cuda::Event> copied;

  // A new device tensor of `shape` and `dtype`, written by `fill` into `buffer` (grown to fit)
  // as a host tensor, then copied by a copy queued on this thread's stream.
  template <class Fill>
  static Tensor stage(const Shape& shape, DType dtype, std::unique_ptr<cuda::HostBuffer>& buffer,
                      const Fill& fill) {
    const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    if (!buffer || buffer->size() < bytes) buffer = std::make_unique<cuda::HostBuffer>(bytes + bytes / 2);
    Tensor pinned = Tensor::from_blob(buffer->data(), shape, dtype, Device::cpu);
    fill(pinned);
    Tensor on_device = Tensor::empty(shape, dtype, Device::cuda, "mini-batch rows");
    buffer->copy_to_device(on_device.raw_data(), bytes);
    return on_device;
  }

  // Rows `rows` of the host table (N, ...) on the device (K, ...).
  static Tensor stage_rows(const Tensor& table, const std::vector<int32_t>& rows,
                           std::unique_ptr<cuda::HostBuffer>& buffer) {
    Shape shape = table.shape();
    shape[0] = static_cast<int64_t>(rows.size());
    return stage(shape, table.dtype(), buffer, [&](Tensor& pinned) {
      ops::kernels::gather_rows(table, ops::RowIndex::gather_only(index_of(rows), Device::cpu),
                                row_words(table), pinned);
    });
  }

  // A host tensor on the device.
  static Tensor stage_tensor(const Tensor& host, std::unique_ptr<cuda::HostBuffer>& buffer) {
    return stage(host.shape(), host.dtype(), buffer, [&](Tensor& pinned) { pinned.copy_(host); });
  }
};

void NeighborLoaderOptions::validate() const {
  check_in_range("NeighborLoader: batch_size", batch_size, kBatchSizeRange);
  check_in_range("NeighborLoader: prefetch", prefetch, kPrefetchRange);
  NeighborSamplerOptions{fanouts, replace, seed}.validate();
}

NeighborLoader::NeighborLoader(Graph graph, Tensor x, Tensor y, Tensor edge_attr, std::vector<int32_t> seeds,
                               NeighborLoaderOptions options, Device device)
    : sampler_(std::move(graph), NeighborSamplerOptions{options.fanouts, options.replace, options.seed},
               sampler_device(options, device)),
      x_(std::move(x)),
      y_(std::move(y)),
      edge_attr_(std::move(edge_attr)),
      seeds_(std::move(seeds)),
      options_(std::move(options)),
      device_(device),
      threads_(omp_get_max_threads()),
      staging_(device == Device::cuda ? 2 : 0) {
  options_.validate();
  const Graph& g = sampler_.graph();
  const int64_t n = g.num_dst_nodes();
  GAT_CHECK(x_.defined() && y_.defined(), "NeighborLoader: x and y must be given (x ", x_.describe(), ", y ",
            y_.describe(), ")");
  GAT_CHECK(x_.device() == Device::cpu && x_.dim() == 2 && x_.size(0) == n, "NeighborLoader: x ",
            x_.describe(), " must be (", n, ", F) on the CPU for a graph of ", n, " nodes");
  GAT_CHECK(y_.device() == Device::cpu && y_.dtype() == DType::i32 && y_.dim() == 1 && y_.size(0) == n,
            "NeighborLoader: y ", y_.describe(), " must be (", n, ",) i32 on the CPU");
  GAT_CHECK(!edge_attr_.defined() || (edge_attr_.device() == Device::cpu && edge_attr_.dim() == 2 &&
                                      edge_attr_.size(0) == g.num_edges()),
            "NeighborLoader: edge_attr ", edge_attr_.describe(), " must be (", g.num_edges(),
            ", D) on the CPU, in the graph's edge order");
  GAT_CHECK(!seeds_.empty(), "NeighborLoader: no seed nodes");
  // The sampler checks each batch's seeds; a repeat across batches would pass it, so check here.
  std::vector<int32_t> sorted = seeds_;
  std::sort(sorted.begin(), sorted.end());
  GAT_CHECK(sorted.front() >= 0 && sorted.back() < n, "NeighborLoader: a seed is outside [0, ", n, ")");
  const auto repeat = std::adjacent_find(sorted.begin(), sorted.end());
  GAT_CHECK(repeat == sorted.end(), "NeighborLoader: seed node ", repeat == sorted.end() ? 0 : *repeat,
            " is given twice");
  if (device_ == Device::cuda && options_.gather_on_device) map_features();
}

void NeighborLoader::map_features() {
  try {
    mapped_x_ = mapped_view(x_);
    mapped_y_ = mapped_view(y_);
  } catch (const Error& e) {
    mapped_x_ = mapped_y_ = Tensor();
    std::cerr << "NeighborLoader: the feature rows are gathered on the host (" << e.what() << ")\n";
  }
}

NeighborLoader::~NeighborLoader() { stop(); }

int64_t NeighborLoader::num_batches() const {
  const auto n = static_cast<int64_t>(seeds_.size());
  return (n + options_.batch_size - 1) / options_.batch_size;
}

std::vector<int32_t> NeighborLoader::epoch_order(int64_t epoch) const {
  GAT_CHECK(epoch >= 0, "NeighborLoader: epoch ", epoch, " is negative");
  return options_.shuffle ? shuffle_nodes(seeds_, options_.seed, static_cast<uint64_t>(epoch)) : seeds_;
}

const std::vector<int32_t>& NeighborLoader::batch_seeds(int64_t batch, const std::vector<int32_t>& order,
                                                        std::vector<int32_t>& seeds) const {
  GAT_CHECK(batch >= 0 && batch < num_batches() && order.size() == seeds_.size(), "NeighborLoader: no batch ",
            batch, " of ", num_batches(), " in an order of ", order.size(), " seeds (", seeds_.size(),
            " given)");
  const auto first = static_cast<size_t>(batch * options_.batch_size);
  const size_t last = std::min(order.size(), first + static_cast<size_t>(options_.batch_size));
  seeds.assign(order.begin() + static_cast<std::ptrdiff_t>(first),
               order.begin() + static_cast<std::ptrdiff_t>(last));
  return seeds;
}

uint64_t NeighborLoader::batch_key(int64_t epoch, int64_t batch) const {
  return static_cast<uint64_t>(epoch) * static_cast<uint64_t>(num_batches()) + static_cast<uint64_t>(batch);
}

SampledBatch NeighborLoader::sample_batch(int64_t epoch, int64_t batch, const std::vector<int32_t>& order,
                                          std::vector<int32_t>& seeds) const {
  return sampler_.sample(batch_seeds(batch, order, seeds), batch_key(epoch, batch));
}

MiniBatch NeighborLoader::make_batch(int64_t epoch, int64_t batch, const std::vector<int32_t>& order) const {
  MiniBatch out;
  SampledBatch sampled = sample_batch(epoch, batch, order, out.seeds);
  out.x = gather_rows(x_, sampled.input_nodes());
  out.y = gather_rows(y_, out.seeds);
  for (const SampledBlock& block : sampled.blocks) {
    auto [graph, attr] = looped_block(block, edge_attr_);
    if (attr.defined()) out.edge_attrs.push_back(std::move(attr));
    out.blocks.push_back(std::move(graph));
  }
  return out;
}

MiniBatch NeighborLoader::make_device_batch(int64_t epoch, int64_t batch, const std::vector<int32_t>& order,
                                            Staging& staging) const {
  MiniBatch out;
  // The copies out of the staging buffers have run (queued two batches ago on this stream, they
  // are before everything this batch queues).
  if (staging.copied) staging.copied->synchronize();
  Tensor input_ids, seed_ids;        // (Ns0,), (B,) i32 on the device, where sampled there
  std::vector<int32_t> input_nodes;  // (Ns0,) on the host, where sampled there
  if (sampler_.device() == Device::cuda && !edge_attr_.defined()) {
    // The blocks stay on the device: sampled and built there (ops::block_graph), with their
    // loops, and so do the ids of the rows to gather. blocks.back()'s first B sources are the seeds.
    const std::vector<ops::SampledLayer> layers =
        sampler_.sample_layers(batch_seeds(batch, order, out.seeds), batch_key(epoch, batch));
    for (const ops::SampledLayer& layer : layers)
      out.blocks.push_back(ops::block_graph(layer.row_ptr, layer.col, layer.src_nodes.numel()));
    input_ids = layers.front().src_nodes;
    seed_ids = layers.back().src_nodes.rows(0, static_cast<int64_t>(out.seeds.size()));
  } else {  // through the host: sampled there, or edge features to gather with the edge ids
    SampledBatch sampled = sample_batch(epoch, batch, order, out.seeds);
    staging.edge_attrs.resize(sampled.blocks.size());
    for (size_t l = 0; l < sampled.blocks.size(); ++l) {
      const auto [graph, attr] = looped_block(sampled.blocks[l], edge_attr_);
      if (attr.defined()) out.edge_attrs.push_back(Staging::stage_tensor(attr, staging.edge_attrs[l]));
      out.blocks.push_back(graph.to(device_));
    }
    input_nodes = std::move(sampled.blocks.front().src_nodes);
  }
  if (mapped_x_.defined()) {     // the GPU gathers the rows from host memory
    if (!input_ids.defined()) {  // sampled on the host: the ids go to the device, not the rows
      input_ids = Staging::stage_tensor(index_of(input_nodes), staging.x);
      seed_ids = Staging::stage_tensor(index_of(out.seeds), staging.y);
    }
    out.x = gather_mapped(mapped_x_, input_ids);
    out.y = gather_mapped(mapped_y_, seed_ids);
  } else {  // the host gathers them; the ids come back first where sampled on the device (a wait)
    if (input_ids.defined()) input_nodes = input_ids.to_vector<int32_t>();
    out.x = Staging::stage_rows(x_, input_nodes, staging.x);
    out.y = Staging::stage_rows(y_, out.seeds, staging.y);
  }
  auto copied = std::make_shared<cuda::Event>();
  copied->record();
  out.copied = staging.copied = std::move(copied);
  return out;
}

void NeighborLoader::start_epoch(int64_t epoch) {
  stop();
  std::lock_guard<std::mutex> lock(mutex_);
  stop_ = finished_ = false;
  error_ = nullptr;
  worker_ = std::thread([this, epoch] {
    omp_set_num_threads(threads_);  // a new thread starts from OpenMP's default
    try {
      const std::vector<int32_t> order = epoch_order(epoch);
      const bool on_cuda = device_ == Device::cuda;
      std::optional<cuda::OnOwnStream> own_stream;  // left first: waits for the copies
      if (on_cuda) own_stream.emplace();
      for (int64_t b = 0; b < num_batches(); ++b) {
        MiniBatch batch = on_cuda ? make_device_batch(epoch, b, order, staging_[static_cast<size_t>(b % 2)])
                                  : make_batch(epoch, b, order);
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || static_cast<int64_t>(ready_.size()) < options_.prefetch; });
        if (stop_) return;
        ready_.push_back(std::move(batch));
        changed_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
    changed_.notify_all();
  });
}

std::optional<MiniBatch> NeighborLoader::next() {
  MiniBatch batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    GAT_CHECK(worker_.joinable(), "NeighborLoader::next: no epoch started (start_epoch)");
    changed_.wait(lock, [&] { return !ready_.empty() || finished_; });
    if (ready_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    batch = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
  }
  if (batch.copied) {
    batch.copied->join();
    batch.copied.reset();
  }
  return batch;
}

void NeighborLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    changed_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.clear();
}

}  // namespace gat
