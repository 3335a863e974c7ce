// Mini-batch training on sampled neighbourhoods (GraphSAGE's recipe, PyG's NeighborLoader
// examples), for graphs whose full-batch step does not fit: each epoch is a pass over the
// training nodes in shuffled batches, a step per batch on its sampled blocks (NeighborLoader),
// and the evaluation is exact: layer-wise inference over every node with all its in-edges
// (PyG's `inference`), never sampled.
//
// Data flow: the dataset stays on the host (the graph without self loops, x dense); the loader's
// thread samples each batch (on the device for a CUDA model, with the graph's CSR there),
// gathers its rows on the host and copies them to the device beside the step (NeighborLoader);
// the inference copies the graph and x to the device once and runs each layer on the whole
// graph there (or, with a smaller inference_batch_size, copies one chunk's rows at a time and
// brings each layer's outputs back to the host).
#pragma once

#include <cstdint>
#include <functional>

#include "gat/datasets/dataset.h"
#include "gat/framework/graph.h"
#include "gat/framework/optim.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"
#include "gat/models/gat.h"
#include "gat/train/neighbor_loader.h"
#include "gat/train/trainer.h"

namespace gat {

struct SampledTraining {
  NeighborLoaderOptions loader;  // batch_size, fanouts (one per layer), replace, seed, prefetch
  // Destinations per one-hop block of the layer-wise inference (memory on the device: their
  // rows, their in-edges and their sources' rows). The default, every node: each layer then runs
  // on the whole graph at once (the graph, x and layer 1's outputs on the device). Lower it only
  // where that does not fit.
  int64_t inference_batch_size = NeighborLoaderOptions::kBatchSizeRange.hi;
};

// The loss, correct count and rows of an epoch's steps so far.
struct StepTotals {
  double loss_sum = 0, correct = 0, rows = 0;
};

// One sampled step: forward on the batch's blocks in training mode, the mean cross-entropy of
// its seeds, backward, optimiser step; the batch's loss and correct count added to `totals`
// (which waits for the device). train_node_classifier_sampled's step, for loops of its own
// (bench/gat_bench.cpp times steps without the evaluation).
void sampled_step(GAT& model, const MiniBatch& batch, Optimizer& optimizer, Generator& gen,
                  StepTotals& totals);

// The logits (N, num_classes) on the host of `model` in eval mode, without autograd, over every
// node of `graph` (on the CPU, without the self loops the layers add; one node set), layer by
// layer: layer 1 over all nodes, then layer 2 on its outputs, each over chunks of batch_size
// destinations with all their in-edges, the chunk's input rows copied to `device`. x (N, F)
// dense and edge_attr (E, D) in graph's edge order (undefined: none) on the host. With
// batch_size >= N it is the full-graph forward, bit for bit (each layer on the whole graph, on
// `device`); with smaller chunks the same up to rounding (docs/minibatch.md says why not to the bit).
Tensor layerwise_inference(GAT& model, const Graph& graph, const Tensor& x, const Tensor& edge_attr,
                           int64_t batch_size, Device device);

// train_node_classifier (trainer.h) with sampled steps: every epoch takes the batches of
// data.train_index (one optimiser step each, the mean cross-entropy over the batch's seeds), then
// evaluates with layerwise_inference; early stopping, the remembered epoch and on_epoch as
// there. EpochStats::loss and train_acc are over the epoch's batches (training mode), step_ms is
// the epoch's steps with their waits for batches. `data` is on the host: its graph without self
// loops, x dense. The model and its optimiser are on `device`; the loader's seed is `sampled`'s.
// Refused (gat::Error): options.loss, run checkpoints (options.checkpoints), a model of other
// than two layers' fanouts.
TrainResult train_node_classifier_sampled(GAT& model, const Dataset& data, const TrainOptions& options,
                                          const SampledTraining& sampled, Device device, Generator& gen,
                                          const std::function<void(const EpochStats&)>& on_epoch = {});

}  // namespace gat
