// End to end on Cora (CPU): the paper's recipe reaches >= 80% test accuracy (GAT, and GATv2 in 100
// epochs; GAT in bf16 within a point of f32 in 200 epochs), a checkpoint reloads to the same accuracy
// (library and gat_train; a GATv2 one keeps its layer kind), a resumed run is the uninterrupted one (GAT and
// GATv2), and gat_train's exit codes for bad flags and broken data files. Skips when the Planetoid files are
// absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gat/datasets/registry.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/io.h"
#include "gat/models/gat.h"
#include "gat/train/trainer.h"
#include "gat_testing.h"
#include "gat_train_testing.h"

using namespace gat;
using gat::testing::Outcome;
using gat::testing::read_text;
using gat::testing::run_gat_train;
using gat::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const char* const kParts[] = {"x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"};

bool cora_present() {
  for (const char* part : kParts)
    if (!fs::exists(fs::path(default_data_dir()) / (std::string("ind.cora.") + part))) return false;
  return true;
}

#define SKIP_WITHOUT_CORA() \
  if (!cora_present()) GTEST_SKIP() << "Cora raw files not found in " << default_data_dir()

nlohmann::json last_json_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return nlohmann::json::parse(last);
}

GATConfig paper_config(const Dataset& data) {
  GATConfig config;  // hidden 8, heads 8, output_heads 1, dropout 0.6
  config.in_features = data.num_features();
  config.num_classes = data.num_classes;
  return config;
}

}  // namespace

TEST(TrainCora, PaperRecipeReaches80PercentAndTheCheckpointReloads) {
  SKIP_WITHOUT_CORA();
  const Dataset data = load_training_dataset("cora");
  Generator gen(0);
  GAT model(paper_config(data), gen);
  auto forward = [&](const Features& x, const Graph& g, Generator& gn) { return model.forward(x, g, gn); };
  const TrainResult result = train_node_classifier(model, forward, data, TrainOptions{}, gen);
  EXPECT_GE(result.test_acc, 0.80) << "stopped after " << result.epochs << " epochs (best "
                                   << result.best_epoch << ")";
  EXPECT_GT(result.epochs, result.best_epoch);  // stopped by patience, not by max_epochs
  RecordProperty("test_acc", std::to_string(result.test_acc));
  RecordProperty("train_step_ms", std::to_string(result.train_step_ms));

  TempDir dir("gat_test_train");
  const std::string path = dir.file("cora.safetensors");
  io::save(model, path, {{"dataset", "cora"}});
  Generator other(12345);  // different initial parameters, replaced by the checkpoint
  GAT reloaded(paper_config(data), other);
  auto forward2 = [&](const Features& x, const Graph& g, Generator& gn) {
    return reloaded.forward(x, g, gn);
  };
  EXPECT_NE(evaluate(reloaded, forward2, data).test.acc, result.test_acc);
  io::load_into(reloaded, path);
  const Evaluation e = evaluate(reloaded, forward2, data);
  EXPECT_EQ(e.test.acc, result.test_acc);
  EXPECT_EQ(e.val.acc, result.val_acc);
  EXPECT_EQ(e.val.loss, result.val_loss);
}

// GATv2Conv layers with the same recipe, 100 epochs (41 s to early stopping at 694 epochs on 2
// shared cores, 83.1% either way with seed 0).
// bf16 precision (docs/precision.md) on the CPU: the paper's recipe for 200 epochs, seed 0, beside
// the same run in f32 (measured at 02c038f: 82.5% both; 10 full runs: docs/precision.md). The
// logits are bf16, the parameters stay f32, and the run is not the f32 one (its validation loss
// differs).
TEST(TrainCora, Bf16TrainsWithinAPointOfF32) {
  SKIP_WITHOUT_CORA();
  const Dataset data = load_training_dataset("cora");
  TrainOptions options;
  options.max_epochs = 200;
  auto run = [&](DType precision) {
    GATConfig config = paper_config(data);
    config.precision = precision;
    Generator gen(0);
    GAT model(config, gen);
    auto forward = [&](const Features& x, const Graph& g, Generator& gn) {
      const Tensor logits = model.forward(x, g, gn);
      EXPECT_EQ(logits.dtype(), precision);
      return logits;
    };
    const TrainResult result = train_node_classifier(model, forward, data, options, gen);
    for (const Tensor& p : model.parameters()) EXPECT_EQ(p.dtype(), DType::f32);
    return result;
  };
  const TrainResult f32 = run(DType::f32), bf16 = run(DType::bf16);
  EXPECT_GE(bf16.test_acc, 0.80);
  EXPECT_NEAR(bf16.test_acc, f32.test_acc, 0.01);
  EXPECT_NE(bf16.val_loss, f32.val_loss);
  RecordProperty("bf16_test_acc", std::to_string(bf16.test_acc));
}

