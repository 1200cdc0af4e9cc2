// parallel/pipeline_schedule.h — pipeline schedules as data, and a checker that proves them.
//
// A pipeline schedule says, for every stage (rank) of a P-stage pipeline, the exact sequence
// of instructions it executes for one minibatch of M micro-batches — the idea of DeepSpeed's
// runtime/pipe/schedule.py: the schedule is data an executor interprets, so it can be printed,
// tested and proven without running a model.
//
// Instructions: RecvAct, Forward, SendAct, RecvGrad, Backward, SendGrad (each naming a
// micro-batch and a local chunk) and OptimizerStep. With V "virtual stages" (chunks) per rank
// the model is cut into P*V pieces; piece v = c*P + s lives on rank s as chunk c (Megatron's
// interleaved layout), so activations flow rank 0 -> 1 -> ... -> P-1 -> 0 (next chunk) -> ...
//
// Schedules
//   gpipe        all M forwards, then all M backwards (M micro-batches in flight).
//   1f1b         P-1-s warm-up forwards, then one forward / one backward alternately, then the
//                remaining backwards: at most P-s micro-batches in flight on stage s.
//   interleaved  1F1B over V chunks per rank (Megatron's interleaved schedule): forwards walk
//                micro-batches in groups of P, chunk by chunk; backwards the same with the
//                chunks reversed; warm-up (P-s-1)*2 + (V-1)*P units. Needs M % P == 0 when
//                V > 1 (as Megatron), otherwise InvalidArgument. V = 1 is 1f1b.
//
// The checker (check_schedule) proves, without running anything:
//   1. completeness — every stage runs Forward and Backward once per (micro-batch, chunk),
//      Forward first, and ends with one OptimizerStep;
//   2. data flow — each Forward is preceded by the RecvAct of its input and followed by the
//      SendAct of its output (except at the first/last piece), likewise for gradients;
//   3. pairing — every send has exactly one matching receive on the neighbouring rank and
//      vice versa (matched by kind, micro-batch and piece);
//   4. no deadlock — a simulation in which sends never block (the executor's isends are
//      buffered by the transport) and a receive waits until its send has executed reaches
//      the end of every stage's list. A stuck state is reported stage by stage.
// simulate() is the same simulation with instruction durations: it gives each instruction
// a start and end time, the makespan, busy time per stage, the bubble fraction and the
// most micro-batches in flight (activation memory) per stage; simulate_on_cores() the same
// on cores that more ranks time-share.
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dtrain {

enum class PipeOp : uint8_t { kRecvAct, kForward, kSendAct, kRecvGrad, kBackward, kSendGrad, kStep };
const char* pipe_op_name(PipeOp op);

struct PipeInstr {
  PipeOp op;
  int micro = 0;
  int chunk = 0;
  bool operator==(const PipeInstr&) const = default;
};

struct PipeSchedule {
  std::string kind;  // gpipe | 1f1b | interleaved
  int stages = 1;    // P
  int micro = 1;     // M
  int chunks = 1;    // V
  std::vector<std::vector<PipeInstr>> per_stage;

  int pieces() const { return stages * chunks; }
  int piece(int stage, int chunk) const { return chunk * stages + stage; }
  int stage_of(int piece) const { return piece % stages; }
  int chunk_of(int piece) const { return piece / stages; }
  // One line per stage: "s0: F0 F1 B0 B1 STEP" (receives and sends left out).
  std::string describe(bool with_comm = false) const;
};

PipeSchedule make_gpipe(int stages, int micro);
PipeSchedule make_1f1b(int stages, int micro);
PipeSchedule make_interleaved(int stages, int micro, int chunks);
// kind: gpipe | 1f1b | interleaved.
PipeSchedule make_schedule(const std::string& kind, int stages, int micro, int chunks = 1);

struct SimResult {
  bool ok = false;
  std::string error;                             // why not (deadlock, pairing, ...)
  std::vector<std::vector<double>> start, end;   // per stage, per instruction
  double makespan = 0;
  std::vector<double> busy;                      // Forward + Backward time per stage
  std::vector<int> max_in_flight;                // forwards not yet backwarded, per stage
  double bubble() const;                         // mean over stages of 1 - busy/makespan
};

// The time slice of Linux's fair scheduler on `cpus` CPUs: a base slice of 0.75 ms scaled by
// 1 + log2(CPUs), CPUs counted up to 8 (sysctl_sched_base_slice, or CFS's minimum
// granularity, with the default logarithmic scaling): 1.5 ms on 2 CPUs, 3 ms from 8.
double scheduler_slice_s(int cpus);

// Duration of an instruction on a stage; sends, receives and the step usually cost 0.
using CostFn = std::function<double(int stage, const PipeInstr& instr)>;
// Forward 1, Backward 2, everything else 0.
double unit_cost(int stage, const PipeInstr& instr);

SimResult simulate(const PipeSchedule& s, const CostFn& cost = unit_cost);
// The same schedule on a node whose ranks outnumber its cores, time-shared as the kernel
// does: a Forward or Backward starts as soon as its stage reaches it and needs `units` of the
// `cores` (its stage's ranks there: replicas and tensor-parallel shards, at most all the
// cores). Where more ask than the cores hold, the cores go, one slice (`slice_s`, 0: the
// kernel's, scheduler_slice_s(cores); or 1/4096 of the work per core where that is longer)
// at a time, to the stages that have computed the
// least so far in the step; the others wait. Sends and receives take no core. busy[st] is
// the wall time of the stage's forwards and backwards, waits for the cores included. An
// error (not ok) where a receive's send never runs.
SimResult simulate_on_cores(const PipeSchedule& s, const CostFn& cost, int units, int cores,
                            double slice_s = 0);
// "" when the schedule passes every check above, else the first problem found.
std::string check_schedule(const PipeSchedule& s);

// The textbook bubble (idle / total): (P-1)/(M+P-1) for gpipe and 1f1b; for interleaved
// the bubble is (1/V)(P-1)/M of the ideal time, i.e. r/(1+r) of the total with r that ratio.
double bubble_formula(const std::string& kind, int stages, int micro, int chunks);

}  // namespace dtrain
