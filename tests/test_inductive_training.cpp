// The inductive model and its training loop (models/inductive_gat.h, train/inductive_training.h):
// the paper's PPI network's layers, a batch of graphs scored as its graphs one by one, and the
// model learning the generated multi-graph dataset well above what the trivial predictors score,
// and gat_train's multi-graph runs (their defaults, the flags they refuse).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "cli_testing.h"
#include "gat/datasets/multigraph.h"
#include "gat/framework/autograd.h"
#include "gat/framework/ops/micro_f1.h"
#include "gat/train/inductive_training.h"
#include "gat_testing.h"
#include "gat_train_testing.h"

using namespace gat;
using gat::testing::expect_close;
using gat::testing::expect_error;
using gat::testing::TempDir;

namespace {

MultiGraphOptions small_dataset() {
  MultiGraphOptions o;
  o.graphs = 12;
  o.nodes = 40;
  o.num_features = 16;
  o.num_labels = 10;
  o.seed = 3;
  o.label_density = 0.2;
  o.signal = 0.5;
  return o;
}

// The model for `data` with `hidden` features per head (the paper's heads), parameters of `dtype`.
InductiveGATConfig config_for(const MultiGraphDataset& data, int64_t hidden, DType dtype = DType::f32) {
  InductiveGATConfig config;
  config.in_features = data.num_features;
  config.num_labels = data.num_labels;
  config.hidden = hidden;
  config.dtype = dtype;
  return config;
}

// The micro-F1 of predicting every label `value` (0: all zeros, 1: all ones) on the graphs.
double constant_f1(const std::vector<GraphData>& graphs, double logit) {
  std::vector<double> counts(4, 0.0);
  for (const GraphData& g : graphs) {
    const std::vector<double> c =
        ops::micro_f1_counts(Tensor::full(g.y.shape(), logit), g.y).to_vector<double>();
    for (size_t k = 0; k < 4; ++k) counts[k] += c[k];
  }
  return ops::micro_f1_from_counts(counts);
}

}  // namespace

TEST(InductiveGAT, HasThePapersLayers) {
  InductiveGATConfig config;
  config.in_features = 50;
  config.num_labels = 121;
  Generator init(0);
  InductiveGAT model(config, init);
  const GATConvOptions &o1 = model.conv1->options(), &o2 = model.conv2->options(),
                       &o3 = model.conv3->options();
  EXPECT_EQ(std::vector<int64_t>({o1.heads, o2.heads, o3.heads}), (std::vector<int64_t>{4, 4, 6}));
  EXPECT_EQ(std::vector<int64_t>({o1.in_channels, o2.in_channels, o3.in_channels}),
            (std::vector<int64_t>{50, 1024, 1024}));
  EXPECT_EQ(std::vector<int64_t>({o1.out_channels, o2.out_channels, o3.out_channels}),
            (std::vector<int64_t>{256, 256, 121}));
  EXPECT_TRUE(o1.concat && o2.concat && !o3.concat);
  EXPECT_TRUE(o1.elu && o2.elu && !o3.elu);
  EXPECT_TRUE(o1.residual && o2.residual && o3.residual);
  EXPECT_EQ(o1.dropout + o2.dropout + o3.dropout + o1.output_dropout + o2.output_dropout, 0.0);
  ASSERT_NE(model.conv3->res, nullptr);
  EXPECT_EQ(model.conv3->res->weight.shape(), (Shape{1024, 121}));
}

TEST(InductiveGAT, ABatchScoresAsItsGraphsOneByOne) {
  const MultiGraphDataset data = generate_multigraph(small_dataset());
  Generator init(1);
  InductiveGAT model(config_for(data, 4, DType::f64), init);
  autograd::NoGradGuard no_grad;
  std::vector<GraphData> graphs;
  for (const GraphData& g : data.train) {
    graphs.push_back(g);
    graphs.back().x = g.x.to(DType::f64);
  }
  graphs.resize(3);
  const GraphBatch batch = batch_graphs(graphs);
  const Tensor together = model.forward(batch.data.x, batch.data.graph);
  for (size_t k = 0; k < graphs.size(); ++k)
    expect_close(together.rows(batch.node_ptr[k], batch.node_ptr[k + 1]),
                 model.forward(graphs[k].x, graphs[k].graph), "graph " + std::to_string(k), 1e-12);
}

TEST(InductiveTraining, LearnsTheGeneratedGraphsWellAboveChance) {
  const MultiGraphDataset data = generate_multigraph(small_dataset());
  Generator init(2);
  InductiveGAT model(config_for(data, 8), init);
  TrainOptions options;
  options.weight_decay = 0;
  options.max_epochs = 15;
  options.patience = 15;
  std::vector<EpochStats> epochs;
  const TrainResult r = train_inductive(model, data, options, {2, 7}, Device::cpu,
                                        [&](const EpochStats& s) { epochs.push_back(s); });
  // The trivial predictors: all zeros scores 0, all ones 2p / (1 + p) for the share p of positive
  // labels, and guessing each label with probability 1/2 about 2p / (1 + 2p), less than all ones.
  const double all_ones = constant_f1(data.test, 1.0);
  EXPECT_EQ(constant_f1(data.test, -1.0), 0.0);
  EXPECT_LT(all_ones, 0.6);
  EXPECT_GT(r.test_acc, all_ones + 0.3) << "all ones scores " << all_ones;
  EXPECT_GT(r.val_acc, 0.85);
  // The remembered epoch's numbers are what the restored model scores.
  const SplitMetrics test = evaluate_graphs(model, data.test, 2, Device::cpu);
  EXPECT_DOUBLE_EQ(test.acc, r.test_acc);
  EXPECT_EQ(r.epochs, static_cast<int64_t>(epochs.size()));
  EXPECT_LT(epochs.back().loss, epochs.front().loss);
}