TEST(TrainCora, GATv2ReachesEightyPercentIn100Epochs) {
  SKIP_WITHOUT_CORA();
  const Dataset data = load_training_dataset("cora");
  GATConfig config = paper_config(data);
  config.layer = AttentionLayer::gatv2;
  config.value_dropout = 0.0;
  Generator gen(0);
  GAT model(config, gen);
  auto forward = [&](const Features& x, const Graph& g, Generator& gn) { return model.forward(x, g, gn); };
  TrainOptions options;
  options.max_epochs = 100;
  const TrainResult result = train_node_classifier(model, forward, data, options, gen);
  EXPECT_GE(result.test_acc, 0.80) << "best epoch " << result.best_epoch;
  RecordProperty("test_acc", std::to_string(result.test_acc));
}

// gat_train --model gatv2 records the layer in its checkpoint; --load rebuilds GATv2Conv layers
// from it (no --model needed) and gets the same accuracy.
TEST(TrainCora, GatTrainGATv2CheckpointKeepsTheLayerKind) {
  SKIP_WITHOUT_CORA();
  TempDir dir("gat_test_train");
  const std::string ckpt = dir.file("v2.safetensors");
  const Outcome trained = run_gat_train(
      "--dataset cora --device cpu --model gatv2 --epochs 6 --seed 3 --quiet --json --save '" + ckpt + "'",
      dir.path());
  ASSERT_EQ(trained.status, 0) << trained.err;
  const nlohmann::json summary = last_json_line(trained.out);
  EXPECT_EQ(summary["config"]["model"], "gatv2");
  EXPECT_EQ(summary["config"]["value_dropout"], 0.0);
  const io::Safetensors file = io::load_safetensors(ckpt);
  EXPECT_EQ(file.metadata.at("layer"), "gatv2");
  EXPECT_EQ(file.tensors.count("conv1.lin_r.weight"), 1u);
  const Outcome loaded = run_gat_train("--load '" + ckpt + "' --device cpu --quiet --json", dir.path());
  ASSERT_EQ(loaded.status, 0) << loaded.err;
  EXPECT_EQ(last_json_line(loaded.out)["test_acc"], summary["test_acc_mean"]);
}

TEST(TrainCora, GatTrainSavesACheckpointThatLoadsToTheSameAccuracy) {
  SKIP_WITHOUT_CORA();
  TempDir dir("gat_test_train");
  const std::string ckpt = dir.file("short.safetensors"), log = dir.file("log.jsonl");
  const Outcome trained =
      run_gat_train("--dataset cora --device cpu --epochs 6 --seed 3 --quiet --json --save '" + ckpt +
                        "' --log '" + log + "'",
                    dir.path());
  ASSERT_EQ(trained.status, 0) << trained.err;
  const nlohmann::json summary = last_json_line(trained.out);
  EXPECT_EQ(summary["dataset"], "cora");
  EXPECT_EQ(summary["device"], "cpu");
  EXPECT_EQ(summary["runs"], 1);
  ASSERT_EQ(summary["test_accs"].size(), 1u);
  for (const char* key : {"test_acc_mean", "test_acc_std", "epochs_mean", "train_step_ms"})
    EXPECT_TRUE(summary.contains(key)) << key;
  EXPECT_EQ(summary["epochs_mean"], 6.0);

  std::istringstream lines(read_text(log));
  std::string line;
  int epochs = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["epoch"], ++epochs);
    for (const char* key : {"run", "loss", "train_acc", "val_acc", "val_loss", "test_acc", "ms"})
      EXPECT_TRUE(j.contains(key)) << key << " in " << line;
  }
  EXPECT_EQ(epochs, 6);

  const Outcome loaded = run_gat_train("--load '" + ckpt + "' --device cpu --quiet --json", dir.path());
  ASSERT_EQ(loaded.status, 0) << loaded.err;
  EXPECT_EQ(last_json_line(loaded.out)["test_acc"], summary["test_acc_mean"]);
}

