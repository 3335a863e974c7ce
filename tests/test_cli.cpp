// gat_train's flag parser (train/cli.h) and the configurations it fills: defaults from the
// structs, every number parsed whole and range-checked with a readable range, the environment
// passed in rather than read by the structs; GATConfig and CheckpointInfo round-trip through
// checkpoint metadata, and reading refuses every value out of range.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli_testing.h"
#include "gat/train/checkpoint.h"
#include "gat/train/cli.h"

using namespace gat;

namespace {

using gat::testing::parse;
using gat::testing::usage_error;

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

io::Metadata with(io::Metadata m, const std::string& key, const std::string& value) {
  m[key] = value;
  return m;
}

CheckpointInfo sample_info() {
  CheckpointInfo info;
  info.dataset = "cora";
  info.model.in_features = 1433;
  info.model.num_classes = 7;
  info.model.hidden = 3;
  info.model.heads = 5;
  info.model.output_heads = 2;
  info.model.dropout = 0.125;
  info.model.layer = AttentionLayer::gatv2;
  info.model.value_dropout = 0.0;
  info.model.negative_slope = 0.3;
  info.model.dtype = DType::f64;
  info.seed = 18446744073709551615ull;
  info.best_epoch = 42;
  info.test_acc = 0.8125;
  return info;
}

}  // namespace

TEST(Cli, DefaultsAreTheStructsDefaults) {
  const cli::Flags f = parse({});
  const GATConfig model;
  const TrainOptions train;
  EXPECT_EQ(f.model, model);
  EXPECT_EQ(f.train.lr, train.lr);
  EXPECT_EQ(f.train.weight_decay, train.weight_decay);
  EXPECT_EQ(f.train.max_epochs, train.max_epochs);
  EXPECT_EQ(f.train.patience, train.patience);
  EXPECT_EQ(f.train.sparse_max_density, train.sparse_max_density);
  EXPECT_TRUE(f.train.cuda_graphs);
  EXPECT_EQ(f.dataset, "cora");
  EXPECT_FALSE(f.dataset_given);
  EXPECT_FALSE(f.help);
}

TEST(Cli, FlagsReachTheirFields) {
  const cli::Flags f = parse({"--dataset",
                              "citeseer",
                              "--hidden",
                              "4",
                              "--heads",
                              "+2",
                              "--output-heads",
                              "3",
                              "--dropout",
                              "0.5",
                              "--value-dropout",
                              "0",
                              "--lr",
                              "1e-2",
                              "--weight-decay",
                              "0",
                              "--epochs",
                              "7",
                              "--patience",
                              "9",
                              "--sparse-below",
                              "1",
                              "--no-cuda-graphs",
                              "--seed",
                              "18446744073709551615",
                              "--save",
                              "x.safetensors",
                              "--json",
                              "--quiet",
                              "--fill-value",
                              "-2.5"});
  EXPECT_EQ(f.dataset, "citeseer");
  EXPECT_TRUE(f.dataset_given);
  GATConfig model;  // the flags' fields set, every other field at its default
  model.hidden = 4;
  model.heads = 2;
  model.output_heads = 3;
  model.dropout = 0.5;
  model.value_dropout = 0.0;
  model.fill_value = ops::SelfLoopFill::constant_value(-2.5);
  EXPECT_EQ(f.model, model);
  EXPECT_EQ(f.train.lr, 0.01);
  EXPECT_EQ(f.train.max_epochs, 7);
  EXPECT_EQ(f.train.patience, 9);
  EXPECT_FALSE(f.train.cuda_graphs);
  EXPECT_EQ(f.seed, 18446744073709551615ull);
  EXPECT_EQ(f.save, "x.safetensors");
  EXPECT_TRUE(f.json && f.quiet);
  EXPECT_TRUE(f.fill_value_given);
  EXPECT_FALSE(parse({}).fill_value_given);
  EXPECT_EQ(parse({}).model.fill_value, ops::SelfLoopFill{});  // the mean, PyG's default
  EXPECT_EQ(parse({"--fill-value", "sum"}).model.fill_value, ops::SelfLoopFill::parse("add"));
  EXPECT_TRUE(parse({"--help"}).help);
}

TEST(Cli, PrecisionIsF32OrBf16) {
  EXPECT_EQ(parse({}).model.precision, DType::f32);
  EXPECT_EQ(parse({"--precision", "bf16"}).model.precision, DType::bf16);
  EXPECT_EQ(parse({"--precision", "f32"}).model.precision, DType::f32);
  EXPECT_NE(usage_error({"--precision", "f16"}).find("--precision"), std::string::npos);
}

