#include "gat/models/gat.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "gat/framework/detail/metadata_fields.h"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/narrow.h"
#include "gat/framework/ops/to_dtype.h"

namespace gat {

namespace {

using Field = detail::AnyMetadataField<GATConfig>;
template <class T>
using FieldOf = detail::MetadataField<GATConfig, T>;

// GATConfig's numeric fields, in the order of its members.
const Field kNumericFields[] = {
    FieldOf<int64_t>{"in_features", &GATConfig::in_features, GATConfig::kSizeRange},
    FieldOf<int64_t>{"num_classes", &GATConfig::num_classes, GATConfig::kSizeRange},
    FieldOf<int64_t>{"hidden", &GATConfig::hidden, GATConfig::kHiddenRange},
    FieldOf<int64_t>{"heads", &GATConfig::heads, GATConfig::kHeadsRange},
    FieldOf<int64_t>{"output_heads", &GATConfig::output_heads, GATConfig::kHeadsRange},
    FieldOf<double>{"dropout", &GATConfig::dropout, GATConfig::kDropoutRange},
    FieldOf<double>{"value_dropout", &GATConfig::value_dropout, GATConfig::kDropoutRange},
    FieldOf<double>{"negative_slope", &GATConfig::negative_slope, GATConfig::kNegativeSlopeRange},
    FieldOf<int64_t>{"edge_dim", &GATConfig::edge_dim, GATConfig::kEdgeDimRange, true},
};

// The other keys.
constexpr const char* kDtype = "dtype";
constexpr const char* kPrecision = "precision";
constexpr const char* kLayer = "layer";
constexpr const char* kFillValue = "fill_value";

// Sets c's numeric fields from `read`: the ones every checkpoint has, or (later) the ones that
// older checkpoints may lack, where present.
void read_numeric_fields(const io::MetadataReader& read, bool later, GATConfig& c) {
  detail::for_each_field(kNumericFields, [&](const auto& f) {
    if (f.later == later && (!later || read.has(f.key))) detail::read_field(f, read, c);
  });
}

constexpr AttentionLayer kLayers[] = {AttentionLayer::gat, AttentionLayer::gatv2};

// x with its values stored in bf16 (through ops::to_dtype: a gradient x needs comes back in its dtype).
Features in_bf16(const Features& x) {
  if (x.is_sparse()) return x.sparse().with_values(ops::to_dtype(x.sparse().values(), DType::bf16));
  return ops::to_dtype(x.dense(), DType::bf16);
}

// The options shared by both layer kinds, for the first (concatenated heads) or the output
// (averaged heads) layer of the network.
template <class Options>
Options layer_options(const GATConfig& c, bool output_layer) {
  Options o;
  o.in_channels = output_layer ? c.hidden * c.heads : c.in_features;
  o.out_channels = output_layer ? c.num_classes : c.hidden;
  o.heads = output_layer ? c.output_heads : c.heads;
  o.concat = !output_layer;
  o.negative_slope = c.negative_slope;
  o.dropout = c.dropout;
  o.edge_dim = c.edge_dim;
  o.fill_value = c.fill_value;
  o.dtype = c.dtype;
  return o;
}

}  // namespace

const char* attention_layer_name(AttentionLayer layer) {
  return layer == AttentionLayer::gat ? "gat" : "gatv2";
}

void GATConfig::validate(const std::string& where) const {
  const std::string prefix = where + ": ";
  detail::for_each_field(kNumericFields, [&](const auto& f) { detail::check_field(f, prefix, *this); });
  GAT_CHECK(dtype == DType::f32 || dtype == DType::f64, prefix, "dtype ", dtype_name(dtype),
            " is not a floating-point type");
  GAT_CHECK(precision == DType::f32 || (precision == DType::bf16 && dtype == DType::f32), prefix, kPrecision,
            " ", dtype_name(precision), " with dtype ", dtype_name(dtype),
            ": the precision is f32, or bf16 with f32 parameters");
  GAT_CHECK(layer == AttentionLayer::gat || value_dropout == 0.0, prefix, "value_dropout ", value_dropout,
            " with layer ", attention_layer_name(layer),
            ": GATv2Conv has no value dropout (its source rows are the scores' terms and the values)");
}

io::Metadata GATConfig::to_metadata() const {
  io::Metadata m{{kDtype, dtype_name(dtype)},
                 {kPrecision, dtype_name(precision)},
                 {kFillValue, fill_value.name()},
                 {kLayer, attention_layer_name(layer)}};
  detail::for_each_field(kNumericFields, [&](const auto& f) { detail::write_field(f, *this, m); });
  return m;
}

GATConfig GATConfig::from_metadata(const io::Metadata& metadata, const std::string& where) {
  const io::MetadataReader read(metadata, where);
  GATConfig c;
  read_numeric_fields(read, false, c);
  if (read.has(kDtype)) {  // checkpoints before the key was written hold f32 parameters
    const std::string& name = read.text(kDtype);
    GAT_CHECK(name == dtype_name(DType::f32) || name == dtype_name(DType::f64), where, ": metadata '", kDtype,
              "' = '", name, "' is not f32 or f64");
    c.dtype = name == dtype_name(DType::f32) ? DType::f32 : DType::f64;
  }
  if (read.has(kPrecision)) {  // checkpoints before the key was written ran in f32
    const std::string& name = read.text(kPrecision);
    GAT_CHECK(name == dtype_name(DType::f32) || name == dtype_name(DType::bf16), where, ": metadata '",
              kPrecision, "' = '", name, "' is not f32 or bf16");
    c.precision = name == dtype_name(DType::f32) ? DType::f32 : DType::bf16;
  }
  read_numeric_fields(read, true, c);  // older checkpoints: no edge features
  if (read.has(kFillValue)) {          // older checkpoints: the mean
    const std::string& text = read.text(kFillValue);
    const std::optional<ops::SelfLoopFill> fill = ops::SelfLoopFill::try_parse(text);
    GAT_CHECK(fill.has_value(), where, ": metadata '", kFillValue, "' = '", text, "' is not ",
              ops::SelfLoopFill::kAccepted);
    c.fill_value = *fill;
  }
  if (read.has(kLayer)) {  // checkpoints before the key was written hold GATConv layers
    const std::string& name = read.text(kLayer);
    const auto* known = std::find_if(std::begin(kLayers), std::end(kLayers),
                                     [&](AttentionLayer l) { return name == attention_layer_name(l); });
    GAT_CHECK(known != std::end(kLayers), where, ": metadata '", kLayer, "' = '", name,
              "' is not gat or gatv2");
    c.layer = *known;
  }
  c.validate(where + ": metadata");
  return c;
}

bool GATConfig::operator==(const GATConfig& o) const {
  return layer == o.layer && in_features == o.in_features && num_classes == o.num_classes &&
         hidden == o.hidden && heads == o.heads && output_heads == o.output_heads && dropout == o.dropout &&
         value_dropout == o.value_dropout && negative_slope == o.negative_slope && dtype == o.dtype &&
         precision == o.precision && edge_dim == o.edge_dim && fill_value == o.fill_value;
}

GAT::GAT(const GATConfig& config, Generator& init) : config_(config) {
  config.validate("GAT");
  dropout = register_module("dropout", std::make_shared<Dropout>(config.dropout));
  if (config.layer == AttentionLayer::gatv2) {
    v2_conv1 = register_module(
        "conv1", std::make_shared<GATv2Conv>(layer_options<GATv2ConvOptions>(config, false), init));
    v2_conv2 = register_module(
        "conv2", std::make_shared<GATv2Conv>(layer_options<GATv2ConvOptions>(config, true), init));
    return;
  }
  GATConvOptions first = layer_options<GATConvOptions>(config, false);
  GATConvOptions second = layer_options<GATConvOptions>(config, true);
  first.value_dropout = second.value_dropout = config.value_dropout;
  // The input dropout inside layer 1 (its projection's product, for sparse features), and ELU and
  // the dropout before layer 2 inside layer 1's kernels (GATConvOptions::elu).
  first.input_dropout = config.dropout;
  first.elu = true;
  first.output_dropout = config.dropout;
  conv1 = register_module("conv1", std::make_shared<GATConv>(first, init));
  conv2 = register_module("conv2", std::make_shared<GATConv>(second, init));
}

Tensor GAT::forward_layer(int layer, const Features& x, const Graph& graph, Generator& gen,
                          const Tensor& edge_attr) {
  GAT_CHECK(layer == 1 || layer == 2, "GAT::forward_layer: layer ", layer, " is not 1 or 2");
  const bool block = graph.is_bipartite();
  GAT_CHECK(!block || (!x.is_sparse() && graph.num_dst_nodes() <= graph.num_src_nodes()),
            "GAT::forward_layer: on a block (", graph.num_src_nodes(), " sources, ", graph.num_dst_nodes(),
            " destinations) x must be dense and the destinations the first sources; x is ", x.describe());
  // conv1 or conv2 of the configured kind on x (a block: x's first Nd rows are the destinations').
  // In bf16 the layer's input is stored in bf16 (a no-op for layer 1's bf16 output): every op
  // after it then stores its result in bf16 (framework/ops/detail/bf16_in_f32.h).
  const Features input = config_.precision == DType::bf16 ? in_bf16(x) : x;
  auto conv = [&](const Features& in) {
    GraphAttentionLayer& c = config_.layer == AttentionLayer::gatv2
                                 ? static_cast<GraphAttentionLayer&>(layer == 1 ? *v2_conv1 : *v2_conv2)
                                 : static_cast<GraphAttentionLayer&>(layer == 1 ? *conv1 : *conv2);
    if (!block) return c.forward(in, graph, edge_attr, gen);
    // ops::narrow, not a view: the gradient of layer 2's x_dst must reach layer 1's output.
    return c.forward(in, Features(ops::narrow(in.dense(), 0, 0, graph.num_dst_nodes())), graph, edge_attr,
                     gen);
  };
  if (config_.layer == AttentionLayer::gat) return conv(input);
  if (layer == 1) return conv(dropout->forward(input, gen));  // (N, heads * hidden)
  // ELU and the dropout before layer 2 in one pass; its backward needs only its output, which
  // layer 2's projection keeps anyway (h itself is not kept). The key is drawn after layer 1's,
  // as a separate dropout would draw it.
  return conv(ops::elu_dropout(input.dense(), 1.0, dropout->key(gen)));  // (N, num_classes)
}

Tensor GAT::forward(const Features& x, const Graph& graph, Generator& gen, const Tensor& edge_attr) {
  return forward_layer(2, forward_layer(1, x, graph, gen, edge_attr), graph, gen, edge_attr);
}

Tensor GAT::forward(const Tensor& x, const std::vector<Graph>& blocks, Generator& gen,
                    const std::vector<Tensor>& edge_attrs) {
  GAT_CHECK(blocks.size() == kLayers, "GAT::forward: ", blocks.size(), " blocks for ", kLayers, " layers");
  GAT_CHECK(edge_attrs.empty() || edge_attrs.size() == blocks.size(), "GAT::forward: ", edge_attrs.size(),
            " edge feature tensors for ", blocks.size(), " blocks");
  GAT_CHECK(blocks[0].num_dst_nodes() == blocks[1].num_src_nodes(), "GAT::forward: block 1 has ",
            blocks[0].num_dst_nodes(), " destinations, block 2 ", blocks[1].num_src_nodes(),
            " sources (layer 1's outputs are layer 2's inputs)");
  auto attr = [&](size_t l) { return edge_attrs.empty() ? Tensor() : edge_attrs[l]; };
  const Tensor h = forward_layer(1, x, blocks[0], gen, attr(0));  // (Nd0, heads * hidden)
  return forward_layer(2, h, blocks[1], gen, attr(1));            // (Nd1, num_classes)
}

}  // namespace gat
