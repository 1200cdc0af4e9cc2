// parallel/pipeline.cc — the executor loop, balanced partitioning and bubble measurement.
#include "parallel/pipeline.h"

#include <time.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/error.h"

namespace dtrain {
namespace {

uint32_t make_tag(int64_t step, bool grad, int piece, int micro) {
  return (static_cast<uint32_t>(step & 0x7f) << 24) | (static_cast<uint32_t>(grad) << 23) |
         (static_cast<uint32_t>(piece & 0x3f) << 17) | static_cast<uint32_t>(micro);
}

// Bytes of the values a graph holds, leaving out views of parameter buffers.
int64_t graph_bytes(const Graph& g, const std::vector<std::span<const float>>& params) {
  int64_t bytes = 0;
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Tensor& v = g.value(id);
    if (!v.defined()) continue;
    const float* p = v.data();
    bool is_param = false;
    for (auto& s : params) is_param = is_param || (p >= s.data() && p < s.data() + s.size());
    if (!is_param) bytes += v.numel() * static_cast<int64_t>(sizeof(float));
  }
  return bytes;
}

struct Slot {  // one (micro-batch, chunk) in flight
  std::unique_ptr<Graph> graph;
  Var input, output;
  Tensor received;   // activation received (kept for recompute)
  std::vector<Tensor> checkpoints;  // recompute: each unit's input (unit 0's is `received`)
  Tensor grad_in;    // gradient received for the output
  Tensor out_value;  // the forward's output (sent on; survives a recompute graph's reset)
  int64_t bytes = 0;
};

struct Send {  // an activation or gradient on its way to the next or previous stage
  Tensor tensor;
  Request request;
  double t0;  // when it was sent
  const char* what;
};

class Executor {
 public:
  Executor(Communicator* pp, const PipeSchedule& s, PipelineModel& m, const PipelineOptions& o)
      : pp_(pp), s_(s), m_(m), o_(o), rank_(pp ? pp->rank() : 0), params_(m.param_buffers()) {
    DT_CHECK((pp ? pp->size() : 1) == s.stages, InvalidArgument,
             "pipeline: the schedule has " << s.stages << " stages but the pipeline group has " << (pp ? pp->size() : 1)
                                           << " ranks");
  }

  PipelineStats run(const std::function<void()>& step) {
    const auto& prog = s_.per_stage[static_cast<size_t>(rank_)];
    st_.t_begin = now_seconds();
    next_post_ = 0;
    post_ahead(prog, 2);
    for (size_t pc = 0; pc < prog.size(); ++pc) {
      const PipeInstr& in = prog[pc];
      const double t0 = now_seconds(), c0 = thread_cpu_seconds();
      exec(in, step);
      reap_sends();
      const double t1 = now_seconds();
      st_.timeline.push_back({in, t0, t1, thread_cpu_seconds() - c0});
      if (in.op == PipeOp::kForward || in.op == PipeOp::kBackward) {
        st_.busy_seconds += t1 - t0;
        if (o_.instrument)
          o_.instrument->compute((in.op == PipeOp::kForward ? "F" : "B") + std::to_string(in.micro) +
                                     (s_.chunks > 1 ? "." + std::to_string(in.chunk) : ""),
                                 t0, t1);
      } else if (in.op == PipeOp::kRecvAct || in.op == PipeOp::kRecvGrad) {
        st_.wait_seconds += t1 - t0;
        if (o_.instrument) o_.instrument->wait(in.op == PipeOp::kRecvAct ? "recv act" : "recv grad", t0, t1);
        post_ahead(prog, 1);
      }
    }
    st_.t_end = now_seconds();
    return std::move(st_);
  }

 private:
  int peer_of_piece(int piece) const { return s_.stage_of(piece); }
  static uint64_t key(bool grad, int micro, int chunk) { return (uint64_t{grad} << 40) | (uint64_t(chunk) << 20) | uint64_t(micro); }

  // Posts irecvs for up to `n` more receive instructions, in program order.
  void post_ahead(const std::vector<PipeInstr>& prog, int n) {
    while (n > 0 && next_post_ < prog.size()) {
      const PipeInstr& in = prog[next_post_++];
      if (in.op != PipeOp::kRecvAct && in.op != PipeOp::kRecvGrad) continue;
      const bool grad = in.op == PipeOp::kRecvGrad;
      const int piece = s_.piece(rank_, in.chunk);
      const int src = peer_of_piece(grad ? piece + 1 : piece - 1);
      Tensor buf = Tensor::empty(m_.activation_shape(grad ? piece : piece - 1));
      Request r;
      if (src != rank_) r = pp_->irecv(src, buf.data(), static_cast<size_t>(buf.numel()) * 4, make_tag(o_.step, grad, piece, in.micro));
      posted_[key(grad, in.micro, in.chunk)] = {buf, r};
      --n;
    }
  }