TEST(Cli, ModelChoosesTheLayerAndGATv2HasNoValueDropout) {
  EXPECT_EQ(parse({}).model.layer, AttentionLayer::gat);
  EXPECT_EQ(parse({"--model", "gat"}).model.value_dropout, 0.6);
  const cli::Flags v2 = parse({"--model", "gatv2"});
  EXPECT_EQ(v2.model.layer, AttentionLayer::gatv2);
  EXPECT_EQ(v2.model.value_dropout, 0.0);  // the recipe's 0.6 is GATConv's
  EXPECT_EQ(v2.model.dropout, 0.6);
  EXPECT_EQ(parse({"--model", "gatv2", "--value-dropout", "0"}).model.layer, AttentionLayer::gatv2);
}

TEST(Cli, TheEnvironmentComesInThroughTheProgram) {
  EXPECT_TRUE(cli::cuda_graphs_enabled(nullptr));
  for (const char* on : {"1", "on", "true", ""}) EXPECT_TRUE(cli::cuda_graphs_enabled(on)) << on;
  for (const char* on : {"ON", "Yes"}) EXPECT_TRUE(cli::cuda_graphs_enabled(on)) << on;
  for (const char* off : {"0", "off", "false", "OFF", "no"})
    EXPECT_FALSE(cli::cuda_graphs_enabled(off)) << off;
  for (const char* bad : {"maybe", "2", " 0"})  // OFF and no left the graphs on, silently
    EXPECT_THROW(cli::cuda_graphs_enabled(bad), cli::UsageError) << bad;
  cli::Environment env;
  env.cuda_graphs = false;
  EXPECT_FALSE(parse({}, env).train.cuda_graphs);
  EXPECT_TRUE(parse({"--cuda-graphs"}, env).train.cuda_graphs);
  // The structs read no environment.
  ::setenv("GAT_CUDA_GRAPHS", "0", 1);
  EXPECT_TRUE(TrainOptions{}.cuda_graphs);
  EXPECT_TRUE(parse({}).train.cuda_graphs);
  ::unsetenv("GAT_CUDA_GRAPHS");
}

TEST(Cli, NumbersAreParsedWholeAndWithinReadableRanges) {
  struct Case {
    std::vector<std::string> args;
    const char* expected;  // a part of the message
  };
  const Case cases[] = {
      {{"--value-dropout", "nan"}, "--value-dropout: 'nan' is not a number in [0, 0.999]"},
      {{"--dropout", "1"}, "--dropout: '1' is not a number in [0, 0.999]"},
      {{"--dropout", "-0.1"}, "is not a number in [0, 0.999]"},
      {{"--lr", "inf"}, "--lr: 'inf' is not a number in (0, 1000]"},
      {{"--lr", "0"}, "(0, 1000]"},
      {{"--lr", "1e309"}, "--lr: '1e309' is not a number"},
      {{"--weight-decay", "-1"}, "--weight-decay: '-1' is not a number in [0, 1000]"},
      {{"--sparse-below", "NaN"}, "--sparse-below: 'NaN' is not a number in [0, 1]"},
      {{"--epochs", "1e23"}, "--epochs: '1e23' is not an integer in [1, 2147483647]"},
      {{"--epochs", "0"}, "[1, 2147483647]"},
      {{"--epochs", "2.5"}, "'2.5' is not an integer"},
      {{"--patience", "99999999999999999999"}, "--patience: '99999999999999999999' is not an integer"},
      {{"--seed", "-1"}, "--seed: '-1' is not an integer in [0, 18446744073709551615]"},
      {{"--seed", "0x10"}, "--seed: '0x10' is not an integer"},
      {{"--hidden", "2305843009213693953"},
       "--hidden: '2305843009213693953' is not an integer in [1, 65536]"},
      {{"--heads", "1e9"}, "--heads: '1e9' is not an integer in [1, 1024]"},
      {{"--output-heads", "0"}, "--output-heads: '0' is not an integer in [1, 1024]"},
      {{"--runs", "10001"}, "--runs: '10001' is not an integer in [1, 10000]"},
      {{"--seed", "18446744073709551615", "--runs", "2"}, "the last run's seed would pass 2^64 - 1"},
      {{"--load", ""}, "--load: the value is empty"},
      {{"--save", ""}, "--save: the value is empty"},
      {{"--log", ""}, "--log: the value is empty"},
      {{"--dataset", ""}, "--dataset: the value is empty"},
      {{"--data-dir", ""}, "--data-dir: the value is empty"},
      {{"--device", "tpu"}, "--device"},
      {{"--model", "gat3"}, "--model: gat3 not in {gat,gatv2}"},
      {{"--model", "gatv2", "--value-dropout", "0.5"},
       "--value-dropout 0.5 with --model gatv2: GATv2Conv has no value dropout"},
      {{"--load", "a", "--save", "b"}, "--save excludes --load"},
      {{"--no-such-flag"}, "--no-such-flag"},
      {{"--fill-value", "median"},
       "--fill-value: 'median' is not mean, add, sum, min, max, mul or a finite number"},
      {{"--fill-value", "inf"}, "--fill-value: 'inf' is not mean"},
      {{"--fill-value", "1e999"}, "--fill-value: '1e999' is not mean"},
      {{"--fill-value", ""}, "--fill-value: '' is not mean"},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    const std::string message = usage_error(c.args);
    EXPECT_NE(message.find(c.expected), std::string::npos) << joined << "-> '" << message << "'";
    EXPECT_LT(message.size(), 200u) << joined << "-> '" << message << "'";  // no 309-digit ranges
  }
}

