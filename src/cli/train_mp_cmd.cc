// cli/train_mp_cmd.cc — `dtrain train` for the GPT on a DP x TP x PP mesh (see train_mp.h).
//
// Flow: flags -> mesh shape from --strategy (tp: tp = N, pp: pp = N, zero: dp = N, hybrid:
// --dp/--tp/--pp with product N) -> with -n N > 1 relaunch this command on N local ranks ->
// every rank: load the text, build a GptTrainer, loop steps (evaluating every K), gather
// the dense model for the checkpoint, gather the timeline for the trace; rank 0 prints and
// writes the JSON.
#include <malloc.h>

#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/launch.h"
#include "cli/train_mp.h"
#include "coll/collectives.h"
#include "data/text.h"
#include "nn/transformer_sample.h"
#include "parallel/model_parallel.h"
#include "tensor/blas.h"
#include "trace/timeline.h"

namespace dtrain::cli {

bool wants_model_parallel(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& name) -> std::string {
      if (a == name && i + 1 < args.size()) return args[i + 1];
      if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
      return "";
    };
    const std::string model = value("--model"), strategy = value("--strategy");
    if (model.rfind("gpt", 0) == 0) return true;
    if (strategy == "tp" || strategy == "pp" || strategy == "zero" || strategy == "hybrid") return true;
  }
  return false;
}

namespace {

// Timeline spans from the trainer's Instrument, while `on`.
class TraceSink : public EventSink {
 public:
  TraceSink(int rank, double origin) : tl(rank, origin) {}
  void span(int track, const std::string& name, SpanKind kind, double t0, double t1, const std::string& args) override {
    if (on) tl.add(track, name, kind == SpanKind::kCompute ? "compute" : kind == SpanKind::kComm ? "comm" : "wait", t0, t1, args);
  }
  trace::Timeline tl;
  bool on = false;
};

// Every rank's serialized events to every rank (rank 0 writes them).
std::vector<trace::Event> gather_events(Communicator& world, const std::vector<trace::Event>& mine) {
  const std::string bytes = trace::serialize(mine);
  int64_t n = static_cast<int64_t>(bytes.size());
  std::vector<int64_t> sizes(static_cast<size_t>(world.size()));
  allgather(world, &n, sizes.data(), 1, DType::kInt64);
  std::vector<size_t> counts(sizes.begin(), sizes.end());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::string all(total, '\0');
  allgatherv(world, bytes.data(), all.data(), counts, DType::kUInt8);
  std::vector<trace::Event> out;
  size_t pos = 0;
  for (size_t c : counts) {
    auto part = trace::parse(all.substr(pos, c));
    out.insert(out.end(), part.begin(), part.end());
    pos += c;
  }
  return out;
}

// Fault injection for tests: DTRAIN_FAULT_KILL_STEP="R:S" makes rank R kill itself with
// SIGKILL when 0-based step S begins (a crash mid-pipeline, not an error exit).
int64_t fault_kill_step(int rank) {
  auto v = env_get("DTRAIN_FAULT_KILL_STEP");
  if (!v) return -1;
  const auto colon = v->find(':');
  if (colon == std::string::npos || std::atoi(v->substr(0, colon).c_str()) != rank) return -1;
  return std::atoll(v->substr(colon + 1).c_str());
}

nlohmann::json stats_json(const MpStats& s) {
  return {{"partition", s.bounds},
          {"bubble", {{"measured", s.bubble_measured}, {"replayed", s.bubble_replayed}, {"replayed_median", s.bubble_replayed_median},
                      {"formula", s.bubble_formula}, {"steps", s.steps_timed}}},
          {"max_in_flight", s.max_in_flight},
          {"peak_activation_bytes", s.peak_activation_bytes},
          {"bytes_rank0", {{"params", s.bytes.params}, {"grads", s.bytes.grads}, {"optimizer", s.bytes.optimizer}, {"total", s.bytes.total()}}},
          {"zero_comm_rank0", {{"allreduce", s.zero_comm.allreduce}, {"allgather", s.zero_comm.allgather},
                               {"reduce_scatter", s.zero_comm.reduce_scatter}, {"bus_bytes", s.zero_comm.bus_bytes}}},
          {"tp_collectives_rank0", {{"allreduce_fwd", s.tp.allreduce_fwd}, {"allreduce_bwd", s.tp.allreduce_bwd}, {"bytes", s.tp.bytes}}},
          {"local_params", s.local_params},
          {"model_params", s.model_params}};
}

}  // namespace