TEST(InductiveTraining, RefusesWhatDoesNotFit) {
  MultiGraphDataset data = generate_multigraph(small_dataset());
  InductiveGATConfig config = config_for(data, 2);
  config.in_features = data.num_features + 1;
  Generator init(0);
  InductiveGAT model(config, init);
  TrainOptions options;
  expect_error([&] { train_inductive(model, data, options, {}, Device::cpu); },
               {"train_inductive", "training graph 0", "17 features"});
  InductiveGAT right(config_for(data, 2), init);
  expect_error([&] { train_inductive(right, data, options, {0, 0}, Device::cpu); }, {"batch_size", "0"});
  options.checkpoints.path = "x";
  expect_error([&] { train_inductive(right, data, options, {}, Device::cpu); }, {"no run checkpoints"});
  options.checkpoints.path.clear();
  data.val.clear();
  expect_error([&] { train_inductive(right, data, options, {}, Device::cpu); },
               {"validation split has no graphs"});
}

TEST(GatTrainInductive, AMultiGraphDatasetGetsThePapersRecipe) {
  using gat::testing::parse;
  using gat::testing::usage_error;
  const cli::Flags f = parse({"--dataset", "synthetic-ppi:12:40:3"});
  EXPECT_TRUE(f.inductive);
  EXPECT_EQ(f.model.hidden, 256);
  EXPECT_EQ(f.model.heads, 4);
  EXPECT_EQ(f.model.output_heads, 6);
  EXPECT_EQ(f.train.lr, 0.005);
  EXPECT_EQ(f.train.weight_decay, 0.0);
  EXPECT_EQ(f.inductive_training.batch_size, 2);
  const cli::Flags given = parse({"--dataset", "PPI", "--hidden", "16", "--batch-size", "1", "--lr", "0.01"});
  EXPECT_TRUE(given.inductive);
  EXPECT_EQ(given.model.hidden, 16);
  EXPECT_EQ(given.inductive_training.batch_size, 1);
  EXPECT_EQ(given.train.lr, 0.01);
  EXPECT_FALSE(parse({"--dataset", "cora"}).inductive);
  for (const char* flag :
       {"--dropout", "--model", "--fanouts", "--save", "--load", "--checkpoint", "--log", "--sparse-below"}) {
    const std::string value = std::string(flag) == "--model"     ? "gat"
                              : std::string(flag) == "--fanouts" ? "5,5"
                              : std::string(flag) == "--dropout" || std::string(flag) == "--sparse-below"
                                  ? "0.1"
                                  : "x";
    const std::string why = usage_error({"--dataset", "ppi", flag, value});
    EXPECT_NE(why.find(std::string(flag) + " with --dataset ppi"), std::string::npos) << flag << ": " << why;
  }
  EXPECT_NE(usage_error({"--dataset", "ppi", "--no-cuda-graphs"}).find("--cuda-graphs"), std::string::npos);
  // The inductive model has no bf16 path: the flag was read and silently ignored.
  EXPECT_NE(
      usage_error({"--dataset", "synthetic-ppi:4:50:0", "--precision", "bf16"}).find("--precision with"),
      std::string::npos);
}

TEST(GatTrainInductive, TrainsAndReportsMicroF1) {
  TempDir dir("gat_inductive");
  const gat::testing::Outcome o = gat::testing::run_gat_train(
      "--dataset synthetic-ppi:6:20:1:8:5 --hidden 4 --heads 2 --output-heads 2 --epochs 3 --quiet --json",
      dir.path());
  ASSERT_EQ(o.status, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["config"]["model"], "inductive_gat");
  EXPECT_EQ(j["config"]["batch_size"], 2);
  EXPECT_EQ(j["graphs"], nlohmann::json::array({4, 1, 1}));
  EXPECT_EQ(j["epochs"], nlohmann::json::array({3.0}));
  EXPECT_GE(j["test_micro_f1_mean"].get<double>(), 0.0);
  const gat::testing::Outcome info =
      gat::testing::run_gat_train("--dataset synthetic-ppi:6:20:1:8:5 --info", dir.path());
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["labels"], 5);
  // Without PPI's files and offline: the folder (--data-dir, else the per-user cache), what is
  // missing there and how to get it (the download itself: test_ppi).
  const std::string offline =
      "env -u GAT_DATA_DIR XDG_CACHE_HOME=" + dir.file("cache") + " GAT_PPI_URL=http://127.0.0.1:1/ppi.zip";
  const gat::testing::Outcome missing =
      gat::testing::run_gat_train("--dataset ppi --quiet", dir.path(), offline);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("train_graph.json and 11 more of PPI's files are missing from " +
                             dir.file("cache/gat/ppi")),
            std::string::npos)
      << missing.err;
  const gat::testing::Outcome bad = gat::testing::run_gat_train(
      "--dataset ppi --data-dir " + dir.file("empty") + " --quiet", dir.path(), offline);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("missing from " + dir.file("empty")), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("--data-dir"), std::string::npos) << bad.err;
}
