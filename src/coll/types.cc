#include "coll/types.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "base/error.h"

namespace dtrain {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

const std::pair<const char*, Algorithm> kAlgorithms[] = {
    {"auto", Algorithm::kAuto},
    {"naive", Algorithm::kNaive},
    {"ring", Algorithm::kRing},
    {"tree", Algorithm::kTree},
    {"butterfly", Algorithm::kButterfly},
    {"recursive_doubling", Algorithm::kRecursiveDoubling},
    {"halving_doubling", Algorithm::kHalvingDoubling},
    {"param_server", Algorithm::kParamServer},
    {"shm_direct", Algorithm::kShmDirect},
    {"hierarchical", Algorithm::kHierarchical},
    {"chain", Algorithm::kChain},
    {"bruck", Algorithm::kBruck},
    {"binomial", Algorithm::kBinomial},
    {"pairwise", Algorithm::kPairwise},
    {"dissemination", Algorithm::kDissemination},
};
const std::pair<const char*, Algorithm> kAlgorithmAliases[] = {
    {"direct", Algorithm::kNaive},           {"rd", Algorithm::kRecursiveDoubling},
    {"rabenseifner", Algorithm::kHalvingDoubling}, {"recursive_halving", Algorithm::kHalvingDoubling},
    {"ps", Algorithm::kParamServer},         {"reduce_bcast", Algorithm::kParamServer},
    {"shm", Algorithm::kShmDirect},          {"pipeline", Algorithm::kChain},
    {"linear", Algorithm::kNaive},
};

const std::pair<const char*, CollOp> kOps[] = {
    {"allreduce", CollOp::kAllreduce},         {"broadcast", CollOp::kBroadcast},
    {"reduce", CollOp::kReduce},               {"allgather", CollOp::kAllgather},
    {"reducescatter", CollOp::kReduceScatter}, {"gather", CollOp::kGather},
    {"scatter", CollOp::kScatter},             {"alltoall", CollOp::kAlltoall},
    {"barrier", CollOp::kBarrier},
};

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& name) {
  std::string n = lower(name);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax})
    if (n == reduce_op_name(op)) return op;
  if (n == "mean") return ReduceOp::kAvg;
  DT_THROW(InvalidArgument, "unknown reduce op '" << name << "' (use sum, avg, prod, min or max)");
}

const char* algorithm_name(Algorithm a) {
  for (const auto& [name, alg] : kAlgorithms)
    if (alg == a) return name;
  return "?";
}

Algorithm parse_algorithm(const std::string& name) {
  std::string n = lower(name);
  for (const auto& [s, alg] : kAlgorithms)
    if (n == s) return alg;
  for (const auto& [s, alg] : kAlgorithmAliases)
    if (n == s) return alg;
  std::string all;
  for (const auto& [s, alg] : kAlgorithms) all += std::string(all.empty() ? "" : ", ") + s;
  DT_THROW(InvalidArgument, "unknown collective algorithm '" << name << "' (use " << all << ")");
}

const char* coll_op_name(CollOp op) {
  for (const auto& [name, o] : kOps)
    if (o == op) return name;
  return "?";
}

CollOp parse_coll_op(const std::string& name) {
  std::string n = lower(name);
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  if (n == "bcast") return CollOp::kBroadcast;
  if (n == "allgatherv") return CollOp::kAllgather;
  for (const auto& [s, op] : kOps)
    if (n == s) return op;
  DT_THROW(InvalidArgument, "unknown collective '" << name
                                                   << "' (use allreduce, broadcast, reduce, allgather, reducescatter, "
                                                      "gather, scatter, alltoall or barrier)");
}

}  // namespace dtrain