  Tensor receive(bool grad, int micro, int chunk) {
    auto it = posted_.find(key(grad, micro, chunk));
    DT_CHECK(it != posted_.end(), InvalidArgument, "pipeline: receive was not posted");
    auto [buf, req] = it->second;
    posted_.erase(it);
    if (req.valid()) {
      req.wait();
      return buf;
    }
    auto m = mailbox_.find(key(grad, micro, chunk));  // from this same rank
    DT_CHECK(m != mailbox_.end(), InvalidArgument, "pipeline: local message missing (schedule out of order)");
    Tensor t = m->second;
    mailbox_.erase(m);
    return t;
  }

  void send(bool grad, int micro, int from_chunk, const Tensor& t) {
    const int piece = s_.piece(rank_, from_chunk);
    const int dst_piece = grad ? piece - 1 : piece + 1;
    const int dst = peer_of_piece(dst_piece);
    Tensor c = t.contiguous();
    if (dst == rank_) {
      mailbox_[key(grad, micro, s_.chunk_of(dst_piece))] = c.clone();
      return;
    }
    const size_t bytes = static_cast<size_t>(c.numel()) * 4;
    sends_.push_back({c, pp_->isend(dst, c.data(), bytes, make_tag(o_.step, grad, dst_piece, micro)), now_seconds(),
                      grad ? "send grad" : "send act"});
  }

  // A send the transport is done with: communication in flight from its isend until now,
  // beside the training thread (track 1), with its bytes.
  void sent(const Send& s) {
    if (o_.instrument)
      o_.instrument->comm(1, s.what, s.t0, now_seconds(), s.tensor.numel() * 4,
                          "\"bytes\":" + std::to_string(s.tensor.numel() * 4));
  }

  // Drops the sends the transport is done with, so that a sent activation or gradient is
  // freed then and not at the step's end: holding all of them kept 2 x micro tensors of a
  // stage's output size alive (2.1 MB of 18.7 on the busiest stage of the 8-stage GPT of
  // docs/history/planner.md's tables, 16 micro-batches). wait() on a finished request only rethrows
  // its error, if any.
  void reap_sends() {
    size_t kept = 0;
    for (auto& s : sends_) {
      if (s.request.test()) {
        s.request.wait();
        sent(s);
      } else {
        sends_[kept++] = std::move(s);
      }
    }
    sends_.resize(kept);
  }

  int64_t live_bytes() const {
    int64_t b = 0;
    for (auto& [k, s] : slots_) b += s.bytes;
    return b;
  }

  Tensor loss_seed(const Var& loss) const {  // the loss is the mean over the M micro-batches
    return Tensor::full(loss.value().shape(), 1.0f / static_cast<float>(s_.micro));
  }

  static int64_t checkpoint_bytes(const Slot& sl) {
    int64_t b = 0;
    for (const Tensor& t : sl.checkpoints)
      if (t.defined()) b += t.numel() * static_cast<int64_t>(sizeof(float));
    return b;
  }

  // Recompute's forward: the units in order, each on its own graph that records nothing (so
  // a unit's intermediate values go with it), each unit's input kept as its checkpoint.
  // Returns the chunk's output.
  Tensor run_checkpointed(Slot& sl, int micro, int chunk) {
    const int n = m_.units(chunk);
    sl.checkpoints.assign(static_cast<size_t>(n), Tensor());
    Tensor h = sl.received;
    for (int u = 0; u < n; ++u) {
      sl.checkpoints[static_cast<size_t>(u)] = h;
      Graph g(nullptr, false);
      h = m_.forward_unit(g, chunk, micro, u, h.defined() ? g.leaf(h, false) : Var()).value();
    }
    return h;
  }

