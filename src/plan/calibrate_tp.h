// plan/calibrate_tp.h — tensor-parallel GPT blocks timed in place: across the ranks of a job,
// with the all-reduces their conjugate ops issue, as parallel/tensor_parallel.h runs them.
//
// Why. A block cut k ways is not its GEMMs over k plus four back-to-back all-reduces. Its
// replicated work (layernorms, residuals, the f/g copies) stays whole on every rank, and each
// of its all-reduces is a meeting point: a rank that is early waits for one still computing
// (jitter, at 2 ranks), and ranks that outnumber the cores arrive in their time slices' order
// and have to be scheduled again to finish the call. Traced at 8 ranks on 2 cores (the 6x128
// GPT, 12 sequences): the ranks' CPU per step was 35 ms where the split block's calibrated
// passes sum to ~21, 190 us of it per all-reduce; the step was predicted 36-40% short. The
// split formula cannot see this; timing the block where it runs does.
//
// Contract
// - time_tp_block(comm, spec, items, seconds) is collective over comm (its size p is the
//   tensor-parallel degree; the spec's heads % p == 0, else InvalidArgument): every rank builds
//   the block's shard (nn/transformer.h GptStage with tp = p, a stack of kTpStack blocks so
//   the activations are as cold as in a model) with parallel/tensor_parallel.h's hooks over
//   comm, and times forward and backward of `items` sequences: one warm-up pass, then a pass
//   count every rank agrees on (from the warm-up's slowest rank, filling about `seconds`,
//   5..60 passes). Returns the median forward and backward seconds per block, the slowest
//   rank's (all-reduce max), the same on every rank. The heap is kept warm and BLAS runs one
//   thread, as a training rank's.
// - With `job` (a communicator over the whole job, of which comm is one group): every group
//   of the job times its block at once, as a hybrid layout's tensor-parallel groups run side
//   by side; the pass count and the slowest rank are then the job's (collective over job).
// - TpBlockPoint (plan/cluster.h) is one such measurement; the calibration file keeps them in
//   its compute section (Cluster::tp_blocks).
// Thread-safety: one call per communicator at a time.
#pragma once

#include <cstdint>
#include <string>

#include "coll/communicator.h"
#include "plan/cluster.h"

namespace dtrain::plan {

inline constexpr int kTpStack = 4;

TpBlockPoint time_tp_block(Communicator& comm, const std::string& spec, int64_t items, double seconds,
                           Communicator* job = nullptr);

}  // namespace dtrain::plan
