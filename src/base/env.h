// base/env.h — typed reads of environment variables with clear errors, and size parsing.
//
// Contract: env_string returns the fallback when unset; env_int throws InvalidArgument naming
// the variable when it is set but not an integer. Only the entry points read the environment
// (scripts/check_layers.py lists them): DTRAIN_* settings go through base/settings.h; these
// are for the launchers' own variables (RANK, WORLD_SIZE, SLURM_*, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtrain {

std::optional<std::string> env_get(const char* name);
std::string env_string(const char* name, const std::string& fallback);
int64_t env_int(const char* name, int64_t fallback);

// Parses "123", "64K", "4M", "2G" (powers of 1024), "1.5M"; throws InvalidArgument naming what.
int64_t parse_size(const std::string& text, const std::string& what);
// Formats bytes as "64 KiB", "4 MiB", ...
std::string format_bytes(double bytes);

}  // namespace dtrain
