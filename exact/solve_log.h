// Internal to the facade (exact/solve.cc): the solve's log as MILP solvers
// print theirs. A header (the problem's size, the method, its limits), a row
// on every better schedule (marked *) and at least every second: wall time,
// incumbent, the proven bound, the gap and who found the incumbent; the
// method's own lines in between; one summary line. Every line goes through
// SolveOptions::log, one call at a time, from whichever thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/problem.h"
#include "exact/solve.h"

namespace optpipe::solve_internal {

class SolveLog {
 public:
  // Prints the header and starts the ticker when opt.log is set; else does nothing.
  SolveLog(const Problem& p, const SolveOptions& opt);
  ~SolveLog();  // stops the ticker
  SolveLog(const SolveLog&) = delete;
  SolveLog& operator=(const SolveLog&) = delete;

  // The sink for the method's own lines (serialised with the rows).
  std::function<void(const std::string&)> sink();
  void Improved(double objective, const std::string& by);
  void Summary(const SolveResult& r);

 private:
  void Line(const std::string& text);  // under mu_
  void Row(char mark);                 // under mu_
  void Tick();

  std::function<void(const std::string&)> out_;
  std::string method_;
  std::chrono::steady_clock::time_point t0_, last_row_;
  double bound_ = 0, incumbent_ = 0;
  std::string by_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread ticker_;
};

}  // namespace optpipe::solve_internal
