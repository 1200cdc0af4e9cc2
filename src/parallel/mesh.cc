// parallel/mesh.cc — coordinates and the three splits (see mesh.h for the layout).
#include "parallel/mesh.h"

#include <sstream>

#include "base/error.h"

namespace dtrain {

Mesh::Mesh(Communicator& world, const MeshShape& shape) : world_(world), shape_(shape) {
  DT_CHECK(shape.dp >= 1 && shape.tp >= 1 && shape.pp >= 1 && shape.size() == world.size(), InvalidArgument,
           "mesh dp " << shape.dp << " x tp " << shape.tp << " x pp " << shape.pp << " = " << shape.size()
                      << " ranks, but the job has " << world.size());
  const int w = world.rank();
  t_ = w % shape.tp;
  p_ = (w / shape.tp) % shape.pp;
  d_ = w / (shape.tp * shape.pp);
  // Every rank makes the three splits in the same order.
  tp_ = world.split(d_ * shape.pp + p_, t_);
  pp_ = world.split(d_ * shape.tp + t_, p_);
  dp_ = world.split(p_ * shape.tp + t_, d_);
  DT_CHECK(tp_->rank() == t_ && pp_->rank() == p_ && dp_->rank() == d_, InvalidArgument,
           "mesh: group ranks do not match the coordinates of " << describe());
}

std::string Mesh::describe() const {
  std::ostringstream os;
  os << "rank " << world_.rank() << " = (dp " << d_ << ", pp " << p_ << ", tp " << t_ << ")";
  return os.str();
}

}  // namespace dtrain
