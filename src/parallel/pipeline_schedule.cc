// parallel/pipeline_schedule.cc — schedule generators, the simulator and the checker.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "base/error.h"

namespace dtrain {

const char* pipe_op_name(PipeOp op) {
  switch (op) {
    case PipeOp::kRecvAct: return "RecvAct";
    case PipeOp::kForward: return "Forward";
    case PipeOp::kSendAct: return "SendAct";
    case PipeOp::kRecvGrad: return "RecvGrad";
    case PipeOp::kBackward: return "Backward";
    case PipeOp::kSendGrad: return "SendGrad";
    case PipeOp::kStep: return "OptimizerStep";
  }
  return "?";
}

std::string PipeSchedule::describe(bool with_comm) const {
  std::ostringstream os;
  for (int s = 0; s < stages; ++s) {
    os << "s" << s << ":";
    for (const PipeInstr& i : per_stage[static_cast<size_t>(s)]) {
      const bool comm = i.op != PipeOp::kForward && i.op != PipeOp::kBackward && i.op != PipeOp::kStep;
      if (comm && !with_comm) continue;
      switch (i.op) {
        case PipeOp::kForward: os << " F"; break;
        case PipeOp::kBackward: os << " B"; break;
        case PipeOp::kStep: os << " STEP"; continue;
        default: os << " " << pipe_op_name(i.op);
      }
      os << i.micro;
      if (chunks > 1) os << "." << i.chunk;
    }
    os << "\n";
  }
  return os.str();
}

namespace {

void check_sizes(int stages, int micro, int chunks) {
  DT_CHECK(stages >= 1 && micro >= 1 && chunks >= 1, InvalidArgument,
           "pipeline: stages " << stages << ", micro-batches " << micro << ", virtual stages " << chunks
                               << " must all be at least 1");
  DT_CHECK(micro < (1 << 17) && chunks < 64, InvalidArgument, "pipeline: too many micro-batches or virtual stages");
}

struct Emitter {
  PipeSchedule& s;
  void forward(int stage, int m, int c) {
    auto& v = s.per_stage[static_cast<size_t>(stage)];
    const int p = s.piece(stage, c);
    if (p > 0) v.push_back({PipeOp::kRecvAct, m, c});
    v.push_back({PipeOp::kForward, m, c});
    if (p < s.pieces() - 1) v.push_back({PipeOp::kSendAct, m, c});
  }
  void backward(int stage, int m, int c) {
    auto& v = s.per_stage[static_cast<size_t>(stage)];
    const int p = s.piece(stage, c);
    if (p < s.pieces() - 1) v.push_back({PipeOp::kRecvGrad, m, c});
    v.push_back({PipeOp::kBackward, m, c});
    if (p > 0) v.push_back({PipeOp::kSendGrad, m, c});
  }
  void step(int stage) { s.per_stage[static_cast<size_t>(stage)].push_back({PipeOp::kStep, 0, 0}); }
};

PipeSchedule blank(const char* kind, int stages, int micro, int chunks) {
  check_sizes(stages, micro, chunks);
  PipeSchedule s;
  s.kind = kind;
  s.stages = stages;
  s.micro = micro;
  s.chunks = chunks;
  s.per_stage.resize(static_cast<size_t>(stages));
  return s;
}

}  // namespace

PipeSchedule make_gpipe(int stages, int micro) {
  PipeSchedule s = blank("gpipe", stages, micro, 1);
  Emitter e{s};
  for (int st = 0; st < stages; ++st) {
    for (int m = 0; m < micro; ++m) e.forward(st, m, 0);
    for (int m = 0; m < micro; ++m) e.backward(st, m, 0);
    e.step(st);
  }
  return s;
}

PipeSchedule make_1f1b(int stages, int micro) {
  PipeSchedule s = blank("1f1b", stages, micro, 1);
  Emitter e{s};
  for (int st = 0; st < stages; ++st) {
    const int warm = std::min(stages - st - 1, micro);
    for (int m = 0; m < warm; ++m) e.forward(st, m, 0);
    for (int i = 0; i < micro - warm; ++i) {
      e.forward(st, warm + i, 0);
      e.backward(st, i, 0);
    }
    for (int m = micro - warm; m < micro; ++m) e.backward(st, m, 0);
    e.step(st);
  }
  return s;
}

// Unit k of a rank's M*V forward units: micro-batches in groups of P, each group run chunk
// by chunk. Backward unit k is the same micro-batch with the chunk order reversed.
PipeSchedule make_interleaved(int stages, int micro, int chunks) {
  if (chunks == 1) {
    PipeSchedule s = make_1f1b(stages, micro);
    s.kind = "interleaved";
    return s;
  }
  DT_CHECK(micro % stages == 0, InvalidArgument,
           "interleaved schedule: micro-batches (" << micro << ") must be a multiple of the pipeline stages (" << stages
                                                   << ") when --virtual-stages > 1");
  PipeSchedule s = blank("interleaved", stages, micro, chunks);
  Emitter e{s};
  const int total = micro * chunks, group = stages * chunks;
  auto micro_of = [&](int k) { return (k / group) * stages + k % stages; };
  auto chunk_of = [&](int k) { return (k % group) / stages; };
  for (int st = 0; st < stages; ++st) {
    const int warm = std::min((stages - st - 1) * 2 + (chunks - 1) * stages, total);
    int f = 0, b = 0;
    for (; f < warm; ++f) e.forward(st, micro_of(f), chunk_of(f));
    while (f < total) {
      e.forward(st, micro_of(f), chunk_of(f));
      ++f;
      e.backward(st, micro_of(b), chunks - 1 - chunk_of(b));
      ++b;
    }
    for (; b < total; ++b) e.backward(st, micro_of(b), chunks - 1 - chunk_of(b));
    e.step(st);
  }
  return s;
}

PipeSchedule make_schedule(const std::string& kind, int stages, int micro, int chunks) {
  if (kind == "gpipe" || kind == "1f1b") {
    DT_CHECK(chunks == 1, InvalidArgument, "--virtual-stages " << chunks << " needs --schedule interleaved, not " << kind);
    return kind == "gpipe" ? make_gpipe(stages, micro) : make_1f1b(stages, micro);
  }
  if (kind == "interleaved") return make_interleaved(stages, micro, chunks);
  DT_THROW(InvalidArgument, "unknown pipeline schedule '" << kind << "' (gpipe, 1f1b, interleaved)");
}

double unit_cost(int, const PipeInstr& i) {
  return i.op == PipeOp::kForward ? 1.0 : i.op == PipeOp::kBackward ? 2.0 : 0.0;
}

double SimResult::bubble() const {
  if (busy.empty() || makespan <= 0) return 0;
  double b = 0;
  for (double x : busy) b += 1.0 - x / makespan;
  return b / static_cast<double>(busy.size());
}

namespace {
// Message key: (is_grad, micro, destination piece).
using Key = std::tuple<int, int, int>;

std::string where(int stage, size_t pc, const PipeInstr& i) {
  std::ostringstream os;
  os << "stage " << stage << " instruction " << pc << " (" << pipe_op_name(i.op) << " micro-batch " << i.micro << " chunk "
     << i.chunk << ")";
  return os.str();
}
}  // namespace

namespace {
// A result sized to s (every start, end and busy time 0), not yet ok: what a simulation fills.
SimResult sized_result(const PipeSchedule& s) {
  SimResult r;
  const size_t P = static_cast<size_t>(s.stages);
  r.start.assign(P, {});
  r.end.assign(P, {});
  r.busy.assign(P, 0.0);
  r.max_in_flight.assign(P, 0);
  for (size_t st = 0; st < P; ++st) {
    r.start[st].assign(s.per_stage[st].size(), 0.0);
    r.end[st].assign(s.per_stage[st].size(), 0.0);
  }
  return r;
}
}  // namespace

SimResult simulate(const PipeSchedule& s, const CostFn& cost) {
  SimResult r = sized_result(s);
  const size_t P = static_cast<size_t>(s.stages);
  std::vector<size_t> pc(P, 0);
  std::vector<double> clock(P, 0.0);
  std::vector<int> in_flight(P, 0);
  std::map<Key, double> sent;  // available messages and when they were sent
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t st = 0; st < P; ++st) {
      const auto& prog = s.per_stage[st];
      while (pc[st] < prog.size()) {
        const PipeInstr& in = prog[pc[st]];
        const int piece = s.piece(static_cast<int>(st), in.chunk);
        double t = clock[st];
        if (in.op == PipeOp::kRecvAct || in.op == PipeOp::kRecvGrad) {
          auto it = sent.find(Key{in.op == PipeOp::kRecvGrad, in.micro, piece});
          if (it == sent.end()) break;  // blocked until the send runs
          t = std::max(t, it->second);
          sent.erase(it);
        }
        const double d = cost(static_cast<int>(st), in);
        r.start[st][pc[st]] = t;
        r.end[st][pc[st]] = t + d;
        clock[st] = t + d;
        if (in.op == PipeOp::kForward || in.op == PipeOp::kBackward) r.busy[st] += d;
        if (in.op == PipeOp::kForward) r.max_in_flight[st] = std::max(r.max_in_flight[st], ++in_flight[st]);
        if (in.op == PipeOp::kBackward) --in_flight[st];
        if (in.op == PipeOp::kSendAct) {
          DT_CHECK(piece + 1 < s.pieces(), InvalidArgument, "SendAct from the last piece at " << where(int(st), pc[st], in));
          if (!sent.emplace(Key{0, in.micro, piece + 1}, clock[st]).second) {
            r.error = "duplicate send at " + where(static_cast<int>(st), pc[st], in);
            return r;
          }
        }
        if (in.op == PipeOp::kSendGrad) {
          DT_CHECK(piece > 0, InvalidArgument, "SendGrad from the first piece at " << where(int(st), pc[st], in));
          if (!sent.emplace(Key{1, in.micro, piece - 1}, clock[st]).second) {
            r.error = "duplicate send at " + where(static_cast<int>(st), pc[st], in);
            return r;
          }
        }
        ++pc[st];
        progress = true;
      }
    }
  }
  std::ostringstream stuck;
  for (size_t st = 0; st < P; ++st)
    if (pc[st] < s.per_stage[st].size()) stuck << "; " << where(static_cast<int>(st), pc[st], s.per_stage[st][pc[st]]) << " waits";
  if (!stuck.str().empty()) {
    r.error = "deadlock: no stage can proceed" + stuck.str() + " for a message that is never sent before it";
    return r;
  }
  if (!sent.empty()) {
    const auto& [g, m, p] = sent.begin()->first;
    std::ostringstream os;
    os << "unmatched send: " << (g ? "gradient" : "activation") << " of micro-batch " << m << " to piece " << p
       << " (stage " << s.stage_of(p) << ") is never received";
    r.error = os.str();
    return r;
  }
  for (size_t st = 0; st < P; ++st) r.makespan = std::max(r.makespan, clock[st]);
  r.ok = true;
  return r;
}

