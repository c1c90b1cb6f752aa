// Shared pieces of the fuzz targets (tests/fuzz/fuzz_*.cc). Each target
// defines LLVMFuzzerTestOneInput: libFuzzer drives it in the fuzz build
// (tools/fuzz.sh), replay_main.cc runs it on the kept corpus in the normal
// build. A target aborts only on a broken promise (a crash, a round trip
// that changes a problem); bad input must come back as a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/format.h"

namespace optpipe::fuzz {

// Inputs are read with a modest op budget: the readers must refuse larger
// ones before sizing anything from their counts.
inline constexpr std::int64_t kMaxOps = 100000;

inline SizeLimit Limit() { return SizeLimit{kMaxOps, "fuzzing"}; }

inline std::string Text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Two devices with two V-shape chunks each, offload on one shared host link
// and a memory limit: every rule of the checker and simulator applies. The
// same problem as tests/fuzz/fixed.json, which the CLI tests read.
inline const Problem& FixedProblem() {
  static const Problem p = *ParseProblem(R"({"format": "optpipe-problem/1", "devices": 2,
    "microbatches": 3, "stages_per_device": 2, "placement": "vshape",
    "stage_time": {"f": 1, "b": [1, 2, 1, 1], "w": 1}, "comm_time": 0.5, "offload_time": 1,
    "memory": {"activation": 1, "freed_by_b": 0.5, "static": [0.5, 0], "limit": 3.5},
    "host_links": [[0, 1]]})");
  return p;
}

[[noreturn]] inline void Broken(const char* what) {
  std::fprintf(stderr, "fuzz: broken promise: %s\n", what);
  std::abort();
}

}  // namespace optpipe::fuzz