  // Recompute's backward: from the last unit to the first, re-run the unit from its
  // checkpoint on a recording graph, backpropagate its output's gradient, carry its input's
  // gradient to the unit before. Leaves the chunk input's gradient in sl.grad_in.
  void backward_checkpointed(Slot& sl, int micro, int chunk, bool last) {
    const int n = m_.units(chunk);
    Tensor grad = sl.grad_in;
    for (int u = n - 1; u >= 0; --u) {
      Tensor& cp = sl.checkpoints[static_cast<size_t>(u)];
      Graph g(nullptr, true);
      Var in = cp.defined() ? g.leaf(cp) : Var();
      Var out = m_.forward_unit(g, chunk, micro, u, in);
      st_.peak_activation_bytes = std::max(st_.peak_activation_bytes, live_bytes() + graph_bytes(g, params_));
      g.backward(out, last && u == n - 1 ? loss_seed(out) : grad);
      grad = in.defined() ? in.grad().clone() : Tensor();
      cp = Tensor();
      sl.bytes = checkpoint_bytes(sl);
    }
    sl.grad_in = grad;
  }

  Var run_forward(Slot& sl, int micro, int chunk) {
    sl.graph = std::make_unique<Graph>();
    sl.input = sl.received.defined() ? sl.graph->leaf(sl.received) : Var();
    sl.output = m_.forward(*sl.graph, chunk, micro, sl.input);
    return sl.output;
  }

  void exec(const PipeInstr& in, const std::function<void()>& step) {
    const uint64_t k = key(false, in.micro, in.chunk);
    const bool last = s_.piece(rank_, in.chunk) == s_.pieces() - 1;
    switch (in.op) {
      case PipeOp::kRecvAct: slots_[k].received = receive(false, in.micro, in.chunk); break;
      case PipeOp::kRecvGrad: slots_[k].grad_in = receive(true, in.micro, in.chunk); break;
      case PipeOp::kForward: {
        Slot& sl = slots_[k];
        sl.out_value = o_.recompute ? run_checkpointed(sl, in.micro, in.chunk) : run_forward(sl, in.micro, in.chunk).value();
        if (last) {
          st_.loss_sum += sl.out_value.item();
          ++st_.losses;
        }
        sl.bytes = o_.recompute ? checkpoint_bytes(sl) : graph_bytes(*sl.graph, params_);
        ++in_flight_;
        st_.max_in_flight = std::max(st_.max_in_flight, in_flight_);
        st_.peak_activation_bytes = std::max(st_.peak_activation_bytes, live_bytes());
        break;
      }
      case PipeOp::kSendAct: send(false, in.micro, in.chunk, slots_.at(k).out_value);
        slots_.at(k).out_value = Tensor();
        break;
      case PipeOp::kBackward: {
        Slot& sl = slots_.at(k);
        if (o_.recompute) {
          backward_checkpointed(sl, in.micro, in.chunk, last);
        } else {
          if (last) sl.graph->backward(sl.output, loss_seed(sl.output));
          else sl.graph->backward(sl.output, sl.grad_in);
          if (sl.input.defined()) sl.grad_in = sl.input.grad().clone();  // reuse the slot for the outgoing gradient
          else sl.grad_in = Tensor();
        }
        sl.graph.reset();
        sl.output = Var();
        sl.received = Tensor();
        sl.bytes = 0;
        --in_flight_;
        break;
      }
      case PipeOp::kSendGrad: {
        Slot& sl = slots_.at(k);
        send(true, in.micro, in.chunk, sl.grad_in);
        slots_.erase(k);
        break;
      }
      case PipeOp::kStep: {
        const double t0 = now_seconds();
        for (auto& s : sends_) {
          s.request.wait();
          sent(s);
        }
        const bool waited = !sends_.empty();
        sends_.clear();
        const double t1 = now_seconds();
        st_.wait_seconds += t1 - t0;
        if (o_.instrument && waited) o_.instrument->wait("wait:sends", t0, t1);
        slots_.clear();
        if (step) step();
        break;
      }
    }
  }

  Communicator* pp_;
  const PipeSchedule& s_;
  PipelineModel& m_;
  PipelineOptions o_;
  int rank_;
  std::vector<std::span<const float>> params_;
  PipelineStats st_;
  size_t next_post_ = 0;
  int in_flight_ = 0;
  std::map<uint64_t, Slot> slots_;
  std::map<uint64_t, std::pair<Tensor, Request>> posted_;
  std::map<uint64_t, Tensor> mailbox_;
  std::vector<Send> sends_;
};

}  // namespace

PipelineStats run_pipeline(Communicator* pp, const PipeSchedule& schedule, PipelineModel& model,
                           const PipelineOptions& options, const std::function<void()>& optimizer_step) {
  Executor e(pp, schedule, model, options);
  return e.run(optimizer_step);
}