double scheduler_slice_s(int cpus) {
  int log2 = 0;
  for (int n = std::clamp(cpus, 1, 8); n > 1; n >>= 1) ++log2;
  return 0.75e-3 * (1 + log2);
}

// simulate() on cores the kernel time-shares (see the header), in slices. Each slice, the
// stages computing that have had the least CPU so far in the step take the cores (each
// needs `units` of them; ties go to the lower stage), and run until the slice ends, one of
// them finishes, or a stage waiting on its clock or a message can go on. At each such event
// every stage not computing runs what takes no core (sends cost their time on the stage's
// clock, receives wait for their message) up to its next forward or backward, which then
// asks for the cores.
//
// Why the least CPU first: the kernel's fair scheduler (CFS, and EEVDF since Linux 6.6)
// gives the CPU to the runnable tasks that are owed the most, and a rank that slept waiting
// for a message is owed more than one that kept computing. Traced on the 2-vCPU EPYC VM
// (Linux 6.18; 4 ranks, 1f1b pp4 m8 of the 6x128 GPT, whose middle stages hold two blocks
// and the outer ones one): the outer stages' forwards and backwards took their solo time
// (1.0-1.1 ms, 1.4-1.6 ms) while the middle stages' backwards stretched from 2.9 to
// 5.4-7.3 ms, and the step took 72-79 ms where first come, first served (each instruction
// holding its core to the end) predicted 69.0 and this 73.3 (2026-11-30).
SimResult simulate_on_cores(const PipeSchedule& s, const CostFn& cost, int units, int cores, double slice_s) {
  SimResult r = sized_result(s);
  const size_t P = static_cast<size_t>(s.stages);
  const int slots = std::max(1, std::max(1, cores) / std::clamp(units, 1, std::max(1, cores)));
  auto computes = [](const PipeInstr& in) { return in.op == PipeOp::kForward || in.op == PipeOp::kBackward; };
  // Every instruction's duration, once. A slice no shorter than 1/4096 of the work per slot,
  // so a long step takes at most a few thousand slices (the planner simulates thousands of
  // layouts).
  std::vector<std::vector<double>> took(P);
  double work = 0;
  for (size_t st = 0; st < P; ++st)
    for (const PipeInstr& in : s.per_stage[st]) {
      took[st].push_back(cost(static_cast<int>(st), in));
      if (computes(in)) work += took[st].back();
    }
  const double slice = std::max({slice_s > 0 ? slice_s : scheduler_slice_s(cores), work / slots / 4096, 1e-12});
  std::vector<size_t> pc(P, 0);
  std::vector<double> clock(P, 0.0), left(P, -1.0), attained(P, 0.0);  // left: -1 when not computing
  std::vector<int> in_flight(P, 0);
  std::map<Key, double> sent;
  std::vector<size_t> running;
  double now = 0;
  for (;;) {
    // Every stage not computing goes as far as it can at `now` (again while one sends what
    // another waits for); `soonest` is the earliest time one of them can go on (its clock
    // after a send, a message sent later).
    double soonest = std::numeric_limits<double>::infinity();
    for (bool moved = true; moved;) {
      moved = false;
      soonest = std::numeric_limits<double>::infinity();
      for (size_t st = 0; st < P; ++st) {
        const auto& prog = s.per_stage[st];
        while (left[st] < 0 && pc[st] < prog.size()) {
          const PipeInstr& in = prog[pc[st]];
          const int piece = s.piece(static_cast<int>(st), in.chunk);
          const bool receives = in.op == PipeOp::kRecvAct || in.op == PipeOp::kRecvGrad;
          double t = clock[st];
          auto msg = sent.end();
          if (receives) {
            msg = sent.find(Key{in.op == PipeOp::kRecvGrad, in.micro, piece});
            if (msg == sent.end()) break;  // until its send runs
            t = std::max(t, msg->second);
          }
          if (t > now) {
            soonest = std::min(soonest, t);
            break;
          }
          if (receives) sent.erase(msg);
          moved = true;
          const double d = took[st][pc[st]];
          r.start[st][pc[st]] = now;
          if (computes(in)) {
            if (in.op == PipeOp::kForward) r.max_in_flight[st] = std::max(r.max_in_flight[st], ++in_flight[st]);
            if (in.op == PipeOp::kBackward) --in_flight[st];
            left[st] = d;
            break;
          }
          r.end[st][pc[st]] = clock[st] = now + d;
          if (in.op == PipeOp::kSendAct || in.op == PipeOp::kSendGrad) {
            const bool grad = in.op == PipeOp::kSendGrad;
            sent[{grad, in.micro, grad ? piece - 1 : piece + 1}] = clock[st];
          }
          ++pc[st];
        }
      }
    }
    running.clear();
    for (size_t st = 0; st < P; ++st)
      if (left[st] >= 0) running.push_back(st);
    if (running.empty() && soonest == std::numeric_limits<double>::infinity()) break;  // done, or stuck
    std::stable_sort(running.begin(), running.end(), [&](size_t a, size_t b) { return attained[a] < attained[b]; });
    double next = soonest;
    if (running.size() > static_cast<size_t>(slots)) {  // more ask than the cores hold: a slice
      running.resize(static_cast<size_t>(slots));
      next = std::min(next, now + slice);
    }
    for (size_t st : running) next = std::min(next, now + left[st]);
    for (size_t st : running) {
      attained[st] += next - now;
      left[st] -= next - now;
      if (left[st] > 1e-12 * std::max(1.0, next)) continue;
      r.end[st][pc[st]] = clock[st] = next;
      r.busy[st] += next - r.start[st][pc[st]];
      left[st] = -1;
      ++pc[st];
    }
    now = next;
  }
  for (size_t st = 0; st < P; ++st) {
    if (pc[st] < s.per_stage[st].size()) {
      r.error = "stage " + std::to_string(st) + " cannot proceed (a receive that is never sent)";
      return r;
    }
    r.makespan = std::max(r.makespan, clock[st]);
  }
  r.ok = true;
  return r;
}

