// A standing campaign of hostile gat_train invocations: bad flags, output paths that must not be
// replaced, broken checkpoints, custom CSV folders and Planetoid files. Each case states the exit
// status (2: a bad flag, with the usage; 1: anything else) and a part of stderr that names the
// culprit (the flag, the file, the key); some also check that nothing was destroyed or left
// behind. Tiny fixtures in a temporary folder and 2 epochs keep the whole table to seconds; the
// Planetoid cases use the Cora files when they are present (--info: no training).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gat/datasets/registry.h"
#include "gat/framework/io.h"
#include "gat_train_testing.h"
#include "gzip_testing.h"

using namespace gat;
using namespace gat::testing;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// The files of a valid 12-node custom dataset: 3 features, 2 classes, a ring, 4/4/4 splits.
std::vector<std::pair<std::string, std::string>> custom_files() {
  std::string feat, label, edge;
  for (int i = 0; i < 12; ++i) {
    feat += std::to_string(i % 3) + ".5," + std::to_string(i % 2) + ",-1\n";
    label += std::to_string(i % 2) + "\n";
    edge += std::to_string(i) + "," + std::to_string((i + 1) % 12) + "\n";
  }
  return {{"node-feat.csv", feat},
          {"node-label.csv", label},
          {"edge.csv", edge},
          {"split/train.csv", "0\n1\n2\n3\n"},
          {"split/valid.csv", "4\n5\n6\n7\n"},
          {"split/test.csv", "8\n9\n10\n11\n"}};
}

const char* const kCoraParts[] = {"x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"};

bool cora_present() {
  for (const char* part : kCoraParts)
    if (!fs::exists(fs::path(default_data_dir()) / (std::string("ind.cora.") + part))) return false;
  return true;
}

// A defaultdict(list) pickle whose `keys` entries all refer to one memoised list of `items` ids:
// a few kilobytes that the old reader expanded into keys x items neighbours.
std::string memo_bomb_graph(int keys, int items) {
  std::string p =
      "\x80\x02"
      "ccollections\ndefaultdict\nc__builtin__\nlist\n\x85R";
  p += "(K";
  p += '\0';  // key 0
  p += "]q\x01(";
  for (int i = 0; i < items; ++i) p += std::string("K") + static_cast<char>(i % 250);
  p += "e";  // APPENDS: the list (memo 1) holds `items` ids, and its key 0 is on the stack
  for (int k = 1; k < keys; ++k) {
    p += "M";
    p += static_cast<char>(k & 0xff);
    p += static_cast<char>(k >> 8);
    p += "h\x01";
  }
  p += "u.";
  return std::string(p.data(), p.size());
}

// One scratch folder per case: the custom dataset in data/, a Cora whose files are links to the
// real ones in cora/ (a case replaces a link by a file of its own), a checkpoint in ckpt/.
struct Scratch {
  fs::path root, data, cora;

  explicit Scratch(const fs::path& dir) : root(dir), data(dir / "data"), cora(dir / "cora") {
    for (const auto& [name, text] : custom_files()) write_text(data / name, text);
    if (cora_present()) {
      fs::create_directories(cora);
      for (const char* part : kCoraParts) {
        const std::string name = std::string("ind.cora.") + part;
        fs::create_symlink(fs::absolute(fs::path(default_data_dir()) / name), cora / name);
      }
    }
  }
  void put(const std::string& name, const std::string& text) const {
    fs::remove(data / name);
    write_text(data / name, text);
  }
  void put_cora(const std::string& part, const std::string& text) const {
    const fs::path path = cora / ("ind.cora." + part);
    fs::remove(path);
    write_text(path, text);
  }
  void link(const fs::path& at, const fs::path& to) const {
    fs::remove_all(at);
    fs::create_directories(at.parent_path());
    fs::create_symlink(to, at);
  }
};

// The checkpoint every --load case starts from: gat_train --save on the custom dataset.
const io::Safetensors& base_checkpoint(const fs::path& scratch_dir) {
  static const io::Safetensors ckpt = [&] {
    const Scratch s(scratch_dir);
    const std::string path = (scratch_dir / "base.safetensors").string();
    const std::string command = std::string("'") + GAT_TRAIN_EXE + "' --dataset '" + s.data.string() +
                                "' --device cpu --epochs 2 --quiet --save '" + path + "' >/dev/null 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return io::load_safetensors(path);
  }();
  return ckpt;
}

// A checkpoint with one metadata value replaced (or removed, value "<none>").
std::function<void(const Scratch&)> checkpoint_with(const std::string& key, const std::string& value) {
  return [key, value](const Scratch& s) {
    io::Safetensors ckpt = base_checkpoint(s.root.parent_path() / "base");
    if (value == "<none>")
      ckpt.metadata.erase(key);
    else
      ckpt.metadata[key] = value;
    io::save_safetensors((s.root / "ckpt.safetensors").string(), ckpt.tensors, ckpt.metadata);
  };
}

struct Case {
  const char* name;
  // Arguments; {data}, {cora} and {dir} stand for the scratch folders.
  std::string args;
  int status;           // expected exit status
  std::string culprit;  // a part of stderr naming what is wrong ({dir} expanded)
  std::function<void(const Scratch&)> setup = nullptr;
  std::function<void(const Scratch&, const Outcome&)> after = nullptr;  // further checks
  bool needs_cora = false;
  std::string env = "";        // assignments (or a command and &&) before the command; {dir} expanded
  std::string stdout_to = "";  // where stdout goes (default: a file read back); {dir} expanded
};

std::string expand(std::string text, const Scratch& s) {
  const std::pair<const char*, std::string> keys[] = {
      {"{data}", s.data.string()}, {"{cora}", s.cora.string()}, {"{dir}", s.root.string()}};
  for (const auto& [key, value] : keys)
    for (size_t at; (at = text.find(key)) != std::string::npos;)
      text.replace(at, std::string(key).size(), value);
  return text;
}

void expect_unchanged_link(const Scratch& s, const Outcome&) {
  EXPECT_TRUE(fs::is_symlink(s.root / "link"));
  EXPECT_EQ(read_text(s.root / "victim"), "precious");
}

void expect_no_training(const Scratch&, const Outcome& o) {
  EXPECT_EQ(o.out.find("test acc"), std::string::npos) << "trained before refusing: " << o.out;
}

void expect_no_temporary_files(const Scratch& s, const Outcome&) {
  for (const auto& entry : fs::recursive_directory_iterator(s.root))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
}

