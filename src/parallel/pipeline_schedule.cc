// parallel/pipeline_schedule.cc — schedule generators, the simulator and the checker.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
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

// simulate() with the cores as a resource (see the header): list scheduling, first come first
// served, one stage's next instruction at a time in time order over the stages. A stage is
// queued once per instruction, when it reaches it and the message it waits for, if any, is
// sent.
SimResult simulate_on_cores(const PipeSchedule& s, const CostFn& cost, int units, int cores) {
  SimResult r = sized_result(s);
  const size_t P = static_cast<size_t>(s.stages);
  std::vector<size_t> pc(P, 0);
  std::vector<double> clock(P, 0.0);
  std::vector<int> in_flight(P, 0);
  std::vector<double> free_at(static_cast<size_t>(std::max(1, cores)), 0.0);  // each core's next free time
  const size_t need = static_cast<size_t>(std::clamp(units, 1, std::max(1, cores)));
  std::map<Key, double> sent;  // (gradient?, micro-batch, piece) -> when
  auto ready_at = [&](size_t st, double* t) {  // false: waits for a message not sent yet
    const PipeInstr& in = s.per_stage[st][pc[st]];
    *t = clock[st];
    if (in.op != PipeOp::kRecvAct && in.op != PipeOp::kRecvGrad) return true;
    auto it = sent.find({in.op == PipeOp::kRecvGrad, in.micro, s.piece(static_cast<int>(st), in.chunk)});
    if (it == sent.end()) return false;
    *t = std::max(*t, it->second);
    return true;
  };
  // Stages whose next instruction can run, by when (then by stage): each (stage, instruction)
  // is queued once, when the stage reaches it and its message, if it waits for one, is sent.
  using Ready = std::pair<double, size_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready;
  std::vector<bool> queued(P, false);
  auto enqueue = [&](size_t st) {
    double t = 0;
    if (!queued[st] && pc[st] < s.per_stage[st].size() && ready_at(st, &t)) ready.push({t, st}), queued[st] = true;
  };
  for (size_t st = 0; st < P; ++st) enqueue(st);
  while (!ready.empty()) {
    const auto [best_t, st] = ready.top();
    ready.pop();
    queued[st] = false;
    const PipeInstr& in = s.per_stage[st][pc[st]];
    const int piece = s.piece(static_cast<int>(st), in.chunk);
    double t = best_t;
    const double d = cost(static_cast<int>(st), in);
    const bool computes = in.op == PipeOp::kForward || in.op == PipeOp::kBackward;
    if (in.op == PipeOp::kRecvAct || in.op == PipeOp::kRecvGrad) sent.erase({in.op == PipeOp::kRecvGrad, in.micro, piece});
    if (computes) {
      // The `need` cores that free up first; it starts when the last of them is free. The
      // wait for them counts as the stage's compute (it is the cores' sharing, not the
      // schedule's bubble).
      std::sort(free_at.begin(), free_at.end());
      const double since = t;
      t = std::max(t, free_at[need - 1]);
      for (size_t k = 0; k < need; ++k) free_at[k] = t + d;
      r.busy[st] += d + (t - since);
    }
    r.start[st][pc[st]] = t;
    r.end[st][pc[st]] = t + d;
    clock[st] = t + d;
    if (in.op == PipeOp::kForward) r.max_in_flight[st] = std::max(r.max_in_flight[st], ++in_flight[st]);
    if (in.op == PipeOp::kBackward) --in_flight[st];
    ++pc[st];
    enqueue(st);
    if (in.op == PipeOp::kSendAct || in.op == PipeOp::kSendGrad) {
      const bool grad = in.op == PipeOp::kSendGrad;
      const int to = grad ? piece - 1 : piece + 1;
      sent[{grad, in.micro, to}] = clock[st];
      enqueue(static_cast<size_t>(s.stage_of(to)));
    }
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