// Linear partition by dynamic programming: best[i][j] = the smallest possible largest part
// when the first i units form j parts. O(n^2 parts), n is the number of layers.
std::vector<int> balanced_partition(const std::vector<double>& costs, int parts) {
  const int n = static_cast<int>(costs.size());
  DT_CHECK(parts >= 1 && parts <= n, InvalidArgument,
           "cannot cut " << n << " layers (embedding, blocks, head) into " << parts
                         << " pipeline pieces: each piece needs at least one (use fewer stages or virtual stages, or more layers)");
  std::vector<double> prefix(static_cast<size_t>(n + 1), 0.0);
  for (int i = 0; i < n; ++i) prefix[static_cast<size_t>(i + 1)] = prefix[static_cast<size_t>(i)] + costs[static_cast<size_t>(i)];
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<size_t>(n + 1), std::vector<double>(static_cast<size_t>(parts + 1), inf));
  std::vector<std::vector<int>> cut(static_cast<size_t>(n + 1), std::vector<int>(static_cast<size_t>(parts + 1), 0));
  best[0][0] = 0;
  for (int j = 1; j <= parts; ++j)
    for (int i = j; i <= n; ++i)
      for (int k = j - 1; k < i; ++k) {
        const double v = std::max(best[static_cast<size_t>(k)][static_cast<size_t>(j - 1)],
                                  prefix[static_cast<size_t>(i)] - prefix[static_cast<size_t>(k)]);
        if (v < best[static_cast<size_t>(i)][static_cast<size_t>(j)]) {
          best[static_cast<size_t>(i)][static_cast<size_t>(j)] = v;
          cut[static_cast<size_t>(i)][static_cast<size_t>(j)] = k;
        }
      }
  std::vector<int> bounds(static_cast<size_t>(parts + 1), 0);
  bounds[static_cast<size_t>(parts)] = n;
  for (int j = parts, i = n; j > 0; --j) {
    i = cut[static_cast<size_t>(i)][static_cast<size_t>(j)];
    bounds[static_cast<size_t>(j - 1)] = i;
  }
  return bounds;
}

double measured_bubble(const std::vector<std::vector<InstrTiming>>& timelines) {
  double begin = std::numeric_limits<double>::infinity(), end = -begin;
  std::vector<double> busy;
  for (const auto& tl : timelines) {
    double b = 0;
    for (const InstrTiming& t : tl) {
      if (t.instr.op != PipeOp::kForward && t.instr.op != PipeOp::kBackward) continue;
      begin = std::min(begin, t.t0);
      end = std::max(end, t.t1);
      b += t.t1 - t.t0;
    }
    busy.push_back(b);
  }
  if (busy.empty() || end <= begin) return 0;
  double sum = 0;
  for (double b : busy) sum += 1.0 - b / (end - begin);
  return sum / static_cast<double>(busy.size());
}

double replayed_bubble(const PipeSchedule& schedule, const std::vector<std::vector<InstrTiming>>& timelines, bool median) {
  std::vector<std::map<std::tuple<int, int, int>, double>> cpu(timelines.size());
  std::vector<std::map<int, double>> typical(timelines.size());  // per stage: op -> median
  for (size_t s = 0; s < timelines.size(); ++s) {
    std::map<int, std::vector<double>> by_op;
    for (const InstrTiming& t : timelines[s]) {
      cpu[s][{static_cast<int>(t.instr.op), t.instr.micro, t.instr.chunk}] = t.cpu;
      by_op[static_cast<int>(t.instr.op)].push_back(t.cpu);
    }
    for (auto& [op, v] : by_op) {
      std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
      typical[s][op] = v[v.size() / 2];
    }
  }
  SimResult r = simulate(schedule, [&](int stage, const PipeInstr& i) {
    if (i.op != PipeOp::kForward && i.op != PipeOp::kBackward) return 0.0;
    const size_t st = static_cast<size_t>(stage);
    if (median) {
      auto it = typical[st].find(static_cast<int>(i.op));
      return it == typical[st].end() ? 0.0 : it->second;
    }
    auto it = cpu[st].find({static_cast<int>(i.op), i.micro, i.chunk});
    return it == cpu[st].end() ? 0.0 : it->second;
  });
  DT_CHECK(r.ok, InvalidArgument, "replayed_bubble: " << r.error);
  return r.bubble();
}

}  // namespace dtrain
