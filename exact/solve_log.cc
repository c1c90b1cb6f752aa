#include "exact/solve_log.h"

#include <cstdio>

#include "core/lower_bound.h"
#include "core/text_format.h"

namespace optpipe::solve_internal {
namespace {

using Clock = std::chrono::steady_clock;

std::string Fixed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

SolveLog::SolveLog(const Problem& p, const SolveOptions& opt)
    : out_(opt.log), method_(opt.method), t0_(Clock::now()), last_row_(t0_) {
  if (!out_) return;
  bound_ = ComputeLowerBound(p).value;  // proven at once; the summary has the final one
  std::string limits = opt.evaluations ? std::to_string(*opt.evaluations) + " evaluations"
                                       : "time limit " + FormatNumber(opt.time_limit_s) + " s";
  std::lock_guard<std::mutex> lock(mu_);
  Line(p.name + ": " + std::to_string(p.devices) + " devices x " + std::to_string(p.microbatches) +
       " micro-batches, " + std::to_string(p.stages()) + " stages, " + std::to_string(OpCount(p)) +
       " ops" + (p.offload ? ", offload" : "") + (p.memory_limit ? ", memory limit" : "") + "; " +
       method_ + ", " + limits + ", " +
       (opt.threads > 0 ? std::to_string(opt.threads) : std::string("all")) + " thread(s)");
  Line("      time   incumbent       bound      gap  found by");
  ticker_ = std::thread([this] { Tick(); });
}

SolveLog::~SolveLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

std::function<void(const std::string&)> SolveLog::sink() {
  if (!out_) return nullptr;
  return [this](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    out_(line);
  };
}

void SolveLog::Improved(double objective, const std::string& by) {
  if (!out_) return;
  std::lock_guard<std::mutex> lock(mu_);
  incumbent_ = objective;
  by_ = by.empty() ? method_ : by;
  Row('*');
}

void SolveLog::Summary(const SolveResult& r) {
  if (!out_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  std::string line = method_ + ": ";
  if (r.has_schedule()) {
    line += "objective " + FormatNumber(r.objective) + ", bound " + FormatNumber(r.bound) +
            ", gap " + Fixed("%.2f%%", 100 * r.gap) + ", ";
  }
  line += std::string(ToString(r.termination)) + " after " + Fixed("%.2f", r.stats.wall_s) + " s";
  if (r.stats.evaluations > 0) line += ", " + std::to_string(r.stats.evaluations) + " evaluations";
  if (r.stats.nodes > 0) line += ", " + std::to_string(r.stats.nodes) + " nodes";
  if (!r.stats.found_by.empty()) line += "; found by " + r.stats.found_by;
  std::lock_guard<std::mutex> lock(mu_);
  Line(line);
}

void SolveLog::Line(const std::string& text) { out_("solve: " + text); }

void SolveLog::Row(char mark) {
  last_row_ = Clock::now();
  const double t = std::chrono::duration<double>(last_row_ - t0_).count();
  const bool have = incumbent_ > 0;
  const double gap = have ? (incumbent_ - bound_) / incumbent_ : 0;
  Line(std::string(1, mark) + Fixed(" %8.2f", t) +
       (have ? Fixed(" %11.6g", incumbent_) : std::string("           -")) +
       Fixed(" %11.6g", bound_) + (have ? Fixed(" %7.2f%%", 100 * gap) : "        -") + "  " + by_);
}

// A row whenever a second has passed without one.
void SolveLog::Tick() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    const Clock::time_point next = last_row_ + std::chrono::seconds(1);
    if (cv_.wait_until(lock, next, [&] { return done_; })) break;
    if (Clock::now() >= last_row_ + std::chrono::seconds(1)) Row(' ');
  }
}

}  // namespace optpipe::solve_internal