TEST(Cli, UsageShowsTheDefaultsAndRanges) {
  const std::string text = cli::usage();
  for (const char* part :
       {"--hidden", "[1, 65536]", "--dropout", "[0, 0.999]", "--lr", "0.005", "symbolic link"})
    EXPECT_NE(text.find(part), std::string::npos) << part;
}

TEST(CheckpointMetadata, EveryFieldRoundTrips) {
  const CheckpointInfo info = sample_info();
  const io::Metadata m = info.to_metadata();
  EXPECT_EQ(m.at("format"), "gat_train");
  EXPECT_EQ(m.at("layer"), "gatv2");
  const CheckpointInfo back = CheckpointInfo::from_metadata(m, "ckpt");
  EXPECT_EQ(back, info);
  EXPECT_EQ(back.model.layer, AttentionLayer::gatv2);
  EXPECT_EQ(back.model.dtype, DType::f64);
  // Each field on its own: a change to any one is seen by the round trip.
  CheckpointInfo other = info;
  other.model.layer = AttentionLayer::gat;
  other.model.value_dropout = 0.1;  // not exactly representable: the text must round-trip
  EXPECT_EQ(other.to_metadata().at("value_dropout"), "0.1");
  EXPECT_EQ(CheckpointInfo::from_metadata(other.to_metadata(), "ckpt").model.value_dropout, 0.1);
  EXPECT_EQ(CheckpointInfo::from_metadata(other.to_metadata(), "ckpt").model.layer, AttentionLayer::gat);
  EXPECT_FALSE(CheckpointInfo::from_metadata(other.to_metadata(), "ckpt") == info);
  other.model.value_dropout = 0.2;
  EXPECT_EQ(CheckpointInfo::from_metadata(other.to_metadata(), "ckpt").model.value_dropout, 0.2);
  EXPECT_FALSE(CheckpointInfo::from_metadata(other.to_metadata(), "ckpt") == info);
  other.model.dtype = DType::f32;  // bf16 keeps f32 master weights
  other.model.precision = DType::bf16;
  EXPECT_EQ(other.to_metadata().at("precision"), "bf16");
  EXPECT_EQ(CheckpointInfo::from_metadata(other.to_metadata(), "ckpt").model.precision, DType::bf16);
  EXPECT_FALSE(CheckpointInfo::from_metadata(other.to_metadata(), "ckpt") == info);
  // Older checkpoints have no precision: f32.
  io::Metadata no_precision = m;
  no_precision.erase("precision");
  EXPECT_EQ(CheckpointInfo::from_metadata(no_precision, "ckpt").model.precision, DType::f32);
  // Older checkpoints have no dtype: f32.
  io::Metadata old = m;
  old.erase("dtype");
  EXPECT_EQ(CheckpointInfo::from_metadata(old, "ckpt").model.dtype, DType::f32);
  // Older checkpoints have no layer: GATConv's.
  io::Metadata gat_only = other.to_metadata();
  gat_only.erase("layer");
  EXPECT_EQ(CheckpointInfo::from_metadata(gat_only, "ckpt").model.layer, AttentionLayer::gat);
}

