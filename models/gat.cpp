#include "gat/models/gat.h"

#include "gat/framework/ops/activations.h"

namespace gat {

namespace {

// The metadata keys, in the order of GATConfig's fields.
constexpr const char* kInFeatures = "in_features";
constexpr const char* kNumClasses = "num_classes";
constexpr const char* kHidden = "hidden";
constexpr const char* kHeads = "heads";
constexpr const char* kOutputHeads = "output_heads";
constexpr const char* kDropout = "dropout";
constexpr const char* kValueDropout = "value_dropout";
constexpr const char* kNegativeSlope = "negative_slope";
constexpr const char* kDtype = "dtype";
constexpr const char* kEdgeDim = "edge_dim";

}  // namespace

void GATConfig::validate(const std::string& where) const {
  const std::string prefix = where + ": ";
  check_in_range(prefix + kInFeatures, in_features, kSizeRange);
  check_in_range(prefix + kNumClasses, num_classes, kSizeRange);
  check_in_range(prefix + kHidden, hidden, kHiddenRange);
  check_in_range(prefix + kHeads, heads, kHeadsRange);
  check_in_range(prefix + kOutputHeads, output_heads, kHeadsRange);
  check_in_range(prefix + kDropout, dropout, kDropoutRange);
  check_in_range(prefix + kValueDropout, value_dropout, kDropoutRange);
  check_in_range(prefix + kNegativeSlope, negative_slope, kNegativeSlopeRange);
  check_in_range(prefix + kEdgeDim, edge_dim, kEdgeDimRange);
  GAT_CHECK(dtype == DType::f32 || dtype == DType::f64, prefix, "dtype ", dtype_name(dtype),
            " is not a floating-point type");
}

io::Metadata GATConfig::to_metadata() const {
  return {{kInFeatures, io::metadata_number(in_features)},
          {kNumClasses, io::metadata_number(num_classes)},
          {kHidden, io::metadata_number(hidden)},
          {kHeads, io::metadata_number(heads)},
          {kOutputHeads, io::metadata_number(output_heads)},
          {kDropout, io::metadata_number(dropout)},
          {kValueDropout, io::metadata_number(value_dropout)},
          {kNegativeSlope, io::metadata_number(negative_slope)},
          {kDtype, dtype_name(dtype)},
          {kEdgeDim, io::metadata_number(edge_dim)}};
}

GATConfig GATConfig::from_metadata(const io::Metadata& metadata, const std::string& where) {
  const io::MetadataReader read(metadata, where);
  GATConfig c;
  c.in_features = read.integer(kInFeatures);
  c.num_classes = read.integer(kNumClasses);
  c.hidden = read.integer(kHidden);
  c.heads = read.integer(kHeads);
  c.output_heads = read.integer(kOutputHeads);
  c.dropout = read.number(kDropout);
  c.value_dropout = read.number(kValueDropout);
  c.negative_slope = read.number(kNegativeSlope);
  if (read.has(kDtype)) {  // checkpoints before the key was written hold f32 parameters
    const std::string& name = read.text(kDtype);
    GAT_CHECK(name == dtype_name(DType::f32) || name == dtype_name(DType::f64), where, ": metadata '", kDtype,
              "' = '", name, "' is not f32 or f64");
    c.dtype = name == dtype_name(DType::f32) ? DType::f32 : DType::f64;
  }
  if (read.has(kEdgeDim)) c.edge_dim = read.integer(kEdgeDim);  // older checkpoints: no edge features
  c.validate(where + ": metadata");
  return c;
}

bool GATConfig::operator==(const GATConfig& o) const {
  return in_features == o.in_features && num_classes == o.num_classes && hidden == o.hidden &&
         heads == o.heads && output_heads == o.output_heads && dropout == o.dropout &&
         value_dropout == o.value_dropout && negative_slope == o.negative_slope && dtype == o.dtype &&
         edge_dim == o.edge_dim;
}

GAT::GAT(const GATConfig& config, Generator& init) : config_(config) {
  config.validate("GAT");
  dropout = register_module("dropout", std::make_shared<Dropout>(config.dropout));
  GATConvOptions first;
  first.in_channels = config.in_features;
  first.out_channels = config.hidden;
  first.heads = config.heads;
  first.concat = true;
  first.negative_slope = config.negative_slope;
  first.dropout = config.dropout;
  first.value_dropout = config.value_dropout;
  first.dtype = config.dtype;
  first.edge_dim = config.edge_dim;
  conv1 = register_module("conv1", std::make_shared<GATConv>(first, init));
  GATConvOptions second = first;
  second.in_channels = config.hidden * config.heads;
  second.out_channels = config.num_classes;
  second.heads = config.output_heads;
  second.concat = false;
  conv2 = register_module("conv2", std::make_shared<GATConv>(second, init));
}

Tensor GAT::forward(const Features& x, const Graph& graph, Generator& gen, const Tensor& edge_attr) {
  Tensor h = conv1->forward(dropout->forward(x, gen), graph, edge_attr, gen);  // (N, heads * hidden)
  h = ops::elu(h);
  return conv2->forward(dropout->forward(h, gen), graph, edge_attr, gen);  // (N, num_classes)
}

}  // namespace gat
