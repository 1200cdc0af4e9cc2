// parallel/mesh.h — a DP x TP x PP mesh of ranks, built with Communicator::split.
//
// World rank w has coordinates (d, p, t) with the tensor-parallel index fastest:
//   w = (d * PP + p) * TP + t
// so the ranks of one tensor-parallel group are neighbours (on a real cluster: one node,
// the fastest links, because TP communicates inside every layer), a pipeline runs across
// the TP groups, and data parallelism spans the rest. Three splits make the groups:
//   tp group  color = d * PP + p   (key t)   the TP ranks of one pipeline stage replica
//   pp group  color = d * TP + t   (key p)   the stages of one pipeline
//   dp group  color = p * TP + t   (key d)   the replicas of one (stage, TP shard)
// A group of one is still a Communicator (its collectives are local no-ops).
//
// Contract
// - Mesh(world, {dp, tp, pp}) is collective over the world; dp * tp * pp must equal the
//   world size (InvalidArgument naming all four numbers otherwise). Any factorisation works.
// - tp(), pp(), dp() are this rank's groups; *_rank() its coordinates, equal to the
//   group ranks.
// Thread-safety: as Communicator.
#pragma once

#include <memory>
#include <string>

#include "coll/communicator.h"

namespace dtrain {

struct MeshShape {
  int dp = 1, tp = 1, pp = 1;
  int size() const { return dp * tp * pp; }
};

class Mesh {
 public:
  Mesh(Communicator& world, const MeshShape& shape);

  const MeshShape& shape() const { return shape_; }
  int dp_rank() const { return d_; }
  int tp_rank() const { return t_; }
  int pp_rank() const { return p_; }
  Communicator& world() { return world_; }
  Communicator& tp() { return *tp_; }
  Communicator& pp() { return *pp_; }
  Communicator& dp() { return *dp_; }
  // World rank of coordinates (d, p, t).
  int world_rank_of(int d, int p, int t) const { return (d * shape_.pp + p) * shape_.tp + t; }
  // "rank 5 = (dp 1, pp 0, tp 1)"
  std::string describe() const;

 private:
  Communicator& world_;
  MeshShape shape_;
  int d_, p_, t_;
  std::shared_ptr<Communicator> tp_, pp_, dp_;
};

}  // namespace dtrain
