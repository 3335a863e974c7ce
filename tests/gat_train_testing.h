// Running the gat_train program from a test, as a user would (GAT_TRAIN_EXE is its path).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace gat::testing {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Outcome {
  int status = -1;  // exit code (-1: killed by a signal)
  std::string out, err;
};

// `env` (assignments, e.g. "A=1") gat_train `args`, stdout and stderr captured in files of `dir`;
// stdout goes to `stdout_to` instead when given (e.g. /dev/full; then `out` is empty).
inline Outcome run_gat_train(const std::string& args, const std::filesystem::path& dir,
                             const std::string& env = "", const std::string& stdout_to = "") {
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string command = env + " '" + GAT_TRAIN_EXE + "' " + args + " >'" +
                              (stdout_to.empty() ? out.string() : stdout_to) + "' 2>'" + err.string() + "'";
  const int raw = std::system(command.c_str());
  Outcome o;
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  o.out = stdout_to.empty() ? read_text(out) : "";
  o.err = read_text(err);
  return o;
}

}  // namespace gat::testing
