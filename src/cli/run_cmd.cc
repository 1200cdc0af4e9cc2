// dtrain run — start N local ranks of any program (see launch/launch.h).
#include <cstdio>
#include <set>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "launch/launch.h"

namespace dtrain::cli {

int run_main(const Args& args) {
  // Options end at "--" or at the first word that is not an option or an option's value;
  // everything from there on is the program and its own arguments.
  static const std::set<std::string> bare = {"--no-tag-output", "--help", "-h"};
  Args opts, program;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      program.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (args[i].size() > 1 && args[i][0] == '-') {
      opts.push_back(args[i]);
      if (!bare.count(args[i]) && args[i].find('=') == std::string::npos && i + 1 < args.size())
        opts.push_back(args[++i]);
      continue;
    }
    program.assign(args.begin() + static_cast<long>(i), args.end());
    break;
  }
  Flags f("run", opts);
  launch::LaunchOptions o;
  o.nproc = static_cast<int>(f.get_int("nproc", 1, 1, 1024, "ranks to start on this node", "n"));
  o.transport = f.get_string("transport", "auto", "auto | shm | tcp (auto: shm on one host)");
  o.nnodes = static_cast<int>(f.get_int("nnodes", 1, 1, 65536, "number of nodes (one launcher per node)"));
  o.node_rank = static_cast<int>(f.get_int("node-rank", 0, 0, 65535, "this node's index, 0..nnodes-1"));
  o.master = f.get_string("master", "", "HOST:PORT where node 0 serves the rendezvous (multi-node)");
  o.timeout_s = f.get_double("timeout", 300, 0.1, 1e6, "seconds any blocking communication may wait");
  o.bind_addr = f.get_string("bind-addr", "", "address or interface the ranks' tcp transport uses (multi-node)");
  o.token = f.get_string("token", "", "job secret for multi-node jobs (default: $DTRAIN_TOKEN)");
  o.tag_output = !f.get_bool("no-tag-output", "do not prefix output lines with [rank R]");
  o.max_restarts = static_cast<int>(f.get_int("max-restarts", 0, 0, 1000, "start every rank again after a failure, up to K times"));
  o.heartbeat_s = f.get_double("heartbeat", 10, 0, 1e6, "seconds a rank may be silent or stopped before it is hung (0: off)");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("-n N [options] -- PROGRAM [ARGS...]").c_str());
    return 0;
  }
  f.finish();
  DT_CHECK(o.transport == "auto" || o.transport == "shm" || o.transport == "tcp", InvalidArgument,
           "--transport must be auto, shm or tcp (got '" << o.transport << "')");
  return launch::launch(o, program);
}

}  // namespace dtrain::cli
