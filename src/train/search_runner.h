// train/search_runner.h — `--strategy search|ensemble`: jobs of independent trainings spread
// over the ranks (see search_runner.cc for the algorithms).
// Contract: every rank of `comm` calls the function; each returns the results document
// (complete on rank 0: the ranked trials / the ensemble's and members' accuracies); with a
// stream, every rank prints its trials as they finish and rank 0 the table. Malformed
// --search specs throw InvalidArgument before any training starts.
#pragma once

#include <cstdio>

#include <nlohmann/json.hpp>

#include "coll/communicator.h"
#include "data/dataset.h"
#include "train/config.h"

namespace dtrain {

nlohmann::json run_search(const TrainConfig& f, Communicator& comm, const data::DataSplit& d, std::FILE* out);
nlohmann::json run_ensemble(const TrainConfig& f, Communicator& comm, const data::DataSplit& d, std::FILE* out);

}  // namespace dtrain