// Epoch progress lines ("[   0.42 s] run R/N epoch E  loss ...") in gat_train's output.
int progress_lines(const std::string& err) {
  std::istringstream in(err);
  std::string line;
  int count = 0;
  while (std::getline(in, line))
    count += line.rfind("[", 0) == 0 && line.find(" s] run ") != std::string::npos &&
             line.find("  loss ") != std::string::npos;
  return count;
}

TEST(TrainCora, APipedShortRunShowsEveryEpochOnStderr) {
  SKIP_WITHOUT_CORA();
  TempDir dir("gat_test_train");  // stdout and stderr go to files: no terminal
  const Outcome o = run_gat_train("--dataset cora --device cpu --epochs 20 --threads 1 --json", dir.path());
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(progress_lines(o.err), 20) << o.err;
  EXPECT_EQ(progress_lines(o.out), 0) << "progress belongs on stderr: " << o.out;
  EXPECT_EQ(last_json_line(o.out)["threads"], 1);
  const Outcome quiet =
      run_gat_train("--dataset cora --device cpu --epochs 20 --threads 2 --quiet --json", dir.path());
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(progress_lines(quiet.err), 0) << quiet.err;
  EXPECT_EQ(last_json_line(quiet.out)["threads"], 2);
  EXPECT_EQ(run_gat_train("--threads 0", dir.path()).status, 2);
}

TEST(TrainCora, ALongRunPrintsAtMostALineASecond) {
  TempDir dir("gat_test_train");
  // A 12-node ring in the custom layout: 300 epochs take well under a second each.
  const fs::path data = dir.file("ring");
  fs::create_directories(data / "split");
  std::string edges, features, labels;
  for (int i = 0; i < 12; ++i) {
    edges += std::to_string(i) + "," + std::to_string((i + 1) % 12) + "\n";
    features += std::to_string(i % 3) + "," + std::to_string(i % 2) + "\n";
    labels += std::to_string(i % 2) + "\n";
  }
  std::ofstream(data / "edge.csv") << edges;
  std::ofstream(data / "node-feat.csv") << features;
  std::ofstream(data / "node-label.csv") << labels;
  std::ofstream(data / "split" / "train.csv") << "0\n1\n2\n3\n";
  std::ofstream(data / "split" / "valid.csv") << "4\n5\n6\n7\n";
  std::ofstream(data / "split" / "test.csv") << "8\n9\n10\n11\n";
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = run_gat_train(
      "--dataset '" + data.string() + "' --device cpu --threads 1 --epochs 300 --patience 1000 --json",
      dir.path());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(last_json_line(o.out)["epochs_mean"], 300.0);
  EXPECT_GE(progress_lines(o.err), 1) << o.err;  // the first epoch at least
  EXPECT_LE(progress_lines(o.err), 1 + static_cast<int>(seconds)) << o.err;
}

TEST(TrainCora, GatTrainBadFlagsExit2WithUsage) {
  TempDir dir("gat_test_train");
  for (const char* args : {"--no-such-flag", "--epochs 0", "--device tpu", "--runs", "--dropout 1.5"}) {
    const Outcome o = run_gat_train(args, dir.path());
    EXPECT_EQ(o.status, 2) << args << ": " << o.err;
    EXPECT_NE(o.err.find("Usage:"), std::string::npos) << args << ": " << o.err;
  }
  EXPECT_EQ(run_gat_train("--help", dir.path()).status, 0);
}

