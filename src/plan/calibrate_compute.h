// plan/calibrate_compute.h — measure the compute side of the machine model.
//
// Contract
// - measure_compute(seconds) times, on the calling thread with one BLAS thread:
//     GEMMs at the shapes the models run (the MLP's 784-256-128-10 layers at a 32-row
//     micro-batch, the GPT's qkv/fc/proj/head products at 768 tokens x width 128) -> GFLOP/s
//     per shape, and gemm_gflops = their median;
//     an element-wise a = a * b + c over 16 MiB arrays -> GB/s of bytes touched;
//     one optimizer step (sgd with momentum, adamw) over 1M parameters -> ns per parameter;
//     oversubscription: 2 x cores threads each running the median GEMM, against one thread;
//     the penalty is measured slowdown / (threads / cores), >= 1 means worse than fair sharing.
//   Each measurement runs about `seconds` (best of the repetitions, to resist noise).
// - compute_json / apply_compute move the figures to and from the "compute" section of the
//   calibration file (versioned: "version": 2) that cluster.h's this_machine() reads.
// Thread-safety: starts and joins its own threads; call from one thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain::plan {

struct ComputeRates {
  std::vector<std::pair<std::string, double>> gemm_by_shape;  // "MxNxK" -> GFLOP/s
  double gemm_gflops = 0, elementwise_gbps = 0;
  double adamw_ns_per_param = 0, sgd_ns_per_param = 0;
  double oversub_penalty = 1;
  int cores = 1;
};

ComputeRates measure_compute(double seconds);
nlohmann::json compute_json(const ComputeRates& r);

}  // namespace dtrain::plan
