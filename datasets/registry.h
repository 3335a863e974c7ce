// One entry point for every dataset source, and a JSON summary of a loaded dataset.
#pragma once

#include <string>

#include "gat/datasets/dataset.h"

namespace gat {

// `name` is one of
//   cora | citeseer | pubmed              Planetoid raw files in `data_dir` (default_data_dir()
//                                         when empty); the missing ones are downloaded there
//                                         first (fetch_planetoid, datasets/download.h)
//   synthetic:<nodes>:<avg_degree>:<seed>[:<edge_dim>]
//                                         the degree-corrected SBM generator (datasets/generator.h),
//                                         with edge_dim edge features when given
//   a directory                           an OGB-style raw directory (datasets/custom.h)
Dataset load_dataset(const std::string& name, const std::string& data_dir = "");

// Where the Planetoid files are when no folder is given: $GAT_DATA_DIR when set; else the
// per-user cache, $XDG_CACHE_HOME/gat/planetoid (an absolute XDG_CACHE_HOME only, as the XDG
// base directory specification says), else $HOME/.cache/gat/planetoid.
std::string default_data_dir();

// {name, nodes, edges (directed, self loops not counted), features, edge_features (0: none),
//  classes, train, val, test,
//  label_counts (per class, all nodes), feature_checksum (sum of x in double)} as one line of
// JSON text.
std::string dataset_summary(const Dataset& data);

}  // namespace gat
