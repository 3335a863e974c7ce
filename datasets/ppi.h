// The PPI dataset's raw files (Hamilton et al. 2017, the GAT paper's inductive benchmark), read as
// PyTorch Geometric's PPI dataset reads them. A folder holds, for each split s of train, valid and
// test:
//   s_graph.json     the graph as networkx's node-link JSON: {"directed": false, "nodes": [{"id":
//                    0, ...}, ...], "links": [{"source": 0, "target": 1}, ...]}
//   s_feats.npy      (N, 50) float features, row i for node id i
//   s_labels.npy     (N, 121) labels, 0 or 1
//   s_graph_id.npy   (N,) integer graph of every node (20 training graphs, 2 and 2)
//
// PyG's semantics (torch_geometric/datasets/ppi.py): networkx makes an undirected graph a
// DiGraph with both directions of every link ("directed": true keeps them as given), duplicates
// merge, self loops are removed; each graph is the nodes of one graph id with the edges between
// them, renumbered from 0. x and y become f32.
//
// Stricter than PyG, with a gat::Error naming the file: node ids must be 0..N-1, each once, for N
// the rows of the .npy files (PyG assumes it); graph ids must come in runs of non-decreasing,
// consecutive values (PyG renumbers each graph by its edges' smallest id, which is wrong for a
// graph whose first node has no edge, and takes nodes of a graph id wherever they are); a link
// between two graphs (PyG drops it silently), a link to a node that does not exist, a label other
// than 0 or 1, a non-finite feature, rows that differ between the files, bad JSON and malformed
// .npy files (datasets/npy.h) are refused.
//
// load_ppi reads a folder and downloads nothing. fetch_ppi (datasets/download.h) fills a folder
// from DGL's ppi.zip, as PyG downloads it; load_multigraph_dataset("ppi") (datasets/registry.h)
// calls both.
#pragma once

#include <string>
#include <vector>

#include "gat/datasets/multigraph.h"

namespace gat {

inline constexpr const char* kPpiSplits[] = {"train", "valid", "test"};

// The twelve file names above (train_graph.json, train_feats.npy, ...), split by split.
std::vector<std::string> ppi_raw_files();

MultiGraphDataset load_ppi(const std::string& dir);

}  // namespace gat
