// coll/cost_model.h — the alpha-beta-gamma cost model behind Algorithm::kAuto.
//
// Contract
// - CostParams: alpha = seconds per message, beta = seconds per byte moved, gamma = seconds
//   per byte reduced. Defaults per transport kind ("shm", "tcp") come from measurements on
//   the development machine; a calibration file (written by `dtrain bench calibrate`) replaces
//   them. The file (CollConfig::calibration_path: DTRAIN_CALIBRATION, else
//   ~/.cache/dtrain/calibration.json) is read once per process when it exists; it is
//   read-only configuration, like the settings. Format: {"shm": {"alpha_us": 3.1, "beta_gbps": 5.2, "gamma_gbps": 9.0},
//   "tcp": {...}} (beta/gamma given as GB/s, 1e9 bytes per second).
// - predict_seconds(op, algorithm, p, bytes, params, segment) is the published formula for
//   that algorithm (see docs/COLLECTIVES.md); `bytes` is the buffer of an all-reduce,
//   broadcast or reduce, the whole output of an all-gather/gather and the whole input of a
//   reduce-scatter/scatter/all-to-all.
// - candidates(op, p, shm) lists the algorithms auto may pick, in a fixed order; choose()
//   returns the cheapest, ties to the earlier one. Deterministic: equal inputs, equal answer.
// - resolve_algorithm(): a forced algorithm (per call, or the communicator's CollConfig:
//   DTRAIN_<OP>_ALGO, or DTRAIN_ALGO when it names an algorithm this op has) wins over the model; aliases are normalised per
//   op (tree -> binomial for broadcast, ring -> chain, butterfly -> recursive doubling for
//   all-gather, ...); an algorithm the op lacks is an InvalidArgument naming the valid ones.
// Thread-safety: pure functions plus a once-initialised read-only calibration.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "coll/config.h"
#include "coll/types.h"

namespace dtrain {

class Communicator;

struct CostParams {
  double alpha_s = 5e-6;
  double beta_s_per_byte = 1.0 / 3e9;
  double gamma_s_per_byte = 1.0 / 8e9;
  std::string source = "default";
};

CostParams default_cost_params(const std::string& transport_kind);
// The parameters calibrated in the file at `calibration_path` when it has them, else the
// defaults. Parsed once per (file, kind).
const CostParams& cost_params_for(const std::string& transport_kind, const std::string& calibration_path);
// Parses one transport's entry of a calibration file's text; false when absent.
bool parse_calibration(const std::string& text, const std::string& transport_kind, CostParams* out);
std::string format_calibration(const CostParams& shm, const CostParams& tcp);

double predict_seconds(CollOp op, Algorithm a, int p, size_t bytes, const CostParams& cp, size_t segment_bytes);
std::vector<Algorithm> candidates(CollOp op, int p, bool shm);
Algorithm choose(CollOp op, int p, size_t bytes, const CostParams& cp, bool shm, size_t segment_bytes);
// Every algorithm `op` accepts when forced (auto excluded).
const std::vector<Algorithm>& supported_algorithms(CollOp op);
Algorithm normalize_algorithm(CollOp op, Algorithm a);

Algorithm resolve_algorithm(CollOp op, Algorithm requested, Communicator& comm, size_t bytes, const CollOptions& opts);
// Whether the configuration (DTRAIN_<OP>_ALGO or DTRAIN_ALGO) names an algorithm for op.
bool config_forces_algorithm(const CollConfig& config, CollOp op);

}  // namespace dtrain
