// cli/commands.h — the `dtrain` command and its subcommands.
//
// Contract: main() dispatches argv[1] to a subcommand, prints usage on --help or an unknown
// command, and returns the process exit code. Errors derived from dtrain::Error are printed
// as "dtrain: error: <what>" with exit code 2 for usage errors (InvalidArgument) and 1
// otherwise; nothing escapes as an uncaught exception.
// Each subcommand lives in its own file (run_cmd.cc, bench_cmd.cc, train_cmd.cc, ...) and
// takes the arguments after its own name.
#pragma once

#include <string>
#include <vector>

namespace dtrain::cli {

using Args = std::vector<std::string>;

int main(int argc, char** argv);

int run_main(const Args& args);       // dtrain run: the launcher          (run_cmd.cc)
int bench_main(const Args& args);     // dtrain bench p2p|collectives|...  (bench_cmd.cc)
int train_main(const Args& args);     // dtrain train                      (train_cmd.cc)
int plan_main(const Args& args);      // dtrain plan                       (plan_cmd.cc)
int generate_main(const Args& args);  // dtrain generate                   (generate_cmd.cc)
int env_main(const Args& args);       // dtrain env                        (env_cmd.cc)
int data_main(const Args& args);      // dtrain data                       (env_cmd.cc)
int version_main(const Args& args);   // dtrain version, dtrain --version  (version_cmd.cc)

}  // namespace dtrain::cli
