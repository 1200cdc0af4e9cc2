#include "cli/commands.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>

#include "base/error.h"
#include "base/huge_pages.h"
#include "cli/blas_core.h"
#include "tensor/blas.h"

namespace dtrain::cli {
namespace {
struct Command {
  int (*fn)(const Args&);
  const char* help;
};

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> table = {
      {"run", {run_main, "start N local ranks of a program (like torchrun)"}},
      {"bench", {bench_main, "benchmarks: p2p, collectives, calibrate, tp-blocks"}},
      {"train", {train_main, "train a model (single, threads, hogwild, ddp, ...)"}},
      {"plan", {plan_main, "predict the cost of collectives and strategies"}},
      {"generate", {generate_main, "sample text from a language-model checkpoint"}},
      {"env", {env_main, "the DTRAIN_* settings and the values in force"}},
      {"data", {data_main, "the named datasets: where each is looked for, found or not, how to get it"}},
      {"version", {version_main, "this build: release, git revision, kernels, BLAS (also --version)"}},
  };
  return table;
}

void usage() {
  std::fprintf(stderr, "usage: dtrain <command> [options]\n\ncommands:\n");
  for (const auto& [name, c] : commands()) std::fprintf(stderr, "  %-9s %s\n", name.c_str(), c.help);
  std::fprintf(stderr, "\n'dtrain <command> --help' shows a command's options.\n");
}
}  // namespace

int main(int argc, char** argv) {
  run_again_with_better_blas_core(argv);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "--version") cmd = "version";
  auto it = commands().find(cmd);
  if (it == commands().end()) {
    std::fprintf(stderr, "dtrain: unknown command '%s'\n\n", cmd.c_str());
    usage();
    return 2;
  }
  try {
    huge_pages_wanted();  // read before the first large allocation, so a bad value is an error here
    return it->second.fn(Args(argv + 2, argv + argc));
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "dtrain %s: error: %s\n", cmd.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
}  // namespace dtrain::cli
