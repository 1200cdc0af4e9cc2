// cli/train_search.h — `dtrain train --strategy search|ensemble`: jobs of independent
// trainings spread over the ranks (see train_search.cc for the algorithms).
// Contract: every rank of `comm` calls the function; rank 0 prints the ranked table / the
// ensemble's accuracy and writes --json; returns the exit code. Malformed --search specs
// throw InvalidArgument before any training starts.
#pragma once

#include "cli/train_flags.h"
#include "coll/communicator.h"
#include "data/dataset.h"

namespace dtrain::cli {

int run_search(const TrainFlags& f, Communicator& comm, const data::DataSplit& d);
int run_ensemble(const TrainFlags& f, Communicator& comm, const data::DataSplit& d);

}  // namespace dtrain::cli
