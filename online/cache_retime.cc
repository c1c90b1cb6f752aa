// Retime and DefaultCachePath (online/cache.h): the cache's pieces that need
// no database.
#include <filesystem>

#include "core/checker.h"
#include "online/cache.h"

namespace optpipe {
namespace {

// The schedule simulated on p and passed by the checker, or nullopt.
std::optional<Retimed> Certified(const Problem& p, Schedule s) {
  StatusOr<SimResult> sim = Simulate(p, s);
  if (!sim.ok()) return std::nullopt;
  if (!CheckSchedule(p, ToTimed(p, s, *sim)).valid()) return std::nullopt;
  return Retimed{std::move(s), std::move(*sim)};
}

}  // namespace

StatusOr<Retimed> Retime(const Problem& p, const TimedSchedule& t, double scale) {
  StatusOr<Schedule> orders = OrdersOf(p, t);
  if (!orders.ok()) return orders.status();
  // Holds keep a method's deliberate waits (a reload due just in time); in
  // the new units they move with the time scale.
  Schedule held = *orders;
  const double factor = scale > 0 ? LargestStageTime(p) / scale : 1.0;
  for (double& r : held.release) r *= factor;
  Schedule asap = std::move(*orders);
  asap.release.clear();
  std::optional<Retimed> a = Certified(p, std::move(held));
  std::optional<Retimed> b = Certified(p, std::move(asap));
  if (a && (!b || b->sim.objective >= a->sim.objective * (1 - 1e-9))) return std::move(*a);
  if (b) return std::move(*b);
  return Infeasible(
      "the cached orders do not fit this problem (they deadlock, exceed memory "
      "or break a rule when re-timed)");
}

std::string DefaultCachePath(const std::string& optpipe_cache, const std::string& xdg_cache_home,
                             const std::string& home) {
  namespace fs = std::filesystem;
  if (!optpipe_cache.empty()) return optpipe_cache;
  if (!xdg_cache_home.empty()) return (fs::path(xdg_cache_home) / "optpipe/schedules.db").string();
  if (!home.empty()) return (fs::path(home) / ".cache/optpipe/schedules.db").string();
  return "";
}

}  // namespace optpipe