// The run every --resume case continues: 2 epochs of the custom dataset with --checkpoint
// {dir}/run.safetensors and --log {dir}/run.jsonl.
void make_run(const Scratch& s) {
  const std::string command = std::string("'") + GAT_TRAIN_EXE + "' --dataset '" + s.data.string() +
                              "' --device cpu --epochs 2 --quiet --checkpoint '" +
                              (s.root / "run.safetensors").string() + "' --log '" +
                              (s.root / "run.jsonl").string() + "' >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// make_run, then its checkpoint changed by `edit`.
std::function<void(const Scratch&)> run_checkpoint_with(const std::function<void(io::Safetensors&)>& edit) {
  return [edit](const Scratch& s) {
    make_run(s);
    const std::string path = (s.root / "run.safetensors").string();
    io::Safetensors ckpt = io::load_safetensors(path);
    edit(ckpt);
    io::save_safetensors(path, ckpt.tensors, ckpt.metadata);
  };
}

std::function<void(io::Safetensors&)> metadata_set(const std::string& key, const std::string& value) {
  return [key, value](io::Safetensors& c) { c.metadata[key] = value; };
}

// The run's log is as make_run left it (a refused resume replaced nothing).
void expect_run_log_kept(const Scratch& s, const Outcome& o) {
  const std::string log = read_text(s.root / "run.jsonl");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;
  expect_no_training(s, o);
}

std::vector<Case> cases() {
  const std::string train = "--dataset {data} --device cpu --epochs 2 ";
  const std::string bad_flag = "--dataset {data} --device cpu --epochs 2 ";
  const std::string resume = "--dataset {data} --device cpu --resume {dir}/run.safetensors ";
  auto victim_link = [](const Scratch& s) {
    write_text(s.root / "victim", "precious");
    s.link(s.root / "link", s.root / "victim");
  };
  std::vector<Case> c = {
      // Data files, downloads and environment (reliability round 3)
      {"a 20 MB field is quoted in 60 bytes", train, 1, "node-feat.csv:1: field 2 '99999",
       [](const Scratch& s) { s.put("node-feat.csv", "1," + std::string(size_t{20} << 20, '9') + ",3\n"); },
       [](const Scratch&, const Outcome& o) { EXPECT_LT(o.err.size(), 300u) << o.err.substr(0, 400); }},
      {"a gzip bomb's one line is quoted in 60 bytes", train, 1, "...' (67108864 bytes) is not an integer",
       [](const Scratch& s) {
         fs::remove(s.data / "edge.csv");
         write_text(s.data / "edge.csv.gz", gzip(std::string(size_t{64} << 20, 'x')));
       },
       [](const Scratch&, const Outcome& o) { EXPECT_LT(o.err.size(), 300u) << o.err.substr(0, 400); }, false,
       "GAT_MAX_GZIP_RATIO=100000"},
      {"a byte order mark before the first line", train + "--quiet", 0, "",
       [](const Scratch& s) { s.put("node-feat.csv", "\xef\xbb\xbf" + read_text(s.data / "node-feat.csv")); }},
      {"numbers below the smallest float read as the nearest one", train + "--quiet", 0, "",
       [](const Scratch& s) {
         std::string feat;
         for (int i = 0; i < 12; ++i) feat += std::to_string(i % 3) + ",1e-40,-1e-50\n";
         s.put("node-feat.csv", feat);
       }},
      {"a number beyond the largest float", train, 1, "node-feat.csv:2: field 3 '1e39' is not a number (out of range)",
       [](const Scratch& s) { s.put("node-feat.csv", "1,2,3\n1,2,1e39\n"); }},
      {"a row of features whose magnitudes sum beyond the largest float", train, 1,
       "node-feat.csv:1: the absolute values of fields 1..2 sum to 6e+38, beyond the largest float",
       [](const Scratch& s) {
         std::string feat = "-3e38,3e38,0\n";
         for (int i = 1; i < 12; ++i) feat += "1,1,1\n";
         s.put("node-feat.csv", feat);
       },
       expect_no_training},
      {"a row of edge features whose magnitudes sum beyond the largest float", train, 1,
       "edge-feat.csv:2: the absolute values of fields 1..2 sum to 4e+38",
       [](const Scratch& s) {
         std::string feat;
         for (int i = 0; i < 12; ++i) feat += i == 1 ? "2e38,-2e38\n" : "0,0\n";
         s.put("edge-feat.csv", feat);
       },
       expect_no_training},
      {"features that overflow the model name the likely input", train, 1,
       "no epoch had a finite validation loss: the outputs overflowed or turned NaN. The likely inputs: "
       "features of huge magnitude (the largest in data.x is 1e+38)",
       [](const Scratch& s) {
         std::string feat = "1e38,1e38,1e38\n";
         for (int i = 1; i < 12; ++i) feat += "1,1,1\n";
         s.put("node-feat.csv", feat);
       }},
      {"a dangling edge-feat.csv", train, 1, "edge-feat.csv: cannot open: a symbolic link to {dir}/gone",
       [](const Scratch& s) { s.link(s.data / "edge-feat.csv", s.root / "gone"); }},
      {"both edge.csv and edge.csv.gz", train, 1,
       "load_custom: both {data}/edge.csv and edge.csv.gz are there: keep the one that holds the data",
       [](const Scratch& s) { write_text(s.data / "edge.csv.gz", gzip("0,5\n")); }, expect_no_training},
      {"both split/test.csv and split/test.csv.gz", train, 1, "both {data}/split/test.csv and test.csv.gz",
       [](const Scratch& s) { write_text(s.data / "split/test.csv.gz", gzip("9\n")); }, expect_no_training},
      {"an edge-feat.csv that is a directory", train, 1, "edge-feat.csv.gz is a directory",
       [](const Scratch& s) { fs::create_directories(s.data / "edge-feat.csv.gz"); }},
      {"summed edge features beyond the largest float", train, 1,
       "edge-feat.csv: the edge 1 -> 0 is listed more than once (or in both directions) and the sum of its lines' "
       "feature 1 is inf",
       [](const Scratch& s) {
         s.put("edge.csv", read_text(s.data / "edge.csv") + "1,0\n");
         std::string feat = "3e38\n";  // 0 -> 1, then the ring's other 11 edges, then 1 -> 0 again
         for (int i = 0; i < 11; ++i) feat += "0\n";
         s.put("edge-feat.csv", feat + "3e38\n");
       }},
      {"self loops' features beyond the largest float", train + "--fill-value add", 1,
       "data: the self loop of node 0 gets edge feature 1 = inf from its in-edges' features by the fill 'add'",
       [](const Scratch& s) {
         std::string feat;
         for (int i = 0; i < 12; ++i) feat += "2e38\n";
         s.put("edge-feat.csv", feat);
       },
       expect_no_training},
      {"--help without HOME", "--help", 0, "", nullptr,
       [](const Scratch&, const Outcome& o) { EXPECT_NE(o.out.find("--data-dir"), std::string::npos) << o.out; },
       false, "env -u HOME -u XDG_CACHE_HOME -u GAT_DATA_DIR"},
      {"a custom folder without HOME", train + "--quiet", 0, "", nullptr, nullptr, false,
       "env -u HOME -u XDG_CACHE_HOME -u GAT_DATA_DIR"},
      {"a built-in name that is also a folder here", "--dataset cora --info", 1,
       "'cora' names both a built-in dataset and the folder ./cora here: write ./cora for the folder, or give "
       "the built-in dataset's data folder (--data-dir or GAT_DATA_DIR)",
       [](const Scratch& s) { fs::create_directories(s.cora); }, nullptr, false, "cd {dir} && env -u GAT_DATA_DIR"},
      {"a built-in name with GAT_DATA_DIR is the built-in dataset, as with --data-dir", "--dataset cora --info", 0,
       "", nullptr, nullptr, true, "cd {dir} && GAT_DATA_DIR={cora}"},
      {"the output checks read a built-in name as the loader does, not as the folder ./cora",
       "--dataset cora --data-dir {cora} --epochs 1 --quiet --save {cora}/ind.cora.model", 1,
       "--save {cora}/ind.cora.model is a Planetoid file of the data folder {cora}, an input of this run", nullptr,
       expect_no_training, true, "cd {dir} &&"},
      {"./cora is the folder", "--dataset ./cora --info", 1, "./cora/node-feat.csv (or .gz) not found",
       [](const Scratch& s) { fs::create_directories(s.cora); }, nullptr, false, "cd {dir} &&"},
      {"a built-in name with --data-dir is the built-in dataset", "--dataset cora --data-dir {cora} --info", 0, "",
       nullptr, nullptr, true, "cd {dir} &&"},
      {"a dangling Planetoid file is an error, not a download", "--dataset cora --data-dir {cora} --info", 1,
       "ind.cora.x: cannot open: a symbolic link to {dir}/gone",
       [](const Scratch& s) { s.link(s.cora / "ind.cora.x", s.root / "gone"); }, nullptr, true},
      {"a folder whose name is not UTF-8", "--dataset {dir}/caf\xe9 --device cpu --epochs 2 --quiet --json --save "
       "{dir}/m.safetensors", 0, "",
       [](const Scratch& s) { fs::rename(s.data, s.root / "caf\xe9"); },
       [](const Scratch& s, const Outcome& o) {
         EXPECT_NE(o.out.find("caf\xef\xbf\xbd\""), std::string::npos) << o.out;  // U+FFFD in the JSON
         EXPECT_EQ(io::load_safetensors((s.root / "m.safetensors").string()).metadata.at("dataset"),
                   (s.root / "caf\xef\xbf\xbd").string());
       }},
      {"synthetic one node below the splits' minimum", "--dataset synthetic:660:4:0 --info", 1,
       "660 nodes are too few for the splits: at least 661 are needed (8 classes x 20 training nodes + 500"},
      {"a synthetic spec the generator refuses names the flag and the spec",
       "--dataset synthetic:661:4:0:-1 --epochs 1", 1,
       "--dataset 'synthetic:661:4:0:-1': load_dataset: 'synthetic:661:4:0:-1' "
       "(synthetic:<nodes>:<avg_degree>:<seed>[:<edge_dim>]): "
       "generate_sbm: num_edge_features -1 is outside [0, 4096]"},
      {"a 5 KB --data-dir is echoed in bounded space, its ends kept",
       "--dataset cora --info --data-dir {dir}/" + std::string(5000, 'a'), 1,
       " bytes)...aaaa", nullptr,
       [](const Scratch&, const Outcome& o) { EXPECT_LT(o.err.size(), 700u) << o.err.substr(0, 800); }},
      {"synthetic at the splits' minimum", "--dataset synthetic:661:4:0 --info", 0, ""},
      {"a bad download deadline", "--dataset cora --data-dir {dir}/empty --info", 1,
       "GAT_DOWNLOAD_DEADLINE='soon' is not a number of seconds in [1, 86400]", nullptr, nullptr, false,
       "GAT_DOWNLOAD_DEADLINE=soon"},
      {"a download says what it fetches", "--dataset cora --data-dir {dir}/empty --info", 1,
       "download: http://127.0.0.1:1/ind.cora.x into {dir}/empty", nullptr, nullptr, false,
       "GAT_DATASET_URL=http://127.0.0.1:1"},
      {"--quiet silences the download", "--dataset cora --data-dir {dir}/empty --info --quiet", 1,
       "ind.cora.x is missing from {dir}/empty", nullptr,
       [](const Scratch&, const Outcome& o) { EXPECT_EQ(o.err.find("download:"), std::string::npos) << o.err; }, false,
       "GAT_DATASET_URL=http://127.0.0.1:1"},

      // ---- a valid run: the fixture itself is good (exit 0) ----
      {"valid custom folder", train + "--quiet --save {dir}/ok.safetensors", 0, "", nullptr,
       [](const Scratch& s, const Outcome&) { EXPECT_TRUE(fs::is_regular_file(s.root / "ok.safetensors")); }},
      {"valid gzip folder", train + "--quiet", 0, "",
       [](const Scratch& s) {
         const std::string text = read_text(s.data / "edge.csv");
         fs::remove(s.data / "edge.csv");
         write_text(s.data / "edge.csv.gz", gzip(text));
       }},

      // ---- flags: exit 2 with the usage, the flag and a readable range ----
      {"nan value dropout", bad_flag + "--value-dropout nan", 2, "--value-dropout: 'nan' is not a number in [0, 0.999]"},
      {"nan dropout", bad_flag + "--dropout nan", 2, "--dropout: 'nan'"},
      {"dropout 1", bad_flag + "--dropout 1", 2, "--dropout: '1' is not a number in [0, 0.999]"},
      {"infinite lr", bad_flag + "--lr inf", 2, "--lr: 'inf' is not a number in (0, 1000]"},
      {"nan lr", bad_flag + "--lr nan", 2, "--lr: 'nan'"},
      {"zero lr", bad_flag + "--lr 0", 2, "--lr: '0'"},
      {"negative weight decay", bad_flag + "--weight-decay -1", 2, "--weight-decay: '-1' is not a number in [0, 1000]"},
      {"nan weight decay", bad_flag + "--weight-decay nan", 2, "--weight-decay: 'nan'"},
      {"sparse-below 2", bad_flag + "--sparse-below 2", 2, "--sparse-below: '2' is not a number in [0, 1]"},
      {"epochs 1e23", bad_flag + "--epochs 1e23", 2, "--epochs: '1e23' is not an integer in [1, 2147483647]"},
      {"epochs 0", bad_flag + "--epochs 0", 2, "--epochs: '0'"},
      {"epochs -5", bad_flag + "--epochs -5", 2, "--epochs: '-5'"},
      {"epochs with a tail", bad_flag + "--epochs 12abc", 2, "--epochs: '12abc'"},
      {"patience 2.5", bad_flag + "--patience 2.5", 2, "--patience: '2.5' is not an integer"},
      {"seed -1", bad_flag + "--seed -1", 2, "--seed: '-1' is not an integer in [0, 18446744073709551615]"},
      {"seed 1e3", bad_flag + "--seed 1e3", 2, "--seed: '1e3'"},
      {"seed past 2^64 with runs", bad_flag + "--seed 18446744073709551615 --runs 2", 2, "the last run's seed"},
      {"hidden x heads overflow", bad_flag + "--hidden 2305843009213693953 --heads 8", 2,
       "--hidden: '2305843009213693953' is not an integer in [1, 65536]"},
      {"hidden 2^63-1", bad_flag + "--hidden 9223372036854775807", 2, "--hidden: '9223372036854775807'"},
      {"heads 1e9", bad_flag + "--heads 1e9", 2, "--heads: '1e9' is not an integer in [1, 1024]"},
      {"heads 1000000000", bad_flag + "--heads 1000000000", 2, "--heads: '1000000000'"},
      {"output heads 0", bad_flag + "--output-heads 0", 2, "--output-heads: '0'"},
      {"runs 0", bad_flag + "--runs 0", 2, "--runs: '0' is not an integer in [1, 10000]"},
      {"empty load", bad_flag + "--load ''", 2, "--load: the value is empty"},
      {"empty save", bad_flag + "--save ''", 2, "--save: the value is empty"},
      {"empty log", bad_flag + "--log ''", 2, "--log: the value is empty"},
      {"empty dataset", "--dataset '' --device cpu", 2, "--dataset: the value is empty"},
      {"empty data dir", bad_flag + "--data-dir ''", 2, "--data-dir: the value is empty"},
      {"unknown device", bad_flag + "--device tpu", 2, "--device"},
      {"unknown model", bad_flag + "--model gat3", 2, "--model: gat3 not in {gat,gatv2}"},
      {"gatv2 with value dropout", bad_flag + "--model gatv2 --value-dropout 0.6", 2, "GATv2Conv has no value dropout"},
      {"unknown flag", bad_flag + "--no-such-flag", 2, "--no-such-flag"},
      {"missing value", bad_flag + "--epochs", 2, "--epochs"},
      {"load and save", "--dataset {data} --device cpu --load a --save b", 2, "--save excludes --load"},

      // ---- output paths: refused before training, nothing replaced, nothing left behind ----
      {"save over a symlink", train + "--save {dir}/link", 1, "{dir}/link is a symbolic link", victim_link,
       [](const Scratch& s, const Outcome& o) {
         expect_unchanged_link(s, o);
         expect_no_training(s, o);
       }},
      {"save over a FIFO", train + "--save {dir}/fifo", 1, "{dir}/fifo is a FIFO",
       [](const Scratch& s) { ASSERT_EQ(::mkfifo((s.root / "fifo").c_str(), 0644), 0); },
       [](const Scratch& s, const Outcome& o) {
         EXPECT_TRUE(fs::is_fifo(s.root / "fifo"));
         expect_no_training(s, o);
       }},
      {"save over a directory", train + "--save {dir}/data", 1, "{dir}/data is a directory", nullptr,
       expect_no_training},
      {"save into a missing directory", train + "--save {dir}/none/x.safetensors", 1,
       "{dir}/none/x.safetensors: the directory {dir}/none: No such file or directory", nullptr, expect_no_training},
      {"save through a planted temporary link", train + "--quiet --save {dir}/out.safetensors", 0, "",
       [](const Scratch& s) {  // the old writer opened PATH.tmp and followed a link there
         write_text(s.root / "victim", "precious");
         s.link(s.root / "out.safetensors.tmp", s.root / "victim");
       },
       [](const Scratch& s, const Outcome&) {
         EXPECT_EQ(read_text(s.root / "victim"), "precious");
         EXPECT_TRUE(fs::is_regular_file(s.root / "out.safetensors"));
         EXPECT_TRUE(fs::is_symlink(s.root / "out.safetensors.tmp"));
       }},
      {"a successful save leaves no temporary file", train + "--quiet --save {dir}/fine.safetensors", 0, "",
       nullptr, expect_no_temporary_files},
      {"log into a directory", train + "--log {dir}/data", 1, "--log: {dir}/data is a directory"},
      {"log to a full device", train + "--log /dev/full", 1, "--log: /dev/full is a character device"},
      {"json to a full device", train + "--quiet --json", 1, "writing the output to stdout failed", nullptr, nullptr,
       false, "", "/dev/full"},
      {"info to a full device", "--dataset {data} --info", 1, "writing the output to stdout failed", nullptr,
       nullptr, false, "", "/dev/full"},

      // ---- checkpoints ----
      {"load /dev/zero", "--load /dev/zero --device cpu", 1, "/dev/zero is a character device, not a regular file"},
      {"load a directory", "--load {data} --device cpu", 1, "{data} is a directory, not a regular file"},
      {"load a missing file", "--load {dir}/absent --device cpu", 1, "{dir}/absent: cannot open"},
      {"load an empty file", "--load {dir}/empty --device cpu", 1, "{dir}/empty: file is 0 bytes",
       [](const Scratch& s) { write_text(s.root / "empty", ""); }},
      {"load a huge header length", "--load {dir}/bad --device cpu", 1, "{dir}/bad: header length",
       [](const Scratch& s) { write_text(s.root / "bad", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10)); }},
      {"negative slope 1e308", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "{dir}/ckpt.safetensors: metadata: negative_slope 1e+308 is outside [0, 1]",
       checkpoint_with("negative_slope", "1e308")},
      {"hidden 2^61 in metadata", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "hidden 2305843009213693952 is outside [1, 65536]", checkpoint_with("hidden", "2305843009213693952")},
      {"dropout NaN in metadata", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "metadata 'dropout' = 'NaN' is not a number", checkpoint_with("dropout", "NaN")},
      {"value dropout missing", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "metadata has no 'value_dropout'", checkpoint_with("value_dropout", "<none>")},
      {"unknown layer in metadata", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "metadata 'layer' = 'gatv3' is not gat or gatv2", checkpoint_with("layer", "gatv3")},
      {"gatv2 layers for gat tensors", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "with layer gatv2: GATv2Conv has no value dropout", checkpoint_with("layer", "gatv2")},
      {"not a gat_train checkpoint", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "not a gat_train checkpoint", checkpoint_with("format", "other")},
      {"features that do not fit", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "a model of 5 features", checkpoint_with("in_features", "5")},
      {"tensors that do not fit the metadata", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "{dir}/ckpt.safetensors: tensor 'conv1.", checkpoint_with("hidden", "4")},
      {"a good checkpoint evaluates", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 0, "",
       checkpoint_with("seed", "7")},

      // ---- custom CSV folders: the file and the line ----
      {"label 1000000", train, 1, "node-label.csv:3: label 1000000 is outside [0, 12)",
       [](const Scratch& s) { s.put("node-label.csv", "0\n1\n1000000\n1\n0\n1\n0\n1\n0\n1\n0\n1\n"); }},
      {"label 2147483646", train, 1, "node-label.csv:1: label 2147483646",
       [](const Scratch& s) { s.put("node-label.csv", "2147483646\n1\n0\n1\n0\n1\n0\n1\n0\n1\n0\n1\n"); }},
      {"label -1", train, 1, "node-label.csv:1: label -1",
       [](const Scratch& s) { s.put("node-label.csv", "-1\n1\n0\n1\n0\n1\n0\n1\n0\n1\n0\n1\n"); }},
      {"overlapping splits", train, 1, "valid.csv: validation node 4 is also a training node",
       [](const Scratch& s) { s.put("split/train.csv", "0\n1\n4\n"); }},
      {"test overlapping training", train, 1, "test.csv: test node 0 is also a training node",
       [](const Scratch& s) { s.put("split/test.csv", "0\n8\n"); }},
      {"empty test split", train, 1, "test.csv: the test split is empty",
       [](const Scratch& s) { s.put("split/test.csv", "\n"); }},
      {"empty training split", train, 1, "train.csv: the training split is empty",
       [](const Scratch& s) { s.put("split/train.csv", ""); }},
      {"split id out of range", train, 1, "train.csv:2: node id 12 is outside [0, 12)",
       [](const Scratch& s) { s.put("split/train.csv", "0\n12\n"); }},
      {"duplicate split id", train, 1, "valid.csv: node id 5 appears twice",
       [](const Scratch& s) { s.put("split/valid.csv", "5\n5\n"); }},
      {"missing test split", train, 1, "test.csv (or .gz) not found",
       [](const Scratch& s) { fs::remove(s.data / "split/test.csv"); }},
      {"negative edge id", train, 1, "edge.csv:2: node id -3 is outside [0, 12)",
       [](const Scratch& s) { s.put("edge.csv", "0,1\n-3,2\n"); }},
      {"edge of three fields", train, 1, "edge.csv:1: expected 'src,dst', got 3 fields",
       [](const Scratch& s) { s.put("edge.csv", "0,1,2\n"); }},
      {"NaN feature", train, 1, "node-feat.csv:2: field 3 'nan' is not finite",
       [](const Scratch& s) { s.put("node-feat.csv", std::string("1,2,3\n1,2,nan\n") + std::string(10, '\n')); }},
      {"ragged features", train, 1, "node-feat.csv:2: 2 features, the first row has 3",
       [](const Scratch& s) { s.put("node-feat.csv", "1,2,3\n1,2\n"); }},
      {"a NUL byte in a field", train, 1, "node-feat.csv:1: field 1 '1\\x002' is not a number",
       [](const Scratch& s) { s.put("node-feat.csv", std::string("1\0002,0,0\n", 9)); }},
      {"features file is a directory", train, 1, "node-feat.csv is a directory",
       [](const Scratch& s) {
         fs::remove(s.data / "node-feat.csv");
         fs::create_directories(s.data / "node-feat.csv");
       }},
      {"features file is /dev/zero", train, 1, "node-feat.csv is a character device",
       [](const Scratch& s) { s.link(s.data / "node-feat.csv", "/dev/zero"); }},
      {"edges are a gzip bomb", train, 1, "edge.csv.gz: decompresses to more than",
       [](const Scratch& s) {
         fs::remove(s.data / "edge.csv");
         write_text(s.data / "edge.csv.gz", gzip(std::string(size_t{8} << 20, '\n')));
       }},
      {"a raised gzip limit lets it through", train + "--quiet", 0, "",
       [](const Scratch& s) {
         fs::remove(s.data / "edge.csv");
         write_text(s.data / "edge.csv.gz", gzip("0,1\n" + std::string(size_t{8} << 20, '\n')));
       },
       nullptr, false, "GAT_MAX_GZIP_RATIO=100000"},
      {"a bad gzip limit", train, 1, "GAT_MAX_GZIP_RATIO='lots' is not a positive integer",
       [](const Scratch& s) {
         fs::remove(s.data / "edge.csv");
         write_text(s.data / "edge.csv.gz", gzip("0,1\n"));
       },
       nullptr, false, "GAT_MAX_GZIP_RATIO=lots"},
      {"truncated gzip", train, 1, "edge.csv.gz: truncated gzip stream",
       [](const Scratch& s) {
         const std::string gz = gzip(read_text(s.data / "edge.csv"));
         fs::remove(s.data / "edge.csv");
         write_text(s.data / "edge.csv.gz", gz.substr(0, gz.size() / 2));
       }},
      {"corrupt gzip", train, 1, "edge.csv.gz: corrupt gzip stream (incorrect data check)",
       [](const Scratch& s) {
         std::string gz = gzip(read_text(s.data / "edge.csv"));
         gz[gz.size() - 6] ^= 0x55;  // the CRC-32 of the trailer
         fs::remove(s.data / "edge.csv");
         write_text(s.data / "edge.csv.gz", gz);
       }},
      {"a folder that does not exist", "--dataset {dir}/nowhere --device cpu", 1, "unknown dataset '{dir}/nowhere'"},
      {"a data folder that is a file", "--dataset cora --data-dir {dir}/file --info", 1,
       "the data folder {dir}/file is a file, not a folder", [](const Scratch& s) { write_text(s.root / "file", "x"); }},
      {"a PPI data folder that is a file", "--dataset ppi --data-dir {dir}/file --info", 1,
       "the data folder {dir}/file is a file, not a folder: point --data-dir (or GAT_DATA_DIR) at the folder of the "
       "PPI files",
       [](const Scratch& s) { write_text(s.root / "file", "x"); }},
      {"ppi with an empty cache, offline", "--dataset ppi --info", 1,
       "cannot download ppi.zip from http://127.0.0.1:1/ppi.zip", nullptr,
       [](const Scratch& s, const Outcome&) { EXPECT_FALSE(fs::exists(s.root / "cache" / "gat" / "ppi")); }, false,
       "env -u GAT_DATA_DIR XDG_CACHE_HOME={dir}/cache GAT_PPI_URL=http://127.0.0.1:1/ppi.zip"},
      {"a cached ppi.zip that is not DGL's", "--dataset ppi --info", 1,
       "{dir}/cache/gat/ppi/ppi.zip is not DGL's ppi.zip: it has 4 bytes, not 7088822. Remove it to download it "
       "again (rm '{dir}/cache/gat/ppi/ppi.zip')",
       [](const Scratch& s) { write_text(s.root / "cache" / "gat" / "ppi" / "ppi.zip", "junk"); },
       [](const Scratch& s, const Outcome&) {
         EXPECT_EQ(read_text(s.root / "cache" / "gat" / "ppi" / "ppi.zip"), "junk");
         EXPECT_EQ(std::distance(fs::directory_iterator(s.root / "cache" / "gat" / "ppi"), fs::directory_iterator()), 1);
       },
       false, "env -u GAT_DATA_DIR XDG_CACHE_HOME={dir}/cache"},
      {"synthetic negative degree", "--dataset synthetic:100:-3:0 --info", 1,
       "avg_degree -3 must be a finite number >= 0"},
      {"synthetic NaN degree", "--dataset synthetic:100:nan:0 --info", 1, "avg_degree nan must be a finite number"},
      {"synthetic too many edges", "--dataset synthetic:100000:1e9:0 --info", 1, "gives too many edges"},
      {"a fill value without edge features", "--dataset synthetic:2000:8:0 --fill-value max --epochs 1", 1,
       "--fill-value max: synthetic:2000:8:0 has no edge features"},
      {"synthetic degree above the nodes", "--dataset synthetic:1000:100000:0 --info", 1,
       "avg_degree 100000 exceeds what 1000 nodes allow without repeated edges (999)"},
      {"synthetic too small for its splits", "--dataset synthetic:30:5:0 --info", 1,
       "30 nodes are too few for the splits: at least 661 are needed"},

      // ---- Planetoid files (Cora links; one replaced per case) ----
      {"cora baseline", "--dataset cora --data-dir {cora} --info", 0, "", nullptr, nullptr, true},
      {"test.index holds a training node", "--dataset cora --data-dir {cora} --info", 1,
       "ind.cora.test.index: test node 5 is also a training node",
       [](const Scratch& s) {
         std::string ids = read_text(fs::path(default_data_dir()) / "ind.cora.test.index");
         ids.replace(0, ids.find('\n'), "5");
         s.put_cora("test.index", ids);
       },
       nullptr, true},
      {"test.index is empty", "--dataset cora --data-dir {cora} --info", 1, "ind.cora.test.index: no test ids",
       [](const Scratch& s) { s.put_cora("test.index", "\n"); }, nullptr, true},
      {"x is /dev/zero", "--dataset cora --data-dir {cora} --info", 1, "ind.cora.x is a character device",
       [](const Scratch& s) { s.link(s.cora / "ind.cora.x", "/dev/zero"); }, nullptr, true},
      {"tx is a directory", "--dataset cora --data-dir {cora} --info", 1, "ind.cora.tx is a directory",
       [](const Scratch& s) {
         fs::remove(s.cora / "ind.cora.tx");
         fs::create_directories(s.cora / "ind.cora.tx");
       },
       nullptr, true},
      {"graph of memo references", "--dataset cora --data-dir {cora} --info", 1,
       "ind.cora.graph: the adjacency lists hold more than",
       [](const Scratch& s) { s.put_cora("graph", memo_bomb_graph(2000, 2000)); }, nullptr, true},

      // Outputs, checkpoints and resume (reliability round 3)
      {"log of a refused resume kept", resume + "--log {dir}/run.jsonl", 1,
       "resume: {dir}/run.safetensors: metadata trainer.test_acc 7 is outside [0, 1]",
       run_checkpoint_with(metadata_set("trainer.test_acc", "7")), expect_run_log_kept},
      {"log of a mistyped dataset kept", "--dataset {dir}/nowhere --device cpu --log {dir}/run.jsonl", 1,
       "unknown dataset '{dir}/nowhere'", make_run, expect_run_log_kept},
      {"log inside the dataset folder", train + "--log {data}/edge.csv", 1,
       "--log {data}/edge.csv is inside the dataset's folder {data}, an input of this run", nullptr,
       [](const Scratch& s, const Outcome&) { EXPECT_EQ(read_text(s.data / "edge.csv"), custom_files()[2].second); }},
      {"log through a symlink", train + "--log {dir}/link", 1, "--log: {dir}/link is a symbolic link", victim_link,
       expect_unchanged_link},
      {"log to a FIFO", train + "--log {dir}/fifo", 1, "--log: {dir}/fifo is a FIFO",
       [](const Scratch& s) { ASSERT_EQ(::mkfifo((s.root / "fifo").c_str(), 0644), 0); }, expect_no_training},
      {"log and checkpoint one file", train + "--checkpoint {dir}/out --log {dir}/./out", 1,
       "--checkpoint {dir}/out and --log {dir}/./out are the same file", nullptr, expect_no_training},
      {"save and log one file by a hard link", train + "--save {dir}/a --log {dir}/b", 1,
       "--save {dir}/a and --log {dir}/b are the same file",
       [](const Scratch& s) {
         write_text(s.root / "a", "precious");
         fs::create_hard_link(s.root / "a", s.root / "b");
       },
       [](const Scratch& s, const Outcome&) { EXPECT_EQ(read_text(s.root / "a"), "precious"); }},
      {"log is the resumed checkpoint", resume + "--log {dir}/run.safetensors", 1,
       "--log {dir}/run.safetensors is the --resume checkpoint, an input of this run", make_run},
      {"log write fails (file size limit)", "--dataset {data} --device cpu --epochs 30 --quiet --log {dir}/log.jsonl", 1,
       "--log: writing {dir}/log.jsonl failed: File too large", nullptr, nullptr, false,
       "ulimit -f 1;"},  // SIGXFSZ, ignored by gat_train: the write fails with EFBIG
      {"log device", train + "--log /dev/null", 1, "--log: /dev/null is a character device"},
      // Another run's log, still being appended to (its lock held here by flock(1) for 5 s): a
      // second run given it replaced it, and the first run's lines went to a file no longer in
      // any folder, both exiting 0.
      {"log of a running run", train + "--log {dir}/held.jsonl", 1,
       "--log: {dir}/held.jsonl is being written by another running process",
       [](const Scratch& s) { write_text(s.root / "held.jsonl", "{\"epoch\":1}\n"); },
       [](const Scratch& s, const Outcome& o) {
         EXPECT_EQ(read_text(s.root / "held.jsonl"), "{\"epoch\":1}\n");
         expect_no_training(s, o);
       },
       false, "flock {dir}/held.jsonl sleep 5 & sleep 0.5 &&"},
      {"epoch abc", resume, 1, "--resume {dir}/run.safetensors: metadata 'trainer.epoch' = 'abc' is not a number",
       run_checkpoint_with(metadata_set("trainer.epoch", "abc")), expect_no_training},
      {"epoch 2^63-1", resume, 1, "metadata trainer.epoch 9223372036854775807 is outside [1, 2147483647]",
       run_checkpoint_with(metadata_set("trainer.epoch", "9223372036854775807")), expect_no_training},
      {"best epoch after the epoch", resume, 1, "the remembered epoch 3 (trainer.best_epoch) is after the last epoch run, 2",
       run_checkpoint_with(metadata_set("trainer.best_epoch", "3")), expect_no_training},
      {"wait beyond the patience", resume, 1, "metadata trainer.wait 101 is outside [0, 100]",
       run_checkpoint_with(metadata_set("trainer.wait", "101")), expect_no_training},
      {"optimiser lr NaN", resume, 1, "the optimiser's saved rate 'optimizer.lr' nan is not the run's --lr 0.005",
       run_checkpoint_with([](io::Safetensors& c) { c.tensors["optimizer.lr"] = Tensor::scalar(NAN, DType::f64); }),
       expect_no_training},
      {"optimiser lr negative", resume, 1, "the optimiser's saved rate 'optimizer.lr' -1 is not the run's --lr 0.005",
       run_checkpoint_with([](io::Safetensors& c) { c.tensors["optimizer.lr"] = Tensor::scalar(-1.0, DType::f64); }),
       expect_no_training},
      {"optimiser steps beyond the epochs run", resume, 1,
       "the optimiser took 1000000000 steps for parameter 3 in 2 epochs (trainer.epoch; one step an epoch)",
       run_checkpoint_with([](io::Safetensors& c) {
         Tensor steps = c.tensors.at("optimizer.step").clone();
         steps.data<int32_t>()[3] = 1000000000;
         c.tensors["optimizer.step"] = steps;
       }),
       expect_run_log_kept},
      {"a finite best loss before any remembered epoch", resume, 1,
       "the best validation loss (trainer.best_loss) is 0.5, yet no epoch was remembered",
       run_checkpoint_with([](io::Safetensors& c) {
         c.metadata["trainer.best_epoch"] = "0";
         c.metadata["trainer.best_loss"] = "0.5";
         for (auto it = c.tensors.begin(); it != c.tensors.end();)
           it = it->first.rfind("trainer.best.", 0) == 0 ? c.tensors.erase(it) : std::next(it);
       }),
       expect_no_training},
      {"a --checkpoint file given to --load", "--load {dir}/run.safetensors --dataset {data} --device cpu", 1,
       "--load {dir}/run.safetensors: a run checkpoint (written by --checkpoint after epoch 2), not a model saved "
       "by --save: continue the run with --resume",
       make_run, expect_no_training},
      {"a --save file given to --resume", "--dataset {data} --device cpu --resume {dir}/ckpt.safetensors", 1,
       "--resume {dir}/ckpt.safetensors: holds no run state (no metadata 'trainer.epoch'): not a run checkpoint",
       checkpoint_with("hidden", "8"), expect_no_training},
      {"optimiser step negative", resume, 1, "the optimiser took -1 steps for parameter 0 in 2 epochs",
       run_checkpoint_with([](io::Safetensors& c) { c.tensors["optimizer.step"].data<int32_t>()[0] = -1; }),
       expect_no_training},
      {"optimiser moment missing", resume, 1, "Optimizer::load_state_dict: parameter 0 has 2 steps but no 'exp_avg.0'",
       run_checkpoint_with([](io::Safetensors& c) { c.tensors.erase("optimizer.exp_avg.0"); }), expect_no_training},
      {"optimiser moment NaN", resume, 1, "'exp_avg_sq.1' holds a NaN or infinity (at flat index 0)",
       run_checkpoint_with([](io::Safetensors& c) { c.tensors["optimizer.exp_avg_sq.1"].data<float>()[0] = NAN; }),
       expect_no_training},
      {"remembered parameter missing", resume, 1, "remembered parameters ('trainer.best.*'), the model has",
       run_checkpoint_with([](io::Safetensors& c) { c.tensors.erase("trainer.best.0"); }), expect_no_training},
      {"another dataset of the same shape", resume, 1,
       "these flags differ from the run's: the dataset's content digest",
       [](const Scratch& s) {
         make_run(s);
         s.put("node-label.csv", "1\n0\n1\n0\n1\n0\n1\n0\n1\n0\n1\n0\n");
       },
       expect_run_log_kept},
      {"another lr on resume", resume + "--lr 0.01 --hidden 4", 1,
       "these flags differ from the run's: --hidden 4 (the run's: 8), --lr 0.01 (the run's: 0.005); give the "
       "interrupted run's flags",
       make_run, expect_no_training},
      {"a torn last log line is dropped", resume + "--epochs 3 --quiet --log {dir}/run.jsonl", 0, "",
       [](const Scratch& s) {
         make_run(s);
         std::ofstream(s.root / "run.jsonl", std::ios::app) << R"({"run":0,"epoch":3,"lo)";
       },
       [](const Scratch& s, const Outcome&) {
         const std::string log = read_text(s.root / "run.jsonl");
         EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 3) << log;
         EXPECT_EQ(log.find("\"lo{"), std::string::npos) << log;
       }},
      {"a log of another run", resume + "--log {dir}/other.jsonl", 1,
       "{dir}/other.jsonl:1: epoch 5 where epoch 1 was due",
       [](const Scratch& s) {
         make_run(s);
         write_text(s.root / "other.jsonl", R"({"run":0,"epoch":5})" "\n");
       },
       expect_no_training},
      {"load NaN parameters", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "{dir}/ckpt.safetensors: tensor 'conv1.att_src' holds a NaN or infinity (at flat index 0)",
       [](const Scratch& s) {
         io::Safetensors ckpt = base_checkpoint(s.root.parent_path() / "base");
         Tensor t = ckpt.tensors.at("conv1.att_src").clone();
         t.data<float>()[0] = NAN;
         ckpt.tensors["conv1.att_src"] = t;
         io::save_safetensors((s.root / "ckpt.safetensors").string(), ckpt.tensors, ckpt.metadata);
       }},
      {"load with another model flag", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu --hidden 4 --heads 8",
       1, "these flags differ from the checkpoint's model: --hidden 4 (the checkpoint's: 8); leave them out",
       checkpoint_with("seed", "7")},
      {"load with a training flag", "--load {dir}/ckpt.safetensors --device cpu --epochs 5", 2,
       "--epochs excludes --load"},
      {"load finds a relative dataset from another folder", "--load {dir}/rel.safetensors --device cpu --quiet --json",
       0, "",
       [](const Scratch& s) {
         const std::string command = "cd '" + s.root.string() + "' && '" + GAT_TRAIN_EXE +
                                     "' --dataset data --device cpu --epochs 2 --quiet --save rel.safetensors";
         ASSERT_EQ(std::system(command.c_str()), 0) << command;
       },
       [](const Scratch& s, const Outcome& o) {
         EXPECT_EQ(io::load_safetensors((s.root / "rel.safetensors").string()).metadata.at("dataset"),
                   s.data.string());
         EXPECT_NE(o.out.find(R"("dataset":")" + s.data.string()), std::string::npos) << o.out;
       }},
      {"load a changed dataset", "--load {dir}/rel.safetensors --device cpu", 1,
       "is not the one the model was trained on (content digest",
       [](const Scratch& s) {
         const std::string command = "cd '" + s.root.string() + "' && '" + GAT_TRAIN_EXE +
                                     "' --dataset data --device cpu --epochs 2 --quiet --save rel.safetensors";
         ASSERT_EQ(std::system(command.c_str()), 0) << command;
         s.put("node-label.csv", "1\n0\n1\n0\n1\n0\n1\n0\n1\n0\n1\n0\n");
       }},
      {"stale temporary files of a killed run removed", train + "--quiet --checkpoint {dir}/ck.safetensors", 0, "",
       [](const Scratch& s) {
         write_text(s.root / "ck.safetensors.gat-999999999-aB3dE9.tmp", std::string(1000, 'x'));  // no such process
         write_text(s.root / "ck.safetensors.gat-1-aB3dE9.tmp", "a live process's");
         write_text(s.root / "other.safetensors.gat-999999999-aB3dE9.tmp", "another file's");
         write_text(s.root / "victim", "precious");
         s.link(s.root / "ck.safetensors.gat-999999998-aB3dE9.tmp", s.root / "victim");
       },
       [](const Scratch& s, const Outcome&) {
         EXPECT_FALSE(fs::exists(s.root / "ck.safetensors.gat-999999999-aB3dE9.tmp"));
         EXPECT_TRUE(fs::is_regular_file(s.root / "ck.safetensors.gat-1-aB3dE9.tmp"));
         EXPECT_TRUE(fs::is_regular_file(s.root / "other.safetensors.gat-999999999-aB3dE9.tmp"));
         EXPECT_TRUE(fs::is_symlink(s.root / "ck.safetensors.gat-999999998-aB3dE9.tmp"));
         EXPECT_EQ(read_text(s.root / "victim"), "precious");
         EXPECT_TRUE(fs::is_regular_file(s.root / "ck.safetensors"));
       }},
      {"dropout that rounds to 1", bad_flag + "--dropout 0.99999999", 2,
       "--dropout: '0.99999999' is not a number in [0, 0.999]"},

      // Hostile campaign 2 (reliability round 3)
      {"out of memory inside a parallel loop (the generator's alias tables)",
       "--dataset synthetic:30000000:2:0 --device cpu --epochs 1 --quiet", 1,
       "out of memory (the dataset or the model is too large for this machine)", nullptr, nullptr, false,
       "ulimit -v 1000000;"},
      {"save past the file size limit (SIGXFSZ)", train + "--quiet --save {dir}/m.safetensors", 1,
       "safetensors: writing {dir}/m.safetensors.gat-", nullptr,
       [](const Scratch& s, const Outcome& o) {
         EXPECT_NE(o.err.find("failed: File too large"), std::string::npos) << o.err;
         expect_no_temporary_files(s, o);
       },
       false, "ulimit -f 2;"},
      {"optimiser second moment negative", resume, 1,
       "Optimizer::load_state_dict: 'exp_avg_sq.1' holds -1 (at flat index 0), but it is a mean of squares (>= 0)",
       run_checkpoint_with([](io::Safetensors& c) { c.tensors["optimizer.exp_avg_sq.1"].data<float>()[0] = -1; }),
       expect_no_training},
      {"resume past the epochs asked for", resume + "--epochs 1", 1,
       "the run is at epoch 2 (trainer.epoch), past the 1 epochs asked for (max_epochs, --epochs): it cannot end at 1; "
       "ask for 2 or more",
       make_run, expect_run_log_kept},
      {"resume parameters whose outputs overflow", resume, 1,
       "resume: {dir}/run.safetensors: the model's train loss is ",
       run_checkpoint_with([](io::Safetensors& c) {
         for (const char* name : {"conv1.att_src", "conv1.att_dst"}) {
           Tensor t = c.tensors.at(name).clone();
           for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 3e38f;
           c.tensors[name] = t;
         }
       }),
       expect_run_log_kept},
      {"resume into steps that overflow (huge first moments, zero second ones)", resume + "--epochs 4", 0,
       "gat_train: run 1: the loss was not finite in 2 epoch(s), the first epoch 3 (logged as null): the outputs "
       "overflowed or turned NaN; the result is epoch ",
       run_checkpoint_with([](io::Safetensors& c) {
         for (auto& [name, t] : c.tensors) {
           const bool first = name.rfind("optimizer.exp_avg.", 0) == 0, second = name.rfind("optimizer.exp_avg_sq.", 0) == 0;
           if (!first && !second) continue;
           Tensor edited = t.clone();
           for (int64_t i = 0; i < edited.numel(); ++i) edited.data<float>()[i] = first ? 3e38f : 0.0f;
           t = edited;
         }
       })},
      {"resume a file of another format", resume, 1,
       "--resume {dir}/run.safetensors: metadata 'format' is not 'gat_train' (not a gat_train checkpoint)",
       run_checkpoint_with(metadata_set("format", "other")), expect_no_training},
      {"optimiser rate other than the run's --lr", resume, 1,
       "the optimiser's saved rate 'optimizer.lr' 1000 is not the run's --lr 0.005",
       run_checkpoint_with([](io::Safetensors& c) { c.tensors["optimizer.lr"] = Tensor::scalar(1000.0, DType::f64); }),
       expect_no_training},
      {"load parameters whose outputs overflow", "--load {dir}/ckpt.safetensors --dataset {data} --device cpu", 1,
       "its outputs are not finite numbers",
       [](const Scratch& s) {
         io::Safetensors ckpt = base_checkpoint(s.root.parent_path() / "base");
         for (const char* name : {"conv1.att_src", "conv1.att_dst"}) {
           Tensor t = ckpt.tensors.at(name).clone();
           for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 3e38f;
           ckpt.tensors[name] = t;
         }
         io::save_safetensors((s.root / "ckpt.safetensors").string(), ckpt.tensors, ckpt.metadata);
       },
       [](const Scratch&, const Outcome& o) { EXPECT_EQ(o.out.find("test acc"), std::string::npos) << o.out; }},
      {"a 10 MB line in the resumed log is quoted in 60 bytes", resume + "--log {dir}/run.jsonl", 1,
       "{dir}/run.jsonl:1: 'xxxx",
       [](const Scratch& s) {
         make_run(s);
         write_text(s.root / "run.jsonl", std::string(size_t{10} << 20, 'x') + "\n");
       },
       [](const Scratch&, const Outcome& o) { EXPECT_LT(o.err.size(), 400u) << o.err.substr(0, 500); }},
      {"OMP_NUM_THREADS beyond what --threads allows", train + "--quiet", 1,
       "OMP_NUM_THREADS asks for 100000 threads, more than 4096", nullptr, nullptr, false,
       "OMP_NUM_THREADS=100000"},
      // A 64 KiB stack: the gzip reader's 64 KiB buffer and Eigen's blocking buffers (up to 128
      // KiB) were on the stack, and overflowed it.
      {"a 64 KiB stack reads a gzip file", train + "--quiet", 0, "",
       [](const Scratch& s) {
         const std::string text = read_text(s.data / "edge.csv");
         fs::remove(s.data / "edge.csv");
         write_text(s.data / "edge.csv.gz", gzip(text));
       },
       nullptr, false, "ulimit -s 64;"},
      {"a 64 KiB stack multiplies matrices on two threads", "--dataset synthetic:2000:4:0:3 --epochs 2 --quiet", 0,
       "", nullptr, nullptr, false, "ulimit -s 64; OMP_NUM_THREADS=2"},
      {"a stack below 64 KiB", train + "--quiet", 1,
       "the stack limit (ulimit -s) is 32 KiB, less than the 64 KiB this program needs", nullptr, nullptr, false,
       "ulimit -s 32;"},
      {"stdout a pipe closed by its reader (SIGPIPE)", "--dataset {data} --device cpu --epochs 50 --quiet --json", 1,
       "gat_train: writing the output to stdout failed", nullptr, nullptr, false,
       "mkfifo {dir}/out.fifo && { (exec 3<{dir}/out.fifo) & } &&", "{dir}/out.fifo"},

      // Hostile campaign 4 (issue 49): paths that cannot be looked at, a dataset without edges, --info.
      {"a dataset that is a loop of symbolic links", "--dataset {dir}/loop --device cpu", 2,
       "--dataset {dir}/loop: {dir}/loop: Too many levels of symbolic links",
       [](const Scratch& s) { s.link(s.root / "loop", s.root / "loop"); }},
      {"a data folder that is a loop of symbolic links", "--dataset cora --data-dir {dir}/loop --info", 1,
       "{dir}/loop: Too many levels of symbolic links", [](const Scratch& s) { s.link(s.root / "loop", s.root / "loop"); }},
      {"a PPI data folder that is a loop of symbolic links", "--dataset ppi --data-dir {dir}/loop --info", 1,
       "{dir}/loop: Too many levels of symbolic links", [](const Scratch& s) { s.link(s.root / "loop", s.root / "loop"); }},
      {"an empty edge-feat.csv beside an empty edge.csv", train, 1,
       "edge-feat.csv has no lines ({data}/edge.csv lists no edges), so the number of edge features cannot be told",
       [](const Scratch& s) {
         s.put("edge.csv", "");
         s.put("edge-feat.csv", "");
       }},
      {"--info with --save writes nothing, so it is refused", "--dataset {data} --info --save {dir}/m.safetensors", 2,
       "--save excludes --info",
       [](const Scratch&) {}, [](const Scratch& s, const Outcome&) { EXPECT_FALSE(fs::exists(s.root / "m.safetensors")); }},
      {"--info with --resume continues nothing, so it is refused", "--dataset {data} --info --resume {dir}/run.safetensors",
       2, "--resume excludes --info"},
      {"--info with --epochs trains nothing, so it is refused", "--dataset {data} --info --epochs 3", 2,
       "--epochs excludes --info"},
      // A file given to --load is read from its header: one that is not what its header says is
      // refused before its data is read (these read 16 GiB of holes into 2 GB of address space).
      {"a 16 GiB file of zeros given to --load", "--load {dir}/big.safetensors --device cpu", 1,
       "safetensors: {dir}/big.safetensors: bad JSON header",
       [](const Scratch& s) {
         write_text(s.root / "big.safetensors", "");
         fs::resize_file(s.root / "big.safetensors", uintmax_t{16} << 30);
       },
       nullptr, false, "ulimit -v 2000000;"},
      {"a checkpoint grown to 16 GiB given to --load", "--load {dir}/ckpt.safetensors --device cpu", 1,
       "safetensors: {dir}/ckpt.safetensors: ",
       [](const Scratch& s) {
         checkpoint_with("format", "gat_train")(s);
         const uintmax_t size = fs::file_size(s.root / "ckpt.safetensors");
         fs::resize_file(s.root / "ckpt.safetensors", uintmax_t{16} << 30);
         write_text(s.root / "expected", std::to_string((uintmax_t{16} << 30) - size));
       },
       [](const Scratch& s, const Outcome& o) {
         EXPECT_NE(o.err.find(read_text(s.root / "expected") + " trailing data bytes belong to no tensor"),
                   std::string::npos)
             << o.err;
       },
       false, "ulimit -v 2000000;"},
      {"--info with --load evaluates nothing, so it is refused", "--dataset {data} --info --load {dir}/m.safetensors", 2,
       "--load excludes --info"},
      // Hostile campaign 6
      {"--checkpoint-every without --checkpoint would be ignored, so it is refused", train + "--checkpoint-every 5",
       2, "--checkpoint-every 5 without --checkpoint"},
      {"--checkpoint-every with --resume but no --checkpoint writes nothing, so it is refused",
       resume + "--epochs 4 --checkpoint-every 2", 2, "--checkpoint-every 2 without --checkpoint", make_run,
       expect_run_log_kept},
      {"a GAT_CUDA_GRAPHS that is neither on nor off", train + "--quiet", 1,
       "GAT_CUDA_GRAPHS='maybe' is not 0, off, false, no", nullptr, nullptr, false, "GAT_CUDA_GRAPHS=maybe"},
      {"GAT_CUDA_GRAPHS=OFF is off (any case)", train + "--quiet", 0, "", nullptr, nullptr, false,
       "GAT_CUDA_GRAPHS=OFF"},
      {"an escape sequence in a flag's value is shown escaped", train + "--device 'cp\x1b[2Ju'", 2,
       "--device: cp\\x1b[2Ju not in {cpu,cuda,auto}", nullptr,
       [](const Scratch&, const Outcome& o) { EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << o.err; }},
      {"an escape sequence in a download URL is shown escaped", "--dataset cora --data-dir {dir}/empty --info", 1,
       "127.0.0.1:9/\\x1b[2J", nullptr,
       [](const Scratch&, const Outcome& o) { EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << o.err; }, false,
       "GAT_DOWNLOAD_TIMEOUT=2 GAT_DATASET_URL=\"$(printf 'http://127.0.0.1:9/\\033[2J')\""},
      {"a password in the download URL is not shown", "--dataset cora --data-dir {dir}/empty --info", 1,
       "http://user:***@127.0.0.1:9/", nullptr,
       [](const Scratch&, const Outcome& o) { EXPECT_EQ(o.err.find("s3cret"), std::string::npos) << o.err; },
       false, "GAT_DOWNLOAD_TIMEOUT=2 GAT_DATASET_URL=http://user:s3cret@127.0.0.1:9/"},
      {"a --save name of 250 bytes, legal, is written (its temporary name is cut to fit)",
       train + "--quiet --save {dir}/" + std::string(250, 's'), 0, "", nullptr,
       [](const Scratch& s, const Outcome&) {
         EXPECT_TRUE(fs::is_regular_file(s.root / std::string(250, 's')));
         expect_no_temporary_files(s, Outcome{});
       }},
      {"a folder ./ppi beside --dataset ppi is ambiguous, as ./cora is", "--dataset ppi --info", 1,
       "'ppi' names both a built-in dataset and the folder ./ppi here: write ./ppi for the folder, or give the "
       "built-in dataset's data folder",
       [](const Scratch& s) { fs::create_directories(s.root / "ppi"); }, nullptr, false,
       "cd {dir} && env -u GAT_DATA_DIR"},
      {"a folder named like a synthetic-ppi spec is ambiguous", "--dataset synthetic-ppi:3:10:0 --info", 1,
       "'synthetic-ppi:3:10:0' names both a built-in dataset and the folder ./synthetic-ppi:3:10:0 here",
       [](const Scratch& s) { fs::create_directories(s.root / "synthetic-ppi:3:10:0"); }, nullptr, false,
       "cd {dir} &&"},
      {"resume with --epochs equal to the checkpoint's epoch trains nothing and reports the run",
       resume + "--epochs 2 --log {dir}/run.jsonl --json", 0, "", make_run,
       [](const Scratch& s, const Outcome& o) {
         const std::string log = read_text(s.root / "run.jsonl");
         EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;
         EXPECT_NE(o.out.find("\"epochs\":[2.0]"), std::string::npos) << o.out;
       }},
      {"a UTF-16 file (as Windows saves Unicode text) is named as such", train, 1,
       "node-feat.csv: UTF-16 text (it starts with the byte order mark FF FE); save it as UTF-8",
       [](const Scratch& s) {
         std::string utf16 = "\xff\xfe";
         for (const char c : read_text(s.data / "node-feat.csv")) utf16 += std::string(1, c) + '\0';
         s.put("node-feat.csv", utf16);
       }},
      {"OMP_NUM_THREADS=0 warns and runs on every core, as PyTorch does", train + "--quiet --json", 0,
       "OMP_NUM_THREADS", nullptr,
       [](const Scratch&, const Outcome& o) { EXPECT_NE(o.out.find("\"threads\":"), std::string::npos) << o.out; },
       false, "OMP_NUM_THREADS=0"},

      // Hostile campaign 7
      {"load a header whose dtype is nested 100,000 deep (its message overflowed the stack)",
       "--load {dir}/deep --device cpu", 1,
       "{dir}/deep: bad JSON header: arrays and objects nested more than 64 deep",
       [](const Scratch& s) {
         const std::string header = R"({"w":{"dtype":)" + std::string(100000, '[') + std::string(100000, ']') +
                                    R"(,"shape":[2],"data_offsets":[0,8]})";
         std::string length(8, '\0');
         for (size_t k = 0; k < 8; ++k) length[k] = static_cast<char>((header.size() >> (8 * k)) & 0xff);
         write_text(s.root / "deep", length + header + std::string(8, '\0'));
       }},
  };
  return c;
}