// Structural checks (1-3 of the contract), then the simulation (4).
std::string check_schedule(const PipeSchedule& s) {
  if (static_cast<int>(s.per_stage.size()) != s.stages) return "schedule has the wrong number of stage lists";
  for (int st = 0; st < s.stages; ++st) {
    const auto& prog = s.per_stage[static_cast<size_t>(st)];
    std::map<std::pair<int, int>, size_t> fwd, bwd;
    std::map<std::tuple<int, int, int>, size_t> pos;  // (op, micro, chunk) -> index
    for (size_t i = 0; i < prog.size(); ++i) {
      const PipeInstr& in = prog[i];
      if (in.op == PipeOp::kStep) {
        if (i + 1 != prog.size()) return where(st, i, in) + ": the optimizer step must be the last instruction";
        continue;
      }
      if (in.micro < 0 || in.micro >= s.micro || in.chunk < 0 || in.chunk >= s.chunks)
        return where(st, i, in) + ": micro-batch or chunk out of range";
      if (!pos.emplace(std::make_tuple(static_cast<int>(in.op), in.micro, in.chunk), i).second)
        return where(st, i, in) + ": appears twice";
    }
    if (prog.empty() || prog.back().op != PipeOp::kStep) return "stage " + std::to_string(st) + " has no final optimizer step";
    auto find = [&](PipeOp op, int m, int c) -> long {
      auto it = pos.find(std::make_tuple(static_cast<int>(op), m, c));
      return it == pos.end() ? -1 : static_cast<long>(it->second);
    };
    for (int c = 0; c < s.chunks; ++c)
      for (int m = 0; m < s.micro; ++m) {
        const int piece = s.piece(st, c);
        const bool first = piece == 0, last = piece == s.pieces() - 1;
        const long f = find(PipeOp::kForward, m, c), b = find(PipeOp::kBackward, m, c);
        const std::string id = "stage " + std::to_string(st) + " micro-batch " + std::to_string(m) + " chunk " + std::to_string(c);
        if (f < 0 || b < 0) return id + ": missing Forward or Backward";
        if (b < f) return id + ": Backward before Forward";
        const long ra = find(PipeOp::kRecvAct, m, c), sa = find(PipeOp::kSendAct, m, c);
        const long rg = find(PipeOp::kRecvGrad, m, c), sg = find(PipeOp::kSendGrad, m, c);
        if (first != (ra < 0) || first != (sg < 0)) return id + ": RecvAct/SendGrad present iff not the first piece";
        if (last != (sa < 0) || last != (rg < 0)) return id + ": SendAct/RecvGrad present iff not the last piece";
        if (!first && (ra > f || sg < b)) return id + ": RecvAct must precede Forward and SendGrad follow Backward";
        if (!last && (sa < f || rg > b)) return id + ": SendAct must follow Forward and RecvGrad precede Backward";
      }
    if (pos.size() + 1 != prog.size()) return "stage " + std::to_string(st) + " has instructions for unknown work";
  }
  SimResult r = simulate(s);
  return r.ok ? "" : r.error;
}

double bubble_formula(const std::string& kind, int stages, int micro, int chunks) {
  if (kind == "interleaved") {
    const double r = (1.0 / chunks) * (stages - 1) / static_cast<double>(micro);
    return r / (1.0 + r);
  }
  return (stages - 1) / static_cast<double>(micro + stages - 1);
}

}  // namespace dtrain
