// Loader for a node-classification dataset in an OGB-style raw directory:
//
//   <dir>/edge.csv[.gz]         one edge per line, "src,dst" (0-based node ids)
//   <dir>/node-feat.csv[.gz]    one line per node, F comma-separated numbers (this file defines N)
//   <dir>/node-label.csv[.gz]   one line per node, its class (an integer >= 0)
//   <dir>/split/train.csv[.gz]  one node id per line
//   <dir>/split/valid.csv[.gz]  one node id per line
//   <dir>/split/test.csv[.gz]   one node id per line
//   <dir>/edge-feat.csv[.gz]    optional: one line per line of edge.csv, D comma-separated numbers
//
// Each file may be plain text or gzip-compressed (name ending in .gz; both names present is an
// error). Blank lines are skipped; there is no header line. The graph is made undirected,
// deduplicated and self loops removed (GATConv adds its own); labels lie in [0, N) and
// num_classes = the largest label + 1; split ids are sorted ascending, distinct, and the three
// splits are non-empty and disjoint. Edge features become Dataset::edge_attr (E, D) in the
// graph's edge order (edge_attr_in_graph_order): the reverse edge added for j -> i gets j -> i's
// features, and an edge listed more than once (twice, or in both directions) gets the sum of its
// lines' features, as PyG's to_undirected and coalesce do; a self loop's features are dropped with
// it. Gzip files may decompress to at most text::max_gzip_ratio()
// times their size (GAT_MAX_GZIP_RATIO raises it). This is the layout of the OGB node
// property prediction downloads (e.g. ogbn-arxiv: raw/*.csv.gz and split/time/*.csv.gz put side
// by side in one folder). A line of node or edge features whose absolute values sum past the
// largest float is refused (a layer's sum over it would overflow). Every error names the file
// and, for content errors, the line.
#pragma once

#include <string>

#include "gat/datasets/dataset.h"

namespace gat {

Dataset load_custom(const std::string& dir);

}  // namespace gat
