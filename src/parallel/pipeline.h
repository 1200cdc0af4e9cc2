// parallel/pipeline.h — the pipeline executor: interprets a PipeSchedule on one rank.
//
// Each rank holds V model chunks (PipelineModel) and walks its instruction list:
//   RecvAct   wait for the activation of (micro-batch, chunk) from the previous piece's rank
//   Forward   run the chunk on a fresh Graph (input = the received activation as a leaf
//             that wants a gradient); keep the graph until the Backward
//   SendAct   isend the output (non-blocking: the transport buffers it, the rank moves on to
//             its next instruction, so sends overlap compute)
//   RecvGrad  wait for the gradient of the output from the next piece's rank
//   Backward  backward through the kept graph, seeded with that gradient (or, on the last
//             piece, with 1/M: the loss is the mean over the M micro-batches); parameter
//             gradients ADD into the model's gradient buffer (GradMode::kAccumulate), so after
//             the last Backward it holds the minibatch gradient
//   SendGrad  isend the input's gradient back
//   OptimizerStep  wait for this rank's outstanding sends, then call the step callback
// Receives are posted ahead (irecv for the next two receive instructions), so an arriving
// activation lands while the rank still computes.
//
// Recompute (activation checkpointing, per unit as Megatron's full recompute): Forward runs
// the chunk's units one after another on a graph that records nothing, keeping only each
// unit's input (the checkpoints; the first unit's is the received activation). Backward walks
// the units from the last: it re-runs one unit's forward with recording from its checkpoint,
// backpropagates the gradient of that unit's output through it, keeps the gradient of its
// input for the unit before, and drops that unit's graph. A micro-batch in flight holds its
// checkpoints only, and a backward one unit's activations at a time. (Re-running the whole
// chunk on one graph, as the executor did until the sixtieth session, held every unit's
// activations at once: a stage with one micro-batch in flight, the last, saved nothing.)
//
// Contract
// - Every rank of the pipeline communicator runs the same schedule (built from the same
//   arguments) in the same step; pieces are placed as in pipeline_schedule.h. Messages are
//   tagged by (step, kind, piece, micro-batch), so steps never mix.
// - Sends to this same rank (P = 1 with V > 1) go through a local mailbox.
// - Failures: a peer that dies makes the waiting receive throw PeerFailure naming that rank
//   (through the transport); every wait is bounded by the communicator's timeout.
// - Stats per run: each instruction's wall interval and thread CPU time; busy (Forward +
//   Backward) and wait seconds; the most micro-batches in flight; peak activation bytes (the
//   values held by live graphs, excluding parameters, plus the checkpoints kept for
//   recompute); and the sum of micro-batch losses on the rank holding the last piece.
// Thread-safety: one executor per rank thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "autograd/graph.h"
#include "coll/communicator.h"
#include "parallel/instrument.h"
#include "parallel/pipeline_schedule.h"

namespace dtrain {

class PipelineModel {
 public:
  virtual ~PipelineModel() = default;
  // Forward of local chunk `chunk` for `micro`; input is undefined on piece 0. On the last
  // piece it returns the micro-batch's scalar loss.
  virtual Var forward(Graph& g, int chunk, int micro, const Var& input) = 0;
  // The units of local chunk `chunk` that recompute checkpoints between, and the forward of
  // unit `unit` (0 .. units(chunk) - 1) from its input; the units in order are forward().
  // By default the chunk is one unit.
  virtual int units(int /*chunk*/) const { return 1; }
  virtual Var forward_unit(Graph& g, int chunk, int micro, int /*unit*/, const Var& input) {
    return forward(g, chunk, micro, input);
  }
  // Shape of the output of piece `piece` (= the input of piece + 1, and the shape of the
  // gradient sent back across that boundary).
  virtual Shape activation_shape(int piece) const = 0;
  // Parameter storage of this rank (left out of the activation accounting).
  virtual std::vector<std::span<const float>> param_buffers() const = 0;
};

struct InstrTiming {
  PipeInstr instr;
  double t0 = 0, t1 = 0;  // wall, seconds (steady clock)
  double cpu = 0;         // thread CPU seconds of the instruction
};

struct PipelineStats {
  std::vector<InstrTiming> timeline;
  double t_begin = 0, t_end = 0;
  double busy_seconds = 0;  // Forward + Backward wall time
  double wait_seconds = 0;  // blocked in receives and final send waits
  int max_in_flight = 0;
  int64_t peak_activation_bytes = 0;
  double loss_sum = 0;  // last piece: sum over micro-batches
  int losses = 0;
};

struct PipelineOptions {
  bool recompute = false;
  Instrument* instrument = nullptr;  // spans "F3.1" / "B3.1" (compute) and "recv" (wait)
  int64_t step = 0;                  // tags messages; must agree on all ranks
};

// pp may be nullptr for a single-rank pipeline (P = 1).
PipelineStats run_pipeline(Communicator* pp, const PipeSchedule& schedule, PipelineModel& model,
                           const PipelineOptions& options, const std::function<void()>& optimizer_step);

// Contiguous partition of per-unit costs into `parts` ranges, minimising the largest part's
// cost (each part at least one unit). Returns parts + 1 boundaries (0 ... costs.size()).
std::vector<int> balanced_partition(const std::vector<double>& costs, int parts);

// Bubble of a run, per stage: 1 - busy / (latest end - earliest begin over all stages), from
// every stage's timeline (same clock). Returns the mean over stages.
double measured_bubble(const std::vector<std::vector<InstrTiming>>& timelines);
// The same schedule replayed with each instruction's measured CPU time and free messages:
// the bubble a machine with one dedicated core per stage would show. With `median`, every
// Forward (Backward) of a stage takes that stage's median Forward (Backward) CPU time: the
// stages' systematic differences stay, the noise of a shared machine (which only ever
// lengthens the replay: a makespan is a max over paths) goes.
double replayed_bubble(const PipeSchedule& schedule, const std::vector<std::vector<InstrTiming>>& timelines,
                       bool median = false);

}  // namespace dtrain
