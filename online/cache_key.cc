#include "online/cache_key.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace optpipe {
namespace {

constexpr const char* kKeyFormat = "optpipe-key/1";
constexpr const char* kSeparator = " @ ";

std::string Joined(const std::vector<int>& v, char sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += std::to_string(v[i]);
  }
  return out;
}

// The host links as a canonical partition: each group sorted, groups by
// their first device ("0,1|2|3"). Lanes follow devices, so the order of
// the groups in the file does not matter.
std::string LinksText(const Problem& p) {
  std::vector<std::vector<int>> groups = p.host_links;
  for (auto& g : groups) std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end());
  std::string out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i) out += '|';
    out += Joined(groups[i], ',');
  }
  return out;
}

std::string StructureText(const Problem& p) {
  std::ostringstream os;
  os << kKeyFormat << " D=" << p.devices << " v=" << p.stages_per_device << " M=" << p.microbatches
     << " placement=" << Joined(p.stage_device, ',') << " split=" << (p.split_backward ? 1 : 0)
     << " offload=" << (p.offload_allowed() ? 1 : 0) << " limit=" << (p.memory_limited() ? 1 : 0)
     << " links=" << LinksText(p)
     << " objective=" << (p.objective == Objective::kMakespan ? "makespan" : "device_span");
  return os.str();
}

double Ratio(double x, double unit) { return unit > 0 ? x / unit : kGreatestRatio; }

void AddTimeBuckets(const Problem& p, std::vector<int>& out) {
  const double t = LargestStageTime(p);
  for (int s = 0; s < p.stages(); ++s) {
    out.push_back(Bucket(Ratio(p.f[s], t)));
    out.push_back(Bucket(Ratio(p.split_backward ? p.b[s] : p.b[s] + p.w[s], t)));
    if (p.split_backward) out.push_back(Bucket(Ratio(p.w[s], t)));
  }
  for (int s = 0; s + 1 < p.stages(); ++s) out.push_back(Bucket(Ratio(CommTime(p, s), t)));
  if (p.offload) {
    for (double o : *p.offload) out.push_back(Bucket(Ratio(o, t)));
  }
}

// Room per device and the memory profile of every stage, in activations.
void AddMemoryBuckets(const Problem& p, std::vector<int>& out) {
  std::vector<double> largest(p.devices, 0.0);
  for (int s = 0; s < p.stages(); ++s) {
    double& a = largest[p.stage_device[s]];
    a = std::max(a, p.activation[s]);
  }
  for (int d = 0; d < p.devices; ++d) {
    out.push_back(Bucket(Ratio((*p.memory_limit)[d] - p.static_memory[d], largest[d])));
  }
  for (int s = 0; s < p.stages(); ++s) {
    const double a = p.activation[s];
    out.push_back(Bucket(Ratio(a, largest[p.stage_device[s]])));
    if (p.split_backward) out.push_back(Bucket(Ratio(p.freed_by_b[s], a)));
    if (p.offload) out.push_back(Bucket(Ratio(p.offloadable[s], a)));
  }
}

}  // namespace

int Bucket(double ratio) {
  const double x = std::clamp(ratio, kLeastRatio, kGreatestRatio);  // NaN: not from Validate
  return static_cast<int>(std::lround(std::log(x) / std::log(kBucketBase)));
}

double LargestStageTime(const Problem& p) {
  double t = 0;
  for (int s = 0; s < p.stages(); ++s) t = std::max(t, p.f[s] + p.b[s] + p.w[s]);
  return t;
}

CacheKey MakeCacheKey(const Problem& p) {
  CacheKey k;
  k.structure = StructureText(p);
  AddTimeBuckets(p, k.buckets);
  if (p.memory_limited()) AddMemoryBuckets(p, k.buckets);
  return k;
}

std::string BucketsText(const std::vector<int>& buckets) { return Joined(buckets, ','); }

std::string ToString(const CacheKey& k) {
  return k.structure + kSeparator + BucketsText(k.buckets);
}

StatusOr<std::vector<int>> ParseBuckets(const std::string& text) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < -100000 || v > 100000) {
      return InvalidArgument("key: bucket " + std::to_string(out.size()) +
                             ": expected an integer, got '" + item + "'");
    }
    out.push_back(static_cast<int>(v));
    pos = comma + 1;
  }
  return out;
}

StatusOr<CacheKey> ParseCacheKey(const std::string& text) {
  const std::size_t at = text.rfind(kSeparator);
  if (text.rfind(kKeyFormat, 0) != 0 || at == std::string::npos) {
    return InvalidArgument("key: expected '" + std::string(kKeyFormat) + " ..." + kSeparator +
                           "B0,B1,...' (as `optpipe cache list` prints it)");
  }
  StatusOr<std::vector<int>> b = ParseBuckets(text.substr(at + std::string(kSeparator).size()));
  if (!b.ok()) return b.status();
  return CacheKey{text.substr(0, at), std::move(*b)};
}

int KeyDistance(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.size() != b.size()) return -1;
  int d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace optpipe
