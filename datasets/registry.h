// One entry point for every dataset source, and a JSON summary of a loaded dataset.
#pragma once

#include <string>

#include "gat/datasets/dataset.h"

namespace gat {

// `name` is one of
//   cora | citeseer | pubmed              Planetoid raw files in `data_dir` (default_data_dir()
//                                         when empty)
//   synthetic:<nodes>:<avg_degree>:<seed> the degree-corrected SBM generator (datasets/generator.h)
//   a directory                           an OGB-style raw directory (datasets/custom.h)
Dataset load_dataset(const std::string& name, const std::string& data_dir = "");

// Where the Planetoid files are: $GAT_DATA_DIR when set; else the first existing of
// shared/datasets/planetoid, ../shared/datasets/planetoid, ../../shared/datasets/planetoid and
// ../../../shared/datasets/planetoid relative to the working directory, then
// ../shared/datasets/planetoid relative to the source tree this library was built from; else
// ../shared/datasets/planetoid (so that the loader's error names a path).
std::string default_data_dir();

// {name, nodes, edges (directed, self loops not counted), features, classes, train, val, test,
//  label_counts (per class, all nodes), feature_checksum (sum of x in double)} as one line of
// JSON text.
std::string dataset_summary(const Dataset& data);

}  // namespace gat