TEST(TrainCora, GatTrainErrorsExit1) {
  TempDir dir("gat_test_train");
  Outcome o = run_gat_train("--dataset nonesuch --info", dir.path());
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("unknown dataset 'nonesuch'"), std::string::npos) << o.err;
  o = run_gat_train("--load '" + dir.file("absent.safetensors") + "'", dir.path());
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("absent.safetensors"), std::string::npos) << o.err;
}

TEST(TrainCora, InfoOnATruncatedDataFileNamesTheFile) {
  SKIP_WITHOUT_CORA();
  TempDir dir("gat_test_train");
  const Outcome good = run_gat_train("--dataset cora --info", dir.path());
  ASSERT_EQ(good.status, 0) << good.err;
  EXPECT_EQ(last_json_line(good.out)["nodes"], 2708);
  for (const char* part : {"x", "tx", "allx", "y", "ty", "ally", "graph"}) {
    TempDir copy;
    for (const char* p : kParts) {
      const std::string name = std::string("ind.cora.") + p;
      fs::copy_file(fs::path(default_data_dir()) / name, copy.file(name));
    }
    const std::string victim = copy.file(std::string("ind.cora.") + part);
    fs::resize_file(victim, fs::file_size(victim) / 2);
    const Outcome o = run_gat_train("--dataset cora --info --data-dir '" + copy.file("") + "'", dir.path());
    EXPECT_NE(o.status, 0) << part;
    EXPECT_NE(o.err.find(std::string("ind.cora.") + part), std::string::npos) << part << ": " << o.err;
  }
}

namespace {

// The per-epoch log without its timing fields, which are checked to be a step's time inside its
// epoch's (on CUDA the step is timed by events on the device, the epoch by the host's clock).
std::vector<nlohmann::json> log_without_times(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_GT(j.at("step_ms").get<double>(), 0.0) << line;
    EXPECT_LE(j.at("step_ms").get<double>(), j.at("ms").get<double>() + 0.01) << line;
    j.erase("ms");
    j.erase("step_ms");
    lines.push_back(j);
  }
  return lines;
}

// The names of the tensors whose bytes differ between two safetensors files (or that only one has).
std::vector<std::string> differing_tensors(const std::string& a, const std::string& b) {
  const io::TensorMap ta = io::load_safetensors(a).tensors, tb = io::load_safetensors(b).tensors;
  std::vector<std::string> names;
  for (const auto& [name, t] : ta) {
    auto it = tb.find(name);
    if (it == tb.end() || it->second.nbytes() != t.nbytes() ||
        std::memcmp(it->second.raw_data(), t.raw_data(), t.nbytes()) != 0)
      names.push_back(name);
  }
  for (const auto& [name, t] : tb)
    if (!ta.count(name)) names.push_back(name);
  return names;
}