int train_mp_main(const Args& args) {
  Flags f("train", args);
  const std::string model = f.get_string("model", "gpt:layers=4,heads=4,width=128,context=64", "gpt:layers=L,heads=H,width=W,context=C");
  std::string data = f.get_string("data", "", "text:FILE (plain or gzipped; 90/10 train/validation split)");
  std::string strategy = f.get_string("strategy", "single", "single | tp | pp | zero | hybrid");
  const int ranks = static_cast<int>(f.get_int("ranks", 1, "local ranks (relaunches this command)", "n"));
  int dp = static_cast<int>(f.get_int("dp", 0, "data-parallel size (hybrid)"));
  int tp = static_cast<int>(f.get_int("tp", 0, "tensor-parallel size"));
  int pp = static_cast<int>(f.get_int("pp", 0, "pipeline stages"));
  MpConfig c;
  c.micro = static_cast<int>(f.get_int("microbatches", 1, "micro-batches per step (pipeline)"));
  c.schedule = f.get_string("schedule", "1f1b", "gpipe | 1f1b | interleaved");
  c.virtual_stages = static_cast<int>(f.get_int("virtual-stages", 1, "V model chunks per rank (interleaved)"));
  c.recompute = f.get_bool("recompute", "keep only stage inputs; recompute activations in the backward pass");
  c.zero = static_cast<int>(f.get_int("zero", strategy == "zero" ? 1 : 0, "ZeRO stage 0-3 over the data-parallel ranks"));
  int64_t steps = f.get_int("steps", 0, "optimizer steps (alternative to --epochs)");
  const int64_t epochs = f.get_int("epochs", 0, "passes over the training characters (batch x context per step)");
  c.batch = f.get_int("batch", 12, "sequences per step (whole job)");
  const float lr = static_cast<float>(f.get_double("lr", 1e-3, "peak learning rate (AdamW)"));
  const float min_lr = static_cast<float>(f.get_double("min-lr", 1e-4, "final learning rate of the cosine"));
  const int64_t warmup = f.get_int("warmup", 100, "linear warm-up steps");
  c.optimizer.weight_decay = static_cast<float>(f.get_double("weight-decay", 0.1, "AdamW decoupled weight decay"));
  c.optimizer.beta2 = static_cast<float>(f.get_double("beta2", 0.99, "AdamW beta2"));
  c.clip = static_cast<float>(f.get_double("clip", 1.0, "global gradient-norm clip (0: off)"));
  const int64_t eval_every = f.get_int("eval-every", 250, "steps between validation evaluations");
  c.eval_batches = f.get_int("eval-batches", 20, "batches per evaluation");
  c.balance = f.get_string("balance", "measured", "pipeline partition cost: measured (timed on rank 0, broadcast) | flops");
  c.seed = static_cast<uint64_t>(f.get_int("seed", 1337, "seed (init and data order)"));
  const std::string checkpoint = f.get_string("checkpoint", "", "write the trained dense model here (for dtrain generate)");
  const std::string json = f.get_string("json", "", "write the run's results as JSON");
  const std::string trace_path = f.get_string("trace", "", "Chrome trace-event timeline (one track per rank/stage)");
  const int64_t trace_steps = f.get_int("trace-steps", 3, "steps recorded in the trace (after the first)");
  const int64_t log_every = f.get_int("log-every", 50, "steps between progress lines");
  const int blas = static_cast<int>(f.get_int("blas-threads", 1, "OpenBLAS threads per rank"));
  const std::string transport = f.get_string("transport", "auto", "auto | shm | tcp");
  const double timeout = f.get_double("timeout", 300, "seconds any communication may wait");
  const bool quiet = f.get_bool("quiet", "only the summary");
  if (f.help_requested()) {
    std::printf("%s", f.help_text("--model gpt:... --data text:FILE [--strategy tp|pp|zero|hybrid -n N] ...").c_str());
    return 0;
  }
  f.finish();

  // Mesh from the strategy.
  if (strategy == "single") dp = dp ? dp : 1, tp = tp ? tp : 1, pp = pp ? pp : 1;
  else if (strategy == "tp") dp = dp ? dp : 1, pp = pp ? pp : 1, tp = tp ? tp : ranks / (dp * pp);
  else if (strategy == "pp") dp = dp ? dp : 1, tp = tp ? tp : 1, pp = pp ? pp : ranks / (dp * tp);
  else if (strategy == "zero") tp = tp ? tp : 1, pp = pp ? pp : 1, dp = dp ? dp : ranks / (tp * pp);
  else if (strategy == "hybrid") {
    DT_CHECK(dp && tp && pp, InvalidArgument, "--strategy hybrid needs --dp D --tp T --pp P with D x T x P = -n");
  } else {
    DT_THROW(InvalidArgument, "--strategy " << strategy << " is not a model-parallel strategy (single, tp, pp, zero, hybrid)");
  }
  DT_CHECK(dp >= 1 && tp >= 1 && pp >= 1 && dp * tp * pp == ranks, InvalidArgument,
           "--strategy " << strategy << ": dp " << dp << " x tp " << tp << " x pp " << pp << " must equal -n " << ranks);
  DT_CHECK(!data.empty(), InvalidArgument, "--data text:FILE is required (e.g. text:../shared/data/tinyshakespeare/input.txt.gz)");
  if (data.rfind("text:", 0) == 0) data = data.substr(5);
  DT_CHECK(steps > 0 || epochs > 0, InvalidArgument, "give --steps N or --epochs E");
  DT_CHECK(!(steps > 0 && epochs > 0), InvalidArgument, "give --steps or --epochs, not both");

  if (ranks > 1 && !inside_launched_rank()) {
    LaunchOptions lo;
    lo.nproc = ranks;
    lo.transport = transport;
    lo.timeout_s = timeout;
    lo.tag_output = false;
    return relaunch_command(lo, {"train"}, args);
  }
  set_blas_threads(blas);
  // Keep freed activation memory mapped between steps (glibc would otherwise return it and
  // fault it in again: GPipe's M live micro-batches then pay page faults every step).
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  auto world = Communicator::from_env();
  DT_CHECK(world->size() == ranks, InvalidArgument, "-n " << ranks << " but this job has " << world->size() << " ranks");
  const bool main_rank = world->rank() == 0;

  const data::TextData text = data::load_text(data);
  c.model = GptConfig::parse(model, static_cast<int64_t>(text.vocab.size()));
  c.mesh = {dp, tp, pp};
  const int64_t train_chars = static_cast<int64_t>(static_cast<double>(text.ids.size()) * 0.9);
  if (epochs > 0) steps = epochs * ((train_chars + c.batch * c.model.context - 1) / (c.batch * c.model.context));
  c.optimizer.lr = lr;
  c.lr = LrSchedule::warmup_cosine(lr, std::min(warmup, steps - 1), steps, min_lr);

  TraceSink sink(world->rank(), now_seconds());
  Instrument inst(&sink);
  GptTrainer trainer(*world, c, text, trace_path.empty() ? nullptr : &inst);
  if (main_rank && !quiet)
    std::printf("gpt %s: %lld parameters, vocab %zu, %lld train / %lld val chars; mesh dp %d x tp %d x pp %d (%s, M=%d, V=%d%s%s); %lld steps of %lld x %lld\n",
                c.model.spec().c_str(), static_cast<long long>(gpt_num_params(c.model)), text.vocab.size(),
                static_cast<long long>(train_chars), static_cast<long long>(text.ids.size() - train_chars), dp, tp, pp,
                c.schedule.c_str(), c.micro, c.virtual_stages, c.recompute ? ", recompute" : "",
                c.zero ? (", zero " + std::to_string(c.zero)).c_str() : "", static_cast<long long>(steps),
                static_cast<long long>(c.batch), static_cast<long long>(c.model.context));
  std::fflush(stdout);

  std::vector<float> losses;
  std::vector<std::pair<int64_t, float>> vals;
  double train_seconds = 0, window = 0;
  const int64_t kill_at = fault_kill_step(world->rank());
  for (int64_t s = 0; s < steps; ++s) {
    if (s == kill_at) ::raise(SIGKILL);
    sink.on = s >= 1 && s <= trace_steps;
    const double t0 = now_seconds();
    losses.push_back(trainer.step());
    const double dt = now_seconds() - t0;
    train_seconds += dt;
    window += dt;
    if (main_rank && !quiet && ((s + 1) % log_every == 0 || s == 0)) {
      std::printf("step %lld/%lld loss %.4f lr %.2e %.1f ms/step\n", static_cast<long long>(s + 1),
                  static_cast<long long>(steps), losses.back(), c.lr.at(s), 1e3 * window / (s == 0 ? 1 : log_every));
      std::fflush(stdout);
      window = 0;
    }
    if ((s + 1) % eval_every == 0 || s + 1 == steps) {
      vals.push_back({s + 1, trainer.evaluate()});
      if (main_rank && !quiet) std::printf("eval step %lld val_loss %.4f\n", static_cast<long long>(s + 1), vals.back().second);
      std::fflush(stdout);
    }
  }
  sink.on = false;
  MpStats st = trainer.stats();
  GptStage dense(c.model, 0, c.model.num_units());
  dense.allocate(0);
  trainer.gather_dense(dense);
  std::vector<trace::Event> events;
  if (!trace_path.empty()) events = gather_events(*world, sink.tl.events());
  if (!main_rank) return 0;

  const double tokens_per_s = static_cast<double>(steps * c.batch * c.model.context) / std::max(train_seconds, 1e-9);
  std::printf("trained %lld steps in %.1f s (%.1f ms/step, %.0f tokens/s): final train loss %.4f, val loss %.4f\n",
              static_cast<long long>(steps), train_seconds, 1e3 * train_seconds / static_cast<double>(steps), tokens_per_s,
              losses.back(), vals.back().second);
  if (pp > 1)
    std::printf("pipeline bubble: measured %.3f, replayed %.3f (stage medians %.3f), formula %.3f (%d steps); in flight per stage:",
                st.bubble_measured, st.bubble_replayed, st.bubble_replayed_median, st.bubble_formula, st.steps_timed);
  if (pp > 1) {
    for (size_t q = 0; q < st.max_in_flight.size(); ++q)
      std::printf(" %d (%.1f KiB)", st.max_in_flight[q], static_cast<double>(st.peak_activation_bytes[q]) / 1024.0);
    std::printf("\n");
  }
  std::printf("rank 0 model state: params %.2f MB, grads %.2f MB, optimizer %.2f MB (dense model %lld params = %.2f MB x 4)\n",
              st.bytes.params / 1e6, st.bytes.grads / 1e6, st.bytes.optimizer / 1e6, static_cast<long long>(st.model_params),
              st.model_params * 4 / 1e6);
  if (tp > 1)
    std::printf("tensor parallel: %lld all-reduces forward, %lld backward on rank 0\n", static_cast<long long>(st.tp.allreduce_fwd),
                static_cast<long long>(st.tp.allreduce_bwd));
  if (!checkpoint.empty()) {
    GptCheckpoint ck{c.model, text.vocab, steps, vals.back().second, {dense.param_span().begin(), dense.param_span().end()}};
    save_gpt_checkpoint(checkpoint, ck);
    std::printf("checkpoint: %s\n", checkpoint.c_str());
  }
  if (!trace_path.empty()) {
    trace::write_chrome_trace(trace_path, events, world->size());
    std::printf("trace: %s (%zu events)\n", trace_path.c_str(), events.size());
  }
  if (!json.empty()) {
    nlohmann::json j = {{"model", c.model.spec()}, {"params", gpt_num_params(c.model)}, {"strategy", strategy},
                        {"mesh", {{"dp", dp}, {"tp", tp}, {"pp", pp}}}, {"microbatches", c.micro}, {"schedule", c.schedule},
                        {"virtual_stages", c.virtual_stages}, {"recompute", c.recompute}, {"zero", c.zero},
                        {"steps", steps}, {"batch", c.batch}, {"train_seconds", train_seconds},
                        {"ms_per_step", 1e3 * train_seconds / static_cast<double>(steps)}, {"tokens_per_second", tokens_per_s},
                        {"losses", losses}, {"final_train_loss", losses.back()}, {"final_val_loss", vals.back().second},
                        {"stats", stats_json(st)}};
    for (auto& [s, v] : vals) j["val"].push_back({{"step", s}, {"loss", v}});
    std::ofstream out(json);
    DT_CHECK(out.good(), IoError, "cannot write " << json);
    out << j.dump(1) << "\n";
  }
  return 0;
}

}  // namespace dtrain::cli
