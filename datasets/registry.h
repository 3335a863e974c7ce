// One entry point for every dataset source, and a JSON summary of a loaded dataset.
#pragma once

#include <optional>
#include <string>

#include "gat/datasets/dataset.h"
#include "gat/datasets/multigraph.h"

namespace gat {

// `name` is one of
//   cora | citeseer | pubmed              Planetoid raw files in `data_dir` (default_data_dir()
//                                         when empty); the missing ones are downloaded there
//                                         first (fetch_planetoid, datasets/download.h)
//   synthetic:<nodes>:<avg_degree>:<seed>[:<edge_dim>]
//                                         the degree-corrected SBM generator (datasets/generator.h),
//                                         with edge_dim edge features when given
//   a directory                           an OGB-style raw directory (datasets/custom.h)
// A name with a '/' is always a directory (./cora, data/cora). A bare name that is both a
// built-in dataset and a directory here is refused as ambiguous, saying how to name either,
// except that a Planetoid name is the built-in dataset when a data folder is given: `data_dir`,
// or $GAT_DATA_DIR (default_data_dir's first choice) when `data_dir` is empty. Names are read in
// any case (CORA).
Dataset load_dataset(const std::string& name, const std::string& data_dir = "");

// Multi-graph datasets for inductive training (datasets/multigraph.h). `name` is one of
//   ppi                                   PPI's raw files (datasets/ppi.h) in `data_dir`
//                                         (default_data_dir("ppi") when empty); the missing ones
//                                         are extracted there from DGL's ppi.zip, downloaded and
//                                         verified first when it is not there (fetch_ppi,
//                                         datasets/download.h)
//   synthetic-ppi:<graphs>:<nodes>:<seed>[:<features>:<labels>]
//                                         generate_multigraph (defaults 50 features, 121 labels)
//   a directory holding train_graph.json  PPI's raw files there
// is_multigraph_dataset says whether `name` is one of these (load_dataset refuses them, naming
// this function). Names are read in any case.
bool is_multigraph_dataset(const std::string& name);
MultiGraphDataset load_multigraph_dataset(const std::string& name, const std::string& data_dir = "");

// Whether load_dataset reads `name` as a directory: a directory that no built-in dataset's bare
// name claims (a bare built-in name is the built-in dataset, or refused). A path that cannot be
// looked at (a loop of symbolic links, a name too long) is a gat::Error naming it.
bool dataset_is_folder(const std::string& name);

// Where a downloaded dataset's files are when no folder is given: $GAT_DATA_DIR when set; else the
// per-user cache, $XDG_CACHE_HOME/gat/<dataset> (an absolute XDG_CACHE_HOME only, as the XDG
// base directory specification says), else HOME/.cache/gat/<dataset>, with HOME from $HOME or,
// where that is unset or empty, the account's home directory (the password database), as XDG
// tools fall back. `dataset` is "planetoid" (Cora, CiteSeer and PubMed share a folder) or "ppi".
// Only loading one of those datasets without a folder asks for it: when there is none, that is a
// gat::Error saying what to set, and anything else works without HOME.
std::string default_data_dir(const std::string& dataset = "planetoid");
// The same, with the account's home directory given (null: none), and nothing when there is none.
std::optional<std::string> find_default_data_dir(const char* account_home,
                                                 const std::string& dataset = "planetoid");

// {name, nodes, edges (directed, self loops not counted), features, edge_features (0: none),
//  classes, train, val, test,
//  label_counts (per class, all nodes), feature_checksum (sum of x in double)} as one line of
// JSON text, which is UTF-8: a byte of the name (a folder's) that is not is written as U+FFFD.
std::string dataset_summary(const Dataset& data);
// {name, graphs: [train, val, test], nodes, edges (directed), features, labels,
//  label_density (the share of 1s over all nodes)} as one line of JSON.
std::string dataset_summary(const MultiGraphDataset& data);

}  // namespace gat