TEST(CheckpointMetadata, ReadingValidatesEveryValue) {
  const io::Metadata m = sample_info().to_metadata();
  struct Case {
    const char* key;
    const char* value;
    const char* expected;
  };
  const Case cases[] = {
      {"negative_slope", "1e308", "ckpt: metadata: negative_slope 1e+308 is outside [0, 1]"},
      {"negative_slope", "nan", "metadata 'negative_slope' = 'nan' is not a number"},
      {"negative_slope", "1e999", "is not a number"},
      {"dropout", "1", "dropout 1 is outside [0, 0.999]"},
      {"value_dropout", "-0.5", "value_dropout -0.5 is outside [0, 0.999]"},
      {"hidden", "0", "hidden 0 is outside [1, 65536]"},
      {"hidden", "2305843009213693953", "hidden 2305843009213693953 is outside [1, 65536]"},
      {"heads", "8.5", "'heads' = 8.5 is not a 64-bit integer"},
      {"heads", "\"8\"", "'heads' = '\"8\"' is not a number"},
      {"heads", " 8", "'heads' = ' 8' is not a number"},
      {"heads", "8\n", "'heads' = '8\n' is not a number"},
      {"heads", "+8", "'heads' = '+8' is not a number"},
      {"negative_slope", "0.2 ", "'negative_slope' = '0.2 ' is not a number"},
      {"seed", "\t1", "'seed' = '\t1' is not a number"},
      {"output_heads", "99999999999999999999", "output_heads"},
      {"in_features", "-3", "in_features -3 is outside [1, 2147483647]"},
      {"num_classes", "4294967296", "num_classes 4294967296 is outside [1, 2147483647]"},
      {"dtype", "i32", "'dtype' = 'i32' is not f32 or f64"},
      {"precision", "f64", "ckpt: metadata 'precision' = 'f64' is not f32 or bf16"},
      {"precision", "bf16",
       "precision bf16 with dtype f64: the precision is f32, or bf16 with f32 parameters"},
      {"layer", "gatv3", "ckpt: metadata 'layer' = 'gatv3' is not gat or gatv2"},
      {"value_dropout", "0.5", "value_dropout 0.5 with layer gatv2: GATv2Conv has no value dropout"},
      {"seed", "-1", "'seed' = -1 is not an integer in [0, 2^64)"},
      {"best_epoch", "0", "best_epoch 0 is outside [1, 2147483647]"},
      {"test_acc", "1.5", "test_acc 1.5 is outside [0, 1]"},
      {"format", "other", "not a gat_train checkpoint"},
  };
  for (const Case& c : cases) {
    const std::string message =
        error_of([&] { CheckpointInfo::from_metadata(with(m, c.key, c.value), "ckpt"); });
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.key << "=" << c.value << " -> '" << message << "'";
  }
  for (const char* key : {"in_features", "num_classes", "hidden", "heads", "output_heads", "dropout",
                          "value_dropout", "negative_slope", "seed", "best_epoch", "test_acc"}) {
    io::Metadata missing = m;
    missing.erase(key);
    const std::string message = error_of([&] { CheckpointInfo::from_metadata(missing, "ckpt"); });
    EXPECT_NE(message.find(std::string("ckpt: metadata has no '") + key + "'"), std::string::npos) << message;
  }
}

TEST(GATConfigLimits, SizesAreCheckedBeforeAnyAllocation) {
  GATConfig c;
  c.in_features = 10;
  c.num_classes = 3;
  c.hidden = int64_t{1} << 61;
  Generator init(0);
  EXPECT_NE(error_of([&] { GAT model(c, init); }).find("GAT: hidden 2305843009213693952 is outside"),
            std::string::npos);
  // Below the model, the layers check their own products.
  GATConvOptions o;
  o.in_channels = 4;
  o.out_channels = int64_t{1} << 62;
  o.heads = 8;
  EXPECT_NE(error_of([&] {
              GATConv conv(o, init);
            }).find("GATConv: heads x out_channels: 8 x 4611686018427387904 overflows"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Tensor::empty({int64_t{1} << 62, 8});
            }).find("more than 2^63 elements"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Tensor::empty({int64_t{1} << 62}, DType::f64); }).find("more than 2^63 bytes"),
            std::string::npos);
}

TEST(ErrorMessages, ControlBytesAreEscapedNotCut) {
  const std::string message = error_of([] { GAT_FAIL("field '", std::string("a\0b\x1b", 4), "' tail"); });
  EXPECT_NE(message.find("field 'a\\x00b\\x1b' tail"), std::string::npos) << message;
}