// ASan reserves terabytes of address space and needs several times the stack: under it the cases
// that set ulimit -v or ulimit -s would test the sanitizer, not the program's limits.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

bool sets_memory_limits(const Case& c) {
  return c.env.find("ulimit -v") != std::string::npos || c.env.find("ulimit -s") != std::string::npos;
}

}  // namespace

TEST(HostileCli, EveryCaseExitsAsExpectedNamingTheCulprit) {
  std::string tmpl = (fs::temp_directory_path() / "gat_hostile_XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path top = tmpl;
  const bool root = ::geteuid() == 0;
  const bool cora = cora_present();
  const std::vector<Case> table = cases();
  EXPECT_GE(table.size(), 60u);
  int index = 0, skipped = 0, skipped_limits = 0;
  for (const Case& c : table) {
    SCOPED_TRACE(c.name);
    if (c.needs_cora && !cora) {
      ++skipped;
      continue;
    }
    if (kSanitized && sets_memory_limits(c)) {
      ++skipped_limits;
      continue;
    }
    const fs::path dir = top / std::to_string(index++);
    fs::create_directories(dir);
    const Scratch s(dir);
    if (c.setup) c.setup(s);
    const Outcome o = run_gat_train(expand(c.args, s), s.root, expand(c.env, s), expand(c.stdout_to, s));
    EXPECT_EQ(o.status, c.status) << c.args << "\nstderr: " << o.err;
    if (!c.culprit.empty()) {
      EXPECT_NE(o.err.find(expand(c.culprit, s)), std::string::npos)
          << c.args << "\nexpected in stderr: " << expand(c.culprit, s) << "\nstderr: " << o.err;
    }
    if (c.status == 2) {
      EXPECT_NE(o.err.find("Usage:"), std::string::npos) << o.err;
    }
    EXPECT_EQ(o.err.find("bad_alloc"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("terminate called"), std::string::npos) << "an uncaught exception: " << o.err;
    if (c.after) c.after(s, o);
  }
  // A device node at the save path (as root: the old writer replaced even /dev/null).
  if (root) {
    const fs::path dir = top / "device";
    fs::create_directories(dir);
    const Scratch s(dir);
    ASSERT_EQ(::mknod((dir / "mynull").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    const Outcome o =
        run_gat_train(expand("--dataset {data} --device cpu --epochs 2 --save {dir}/mynull", s), dir);
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find(dir.string() + "/mynull is a character device"), std::string::npos) << o.err;
    struct stat st {};
    EXPECT_EQ(::lstat((dir / "mynull").c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced";
  }
  // A file system out of inodes: writable to access(), yet no file can be created there. --save
  // is refused before training, not after it (as root, where a tmpfs can be mounted).
  if (root) {
    const fs::path dir = top / "inodes";
    fs::create_directories(dir / "full");
    const Scratch s(dir);
    const std::string full = (dir / "full").string();
    if (std::system(("mount -t tmpfs -o size=1m,nr_inodes=2 tmpfs '" + full + "' 2>/dev/null").c_str()) ==
        0) {
      write_text(dir / "full" / "only", "");  // the last inode
      const Outcome o = run_gat_train(
          expand("--dataset {data} --device cpu --epochs 2 --save {dir}/full/m.safetensors", s), dir);
      EXPECT_EQ(o.status, 1);
      EXPECT_NE(o.err.find("--save: " + full + "/m.safetensors: cannot create a file beside it"),
                std::string::npos)
          << o.err;
      EXPECT_EQ(o.out.find("test acc"), std::string::npos) << "trained before refusing: " << o.out;
      EXPECT_EQ(std::system(("umount '" + full + "'").c_str()), 0);
    } else {
      std::printf("[ NOTE ] no tmpfs could be mounted: the out-of-inodes case was skipped\n");
    }
  }
  fs::remove_all(top);
  if (skipped)
    std::printf("[ NOTE ] %d Planetoid case(s) skipped: Cora not found in %s\n", skipped,
                default_data_dir().c_str());
  if (skipped_limits)
    std::printf("[ NOTE ] %d case(s) of ulimit -v or -s skipped: a sanitized build\n", skipped_limits);
}
