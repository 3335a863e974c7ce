// The Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw files
// ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}, assembled exactly as PyTorch Geometric's
// Planetoid dataset (split "public"):
//   - features: allx rows, then tx rows; for CiteSeer, whose test.index skips 15 ids, tx/ty are
//     widened to the full id range with all-zero rows; then x[test_index] = x[sorted(test_index)];
//   - labels: argmax of the one-hot rows (an all-zero row gives 0), permuted the same way;
//   - split: train = the first len(y) nodes, val = the next 500, test = the test.index ids (which
//     must not be training or validation nodes);
//   - graph: the adjacency lists, made undirected, deduplicated, self loops removed;
//   - preprocessing: row_normalize (training applies normalize_features, as the paper does).
// Every malformed or inconsistent file is a gat::Error naming the file.
#pragma once

#include <string>

#include "gat/datasets/dataset.h"

namespace gat {

// `name`: cora, citeseer or pubmed (any case); `data_dir`: the folder holding the raw files.
Dataset load_planetoid(const std::string& name, const std::string& data_dir);

// Row normalisation as PyG's NormalizeFeatures: x - min(x), then each row divided by its sum
// clamped to at least 1 (so all-zero rows stay zero). Returns a new (N, F) f32 tensor.
Tensor normalize_features(const Tensor& x);

}  // namespace gat