// A run interrupted at a checkpoint and resumed gives the uninterrupted run's log and final
// parameters bit for bit; so does resuming with a log that went past the checkpoint (the extra
// lines are dropped, then rewritten). Early stopping (patience 5) ends the run after the
// interruption, so its state must travel too. At ten times the paper's learning rate it does so
// sooner (on the CPU after 30 epochs for GAT, 40 for GATv2; 165 and 115 at the paper's), so the
// four runs train 63 and 83 epochs, not 482 and 332. On the CPU the interruption (epoch 27 for
// GAT, 37 for GATv2) falls in the last patience window, 2 epochs after the best: a resumed run
// that forgot the epochs waited, the best loss or the best parameters would stop later or end
// with other parameters. A CUDA run's bits differ, so it is interrupted at epoch 13.
void expect_resume_is_bitwise(const std::string& device, const std::string& model = "gat") {
  const int interrupt = device != "cpu" ? 13 : model == "gat" ? 27 : 37;
  TempDir dir("gat_test_train");
  const std::string common =
      "--dataset cora --device " + device + " --model " + model + " --lr 0.05 --patience 5 --seed 3 --quiet ";
  ASSERT_EQ(run_gat_train(common + "--epochs 200 --log '" + dir.file("a.jsonl") + "' --save '" +
                              dir.file("a.safetensors") + "'",
                          dir.path())
                .status,
            0);
  const std::string checkpoint = dir.file("run.safetensors");
  Outcome first = run_gat_train(common + "--epochs " + std::to_string(interrupt) +
                                    " --checkpoint-every 5 --checkpoint '" + checkpoint + "' --log '" +
                                    dir.file("b.jsonl") + "'",
                                dir.path());
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(io::load_safetensors(checkpoint).metadata.at(kCheckpointEpochKey), std::to_string(interrupt));
  Outcome resumed = run_gat_train(common + "--epochs 200 --resume '" + checkpoint + "' --log '" +
                                      dir.file("b.jsonl") + "' --save '" + dir.file("b.safetensors") + "'",
                                  dir.path());
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const std::vector<nlohmann::json> straight = log_without_times(dir.file("a.jsonl"));
  ASSERT_GT(straight.size(), static_cast<size_t>(interrupt));
  EXPECT_LT(straight.size(), 200u) << "early stopping should end the run";
  EXPECT_EQ(log_without_times(dir.file("b.jsonl")), straight);
  EXPECT_EQ(differing_tensors(dir.file("b.safetensors"), dir.file("a.safetensors")),
            std::vector<std::string>{});

  fs::copy_file(dir.file("a.jsonl"), dir.file("c.jsonl"));  // a log past the checkpoint's epoch
  ASSERT_EQ(run_gat_train(common + "--epochs 200 --resume '" + checkpoint + "' --log '" +
                              dir.file("c.jsonl") + "' --save '" + dir.file("c.safetensors") + "'",
                          dir.path())
                .status,
            0);
  EXPECT_EQ(log_without_times(dir.file("c.jsonl")), straight);
  EXPECT_EQ(differing_tensors(dir.file("c.safetensors"), dir.file("a.safetensors")),
            std::vector<std::string>{});

  Outcome wrong_seed = run_gat_train("--dataset cora --device " + device + " --model " + model +
                                         " --lr 0.05 --seed 4 --resume '" + checkpoint + "'",
                                     dir.path());
  EXPECT_EQ(wrong_seed.status, 1);
  EXPECT_NE(wrong_seed.err.find("seed"), std::string::npos) << wrong_seed.err;
  const std::string other = model == "gat" ? "gatv2" : "gat";
  Outcome wrong_model = run_gat_train("--dataset cora --device " + device + " --model " + other +
                                          " --lr 0.05 --seed 3 --resume '" + checkpoint + "'",
                                      dir.path());
  EXPECT_EQ(wrong_model.status, 1);
  EXPECT_NE(wrong_model.err.find("--resume " + checkpoint + ": the run trained " + model +
                                 " layers, these flags ask for " + other + " (--model)"),
            std::string::npos)
      << wrong_model.err;
  Outcome wrong_dropout =
      run_gat_train(common + "--dropout 0.5 --hidden 4 --resume '" + checkpoint + "'", dir.path());
  EXPECT_EQ(wrong_dropout.status, 1);
  EXPECT_NE(
      wrong_dropout.err.find(
          "--resume " + checkpoint +
          ": these flags differ from the run's: "
          "--dropout 0.5 (the run's: 0.6), --hidden 4 (the run's: 8); give the interrupted run's flags"),
      std::string::npos)
      << wrong_dropout.err;
}

}  // namespace

TEST(TrainCora, ResumedRunIsBitwiseTheUninterruptedOne) {
  SKIP_WITHOUT_CORA();
  expect_resume_is_bitwise("cpu");
}

TEST(TrainCora, ResumedGATv2RunIsBitwiseTheUninterruptedOne) {
  SKIP_WITHOUT_CORA();
  expect_resume_is_bitwise("cpu", "gatv2");
}

TEST(TrainCora, ResumedRunIsBitwiseTheUninterruptedOneOnCuda) {
  SKIP_WITHOUT_CORA();
  GAT_SKIP_WITHOUT_CUDA();
  expect_resume_is_bitwise("cuda");
}
