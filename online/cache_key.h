// CacheKey: what the schedule cache (online/cache.h) files a problem under.
//
// Two problems share a key when they have the same structure and nearly the
// same proportions, so that one's schedule is likely good for the other. The
// key has two parts:
//
// - `structure`, a canonical text of every field that decides which ops and
//   lanes exist: devices D, stages per device v, micro-batches M, the device of
//   every stage (the placement), whether W is separate, whether offload is
//   allowed, whether memory is limited, the host links (a partition, sorted)
//   and the objective. Rows are only compared within one structure.
//
// - `buckets`, the parameters as proportions, each rounded to a log-spaced
//   bucket of 4%:
//       bucket(x) = round(ln(clamp(x, 1e-3, 1e6)) / ln(1.04))
//   in this order:
//     times, relative to T = the largest stage time (max over s of f+b+w):
//       f[s]/T, b[s]/T (b+w when the backward is fused), w[s]/T (split only)
//       for every stage; CommTime(s)/T for s < S-1 (0 between stages on one
//       device); offload[s]/T for every stage (offload only);
//     memory, only with a limit, in activations: per device d, the room
//       (limit[d] - static[d]) / A[d] with A[d] the largest activation of d's
//       stages; per stage activation[s]/A[device], freed_by_b[s]/activation[s]
//       (split only), offloadable[s]/activation[s] (offload only).
//   Proportions make the key scale-free: a problem in other units, or with
//   every time (or every memory amount) multiplied by one factor, has the same
//   key, and its schedules are the same schedules scaled. Ratios below 1e-3
//   (a comm time of 0, say) share the lowest bucket, -176: they barely move a
//   schedule, and the cache re-times and checks whatever it returns anyway.
//
// The distance between two keys of one structure is the largest difference
// of one bucket (L-infinity): at distance d every proportion is within a
// factor of about 1.04^d of the other's.
//
//   CacheKey k = MakeCacheKey(problem);
//   std::string text = ToString(k);  // "optpipe-key/1 D=4 v=1 M=8 ... @ -28,-28,..."
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"

namespace optpipe {

// The bucket rule above, shared by the key and its tests.
inline constexpr double kBucketBase = 1.04;
inline constexpr double kLeastRatio = 1e-3;
inline constexpr double kGreatestRatio = 1e6;
int Bucket(double ratio);

struct CacheKey {
  std::string structure;     // canonical text, "optpipe-key/1 D=... objective=..."
  std::vector<int> buckets;  // the parameters, in the order above
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// The key of a problem that passes Validate.
CacheKey MakeCacheKey(const Problem& p);

// T above: the largest stage time (f+b+w), the unit of every time in the key.
double LargestStageTime(const Problem& p);

// "STRUCTURE @ B0,B1,...": the key's one-line text form (cache show KEY).
std::string ToString(const CacheKey& k);
std::string BucketsText(const std::vector<int>& buckets);
StatusOr<CacheKey> ParseCacheKey(const std::string& text);
StatusOr<std::vector<int>> ParseBuckets(const std::string& text);

// L-infinity distance between two bucket vectors; -1 when their lengths differ
// (keys of different structures are never compared).
int KeyDistance(const std::vector<int>& a, const std::vector<int>& b);

}  // namespace optpipe
