// plan/unit_memory.h — the heap bytes a unit's autograd graph keeps, for a cluster whose
// calibration did not measure them.
//
// Why. What a unit's forward keeps for backward, and the high-water mark over forward and
// backward, are bytes of tensors dtrain's own nn/autograd code allocates: the same code keeps
// the same bytes on any machine (to the allocator's rounding). The textbook closed form
// (closed_forms.h block_activation_elems: 16 s h + a s^2 floats a sequence) counts what a
// fused implementation must keep; this one keeps every node's output, 22 s h floats a
// sequence in a block, and the gradients of all of them at the high-water mark. Priced by the
// closed form, an uncalibrated run of the README's 6x128 GPT read its memory -35..-61% (2-4
// ranks, zero, pp, tp, hybrid; fifty-ninth session), where calibrated runs read within 10%.
//
// Contract
// - default_unit_memory(kind) is a UnitCost with only its memory figures set (per element of
//   the unit's memory basis, simulator.h mem_elems, and per attention probability), for
//   "gpt_embedding", "gpt_block", "gpt_head" and "mlp_layer"; nullptr for any other kind.
//   The figures are `dtrain bench calibrate`'s fits on the 2-vCPU EPYC VM (2026-12-02: its
//   points at widths 64-512 and contexts 64-256 within 1% of them).
// - unit_memory_for(cluster, kind, spec): the cluster's calibrated unit where it measured
//   memory, else default_unit_memory(kind).
// Thread-safety: pure.
#pragma once

#include <string>

#include "plan/calibrate_units.h"
#include "plan/cluster.h"

namespace dtrain::plan {

const UnitCost* default_unit_memory(const std::string& kind);
const UnitCost* unit_memory_for(const Cluster& c, const std::string& kind, const std::string& spec);

}  // namespace dtrain::plan
