#include "coll/cost_model.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "base/error.h"
#include "coll/call.h"
#include "coll/communicator.h"

namespace dtrain {
namespace {

double lg(int p) { return std::ceil(std::log2(std::max(p, 1))); }
bool pow2(int p) { return (p & (p - 1)) == 0; }

// Finds "kind": { ... } and reads "key": number inside it. Enough for the files we write.
bool read_number(const std::string& obj, const std::string& key, double* out) {
  size_t k = obj.find("\"" + key + "\"");
  if (k == std::string::npos) return false;
  size_t colon = obj.find(':', k);
  if (colon == std::string::npos) return false;
  char* end = nullptr;
  double v = std::strtod(obj.c_str() + colon + 1, &end);
  if (end == obj.c_str() + colon + 1) return false;
  *out = v;
  return true;
}

}  // namespace

CostParams default_cost_params(const std::string& kind) {
  // `dtrain bench calibrate` on the project's 2-vCPU machine, 2026-11-21 (after the transport
  // and collectives work of that day): shm alpha 0.99 us, beta 4.37 GB/s, gamma 13.3 GB/s;
  // tcp alpha 4.19 us, beta 2.62 GB/s, gamma 14.0 GB/s. Rounded; a calibration file wins.
  CostParams cp;
  if (kind == "tcp") {
    cp.alpha_s = 4e-6;
    cp.beta_s_per_byte = 1.0 / 2.6e9;
    cp.gamma_s_per_byte = 1.0 / 13e9;
  } else {
    cp.alpha_s = 1e-6;
    cp.beta_s_per_byte = 1.0 / 4.4e9;
    cp.gamma_s_per_byte = 1.0 / 13e9;
  }
  cp.source = "default(" + kind + ")";
  return cp;
}

bool parse_calibration(const std::string& text, const std::string& kind, CostParams* out) {
  size_t k = text.find("\"" + kind + "\"");
  if (k == std::string::npos) return false;
  size_t open = text.find('{', k), close = text.find('}', k);
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  std::string obj = text.substr(open, close - open + 1);
  double alpha_us, beta_gbps, gamma_gbps;
  if (!read_number(obj, "alpha_us", &alpha_us) || !read_number(obj, "beta_gbps", &beta_gbps) ||
      !read_number(obj, "gamma_gbps", &gamma_gbps) || beta_gbps <= 0 || gamma_gbps <= 0 || alpha_us < 0)
    return false;
  out->alpha_s = alpha_us * 1e-6;
  out->beta_s_per_byte = 1.0 / (beta_gbps * 1e9);
  out->gamma_s_per_byte = 1.0 / (gamma_gbps * 1e9);
  return true;
}

std::string format_calibration(const CostParams& shm, const CostParams& tcp) {
  std::ostringstream os;
  os << std::setprecision(6) << "{\n";
  auto one = [&](const char* kind, const CostParams& cp, bool last) {
    os << "  \"" << kind << "\": {\"alpha_us\": " << cp.alpha_s * 1e6 << ", \"beta_gbps\": " << 1e-9 / cp.beta_s_per_byte
       << ", \"gamma_gbps\": " << 1e-9 / cp.gamma_s_per_byte << "}" << (last ? "\n" : ",\n");
  };
  one("shm", shm, false);
  one("tcp", tcp, true);
  os << "}\n";
  return os.str();
}

const CostParams& cost_params_for(const std::string& kind, const std::string& path) {
  // The calibration file is configuration, fixed for the life of the process: read and parse
  // it once per (file, transport kind) (a collective asks on every call; parsing each time
  // cost microseconds on the small-message path).
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, CostParams> by_kind;
  std::lock_guard<std::mutex> lock(mu);
  auto it = by_kind.find({path, kind});
  if (it != by_kind.end()) return it->second;
  std::string text;
  if (std::ifstream in(path); !path.empty() && in) {
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  CostParams cp = default_cost_params(kind);
  if (!text.empty() && parse_calibration(text, kind, &cp)) cp.source = "calibrated(" + path + ")";
  return by_kind.emplace(std::make_pair(path, kind), cp).first->second;
}

double predict_seconds(CollOp op, Algorithm a, int p, size_t bytes, const CostParams& cp, size_t segment_bytes) {
  if (p <= 1) return 0;
  const double n = static_cast<double>(bytes), A = cp.alpha_s, B = cp.beta_s_per_byte, G = cp.gamma_s_per_byte;
  const double L = lg(p), frac = (p - 1.0) / p;
  const double s = std::max(1.0, std::min(n, static_cast<double>(segment_bytes)));
  const double k = std::max(1.0, std::ceil(n / s));
  // Non-powers of two pay a fold: one full exchange in, one out.
  const double fold = pow2(p) ? 0 : 2 * (A + n * B) + n * G;
  switch (op) {
    case CollOp::kAllreduce:
      switch (a) {
        case Algorithm::kNaive: return (p - 1) * A + (p - 1) * n * B + (p - 1) * n * G;
        case Algorithm::kRing: return 2 * (p - 1) * A + 2 * frac * n * B + frac * n * G;
        case Algorithm::kTree: return 2 * (L + k - 1) * (A + s * B) + (L + k - 1) * s * G;
        case Algorithm::kRecursiveDoubling: return L * (A + n * B + n * G) + fold;
        case Algorithm::kHalvingDoubling: return 2 * L * A + 2 * frac * n * B + frac * n * G + fold;
        case Algorithm::kButterfly:
          return std::min(predict_seconds(op, Algorithm::kRecursiveDoubling, p, bytes, cp, segment_bytes),
                          predict_seconds(op, Algorithm::kHalvingDoubling, p, bytes, cp, segment_bytes));
        case Algorithm::kParamServer: return 2 * (p - 1) * A + 2 * (p - 1) * n * B + (p - 1) * n * G;
        // One host: read my slice of each peer's buffer, reduce, read the other finished
        // slices — 2(p-1)/p n bytes copied once each (a transport hop copies twice, so at
        // beta/2 per byte), three rounds of tiny messages.
        case Algorithm::kShmDirect: return 3 * L * A + frac * n * B + frac * n * G;
        case Algorithm::kHierarchical: return 4 * L * A + 2 * frac * n * B + frac * n * G + 2 * n * B;
        default: break;
      }
      break;
    case CollOp::kBroadcast:
      switch (a) {
        case Algorithm::kBinomial: return (L + k - 1) * (A + s * B);
        case Algorithm::kChain: return (p - 2 + k) * (A + s * B);
        case Algorithm::kNaive: return (p - 1) * (A + n * B);
        case Algorithm::kShmDirect: return 3 * L * A + n * B / 2;
        default: break;
      }
      break;
    case CollOp::kReduce:
      switch (a) {
        case Algorithm::kBinomial: return (L + k - 1) * (A + s * B + s * G);
        case Algorithm::kNaive: return (p - 1) * (A + n * B + n * G);
        default: break;
      }
      break;
    case CollOp::kAllgather:
      switch (a) {
        case Algorithm::kRing: return (p - 1) * A + frac * n * B;
        case Algorithm::kRecursiveDoubling: return L * A + frac * n * B;
        case Algorithm::kBruck: return L * A + frac * n * B + n * B / 2;
        case Algorithm::kNaive: return (p - 1) * A + frac * n * B;
        case Algorithm::kShmDirect: return 3 * L * A + frac * n * B / 2;
        default: break;
      }
      break;
    case CollOp::kReduceScatter:
      switch (a) {
        case Algorithm::kRing: return (p - 1) * A + frac * n * (B + G);
        case Algorithm::kHalvingDoubling: return L * A + frac * n * (B + G) + fold;
        case Algorithm::kNaive: return (p - 1) * A + frac * n * (B + G);
        case Algorithm::kShmDirect: return 3 * L * A + frac * n * (B / 2 + G);
        default: break;
      }
      break;
    case CollOp::kGather:
    case CollOp::kScatter:
      switch (a) {
        case Algorithm::kBinomial: return L * A + frac * n * B;
        case Algorithm::kNaive: return (p - 1) * A + frac * n * B;
        default: break;
      }
      break;
    case CollOp::kAlltoall:
      switch (a) {
        case Algorithm::kPairwise: return (p - 1) * (A + n / p * B);
        case Algorithm::kNaive: return (p - 1) * A + frac * n * B;
        default: break;
      }
      break;
    case CollOp::kBarrier: return L * A;
  }
  return 1e30;
}

const std::vector<Algorithm>& supported_algorithms(CollOp op) {
  using A = Algorithm;
  static const std::vector<Algorithm> allreduce{A::kNaive,          A::kRing,         A::kTree,
                                                A::kButterfly,      A::kRecursiveDoubling, A::kHalvingDoubling,
                                                A::kParamServer,    A::kShmDirect,    A::kHierarchical};
  static const std::vector<Algorithm> broadcast{A::kBinomial, A::kChain, A::kNaive, A::kShmDirect};
  static const std::vector<Algorithm> rooted{A::kBinomial, A::kNaive};
  static const std::vector<Algorithm> allgather{A::kRing, A::kRecursiveDoubling, A::kBruck, A::kNaive, A::kShmDirect};
  static const std::vector<Algorithm> reduce_scatter{A::kRing, A::kHalvingDoubling, A::kNaive, A::kShmDirect};
  static const std::vector<Algorithm> alltoall{A::kPairwise, A::kNaive};
  static const std::vector<Algorithm> barrier{A::kDissemination, A::kRecursiveDoubling};
  static const std::vector<Algorithm> none;
  switch (op) {
    case CollOp::kAllreduce: return allreduce;
    case CollOp::kBroadcast: return broadcast;
    case CollOp::kReduce:
    case CollOp::kGather:
    case CollOp::kScatter: return rooted;
    case CollOp::kAllgather: return allgather;
    case CollOp::kReduceScatter: return reduce_scatter;
    case CollOp::kAlltoall: return alltoall;
    case CollOp::kBarrier: return barrier;
  }
  return none;
}

std::vector<Algorithm> candidates(CollOp op, int p, bool shm) {
  std::vector<Algorithm> out;
  for (Algorithm a : supported_algorithms(op)) {
    if (a == Algorithm::kHierarchical || a == Algorithm::kButterfly) continue;  // explicit only / composite
    if (a == Algorithm::kShmDirect && !shm) continue;
    out.push_back(a);
  }
  return out;
}

Algorithm choose(CollOp op, int p, size_t bytes, const CostParams& cp, bool shm, size_t segment_bytes) {
  Algorithm best = Algorithm::kAuto;
  double best_t = 0;
  for (Algorithm a : candidates(op, p, shm)) {
    double t = predict_seconds(op, a, p, bytes, cp, segment_bytes);
    if (best == Algorithm::kAuto || t < best_t) {
      best = a;
      best_t = t;
    }
  }
  return best;
}

Algorithm normalize_algorithm(CollOp op, Algorithm a) {
  using A = Algorithm;
  switch (op) {
    case CollOp::kBroadcast:
    case CollOp::kReduce:
    case CollOp::kGather:
    case CollOp::kScatter:
      if (a == A::kTree) return A::kBinomial;
      if (op == CollOp::kBroadcast && a == A::kRing) return A::kChain;
      break;
    case CollOp::kAllgather:
      if (a == A::kButterfly || a == A::kHalvingDoubling) return A::kRecursiveDoubling;
      break;
    case CollOp::kReduceScatter:
      if (a == A::kButterfly || a == A::kRecursiveDoubling) return A::kHalvingDoubling;
      break;
    case CollOp::kBarrier:
      if (a == A::kButterfly) return A::kRecursiveDoubling;
      break;
    default: break;
  }
  return a;
}

bool config_forces_algorithm(const CollConfig& config, CollOp op) { return !config.forced_algorithm(op).name.empty(); }

Algorithm resolve_algorithm(CollOp op, Algorithm requested, Communicator& comm, size_t bytes, const CollOptions& opts) {
  auto valid = [&](Algorithm a) {
    const auto& supported = supported_algorithms(op);
    return std::find(supported.begin(), supported.end(), a) != supported.end();
  };
  Algorithm a = requested;
  if (a == Algorithm::kAuto) {
    const ForcedAlgorithm& forced = comm.coll_config().forced_algorithm(op);
    if (!forced.name.empty()) {
      Algorithm ea = normalize_algorithm(op, parse_algorithm(forced.name));
      if (!forced.job_wide || valid(ea)) a = ea;
    }
  }
  if (a == Algorithm::kAuto) {
    const char* kind = comm.transport().kind();
    const CollConfig& config = comm.coll_config();
    return choose(op, comm.size(), bytes, cost_params_for(kind, config.calibration_path), std::strcmp(kind, "shm") == 0,
                  resolve_segment_bytes(config, opts));
  }
  a = normalize_algorithm(op, a);
  if (!valid(a)) {
    std::ostringstream os;
    for (Algorithm s : supported_algorithms(op)) os << (os.tellp() > 0 ? ", " : "") << algorithm_name(s);
    DT_THROW(InvalidArgument, coll_op_name(op) << " has no algorithm '" << algorithm_name(a) << "' (use auto, " << os.str() << ")");
  }
  return a;
}

}  // namespace dtrain
