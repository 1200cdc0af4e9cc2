// plan/calibration_carry.h — a new calibration keeps the placement it did not see.
//
// Why: on a VM whose two vCPUs the hypervisor moves between cores that share a cache
// ("close") and cores that do not ("far"; docs/PLANNER.md), a placement lasts seconds to
// minutes, so one calibration often sees only one of them. The figures that depend on it
// are filed by verdict (the hand-off, gossip's mixes, the collectives' tables and ddp's
// window all-reduce at 2 ranks and at each larger rank count). A run that probes the placement the calibration missed was
// priced with the other's figures: 2026-11-30's dv-h1 had six rows beyond 25% that way, and
// only two once the close figures of an earlier calibration of the same machine sat beside
// its far ones. So a calibration keeps, from the file it replaces, the verdicts it lacks.
//
// Contract
// - machine_fingerprint(): this host as {"cpu": the CPU's model name ("" where the OS names
//   none), "cpus": logical CPUs online, "cache_bytes": the largest cache level's size (0
//   where unknown)}. Two files with equal fingerprints were taken on the same kind of host.
// - stamp_calibration(j, unix_s): writes j["machine"] (the fingerprint), j["calibrated_unix"]
//   (seconds since the epoch) and j["calibrated_at"] (UTC, for people).
// - carry_placements(previous, fresh, now_unix, max_age_days): copies into *fresh each
//   verdict table of kVerdictTables (and each rank count's under by_cores_by_ranks) that
//   `previous` has and *fresh lacks, where both carry the same "version" and "machine" and
//   the table is at most max_age_days old; within a verdict both files have, the arrays of
//   points (a collective's table) and the numbers (a gap factor) that only `previous` has
//   (or *fresh has as an empty array) are copied alone, and in a table of points both have,
//   the points at sizes only `previous` has (listed as "TABLE.SIZE", dated as a table is).
//   A gap factor goes only with kGapFactorMinPasses or more "gap_passes" beside it.
//   Nothing *fresh measured is ever replaced. Each
//   carried table is listed in (*fresh)["carried"] as {"table": dotted path, "measured_unix",
//   "measured_at"}: the time of the calibration that measured it, kept across any number of
//   carries, so an old table ages out however often it is carried. Returns what was carried
//   and, in *why_none, why nothing could be (other machine, no fingerprint, other version)
//   or "" where the files matched.
// Thread-safety: plain functions; machine_fingerprint reads /proc and /sys.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain::plan {

// Tables filed by the cores' verdict, as dotted paths into a calibration file; each holds
// {"close": ..., "far": ...}. by_cores_by_ranks holds one such object per rank count.
inline constexpr const char* kVerdictTables[] = {"compute.handoff.by_cores", "compute.mix_gbps_by_cores",
                                                 "compute.mix_shared_gbps_by_cores",
                                                 "links_by_size.intra.two_rank_by_cores",
                                                 "links_by_size.intra.by_cores_by_ranks.*"};

// How long a verdict's tables are carried from calibration to calibration (a machine's
// software and load drift; a month-old far table prices nothing well).
constexpr double kCarryMaxAgeDays = 14;

// A verdict's gap factor ("gap_factor", bench calibrate's all-reduce with compute between
// calls over the same back to back) is the lowest of the gap passes that ran in that
// placement; the file records how many in "gap_passes". One pass is no factor: a factor
// from fewer passes, or from a file that does not say (written before 2026-12-01), is never
// carried (the factors scattered x1.00-2.38 over 16 calibrations of one VM, and one carried
// x1.69 priced ddp at 4 ranks +28..+46% in three validations).
constexpr int kGapFactorMinPasses = 2;

nlohmann::json machine_fingerprint();

void stamp_calibration(nlohmann::json& j, double unix_s);

struct Carried {
  std::string table;    // dotted path, e.g. "links_by_size.intra.by_cores_by_ranks.4.far"
  double measured_unix;  // when the calibration that measured it ran
};

std::vector<Carried> carry_placements(const nlohmann::json& previous, nlohmann::json* fresh, double now_unix,
                                      double max_age_days, std::string* why_none);

// "2026-11-30 07:10 UTC" for seconds since the epoch.
std::string utc_minutes(double unix_s);

}  // namespace dtrain::plan
