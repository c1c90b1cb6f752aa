// The rows of `optpipe bench` and the ways they are shown: a table (Markdown,
// CSV, JSON) and, for `--report DIR`, a Markdown report with an SVG plot of
// every method's objective per problem, normalised to the problem's lower bound.
//
//   std::vector<BenchRow> rows = ...;            // one per (problem, method)
//   WriteFile(dir / "report.md", BenchReportMarkdown(rows, "report.svg"));
//   WriteFile(dir / "report.svg", BenchReportSvg(rows));
//
// The SVG's root carries its vertical scale for tools and tests: data-y-bound
// (the y of ratio 1, the bound) and data-px-per-unit (pixels per unit of
// ratio); each bar is <rect class="bar" data-problem data-method data-ratio>.
#pragma once

#include <string>
#include <vector>

namespace optpipe::cli {

struct BenchRow {
  std::string problem, method;
  std::string status;  // "ok", "not applicable", "infeasible" or "error: ..."
  std::string reason;  // why there are no numbers (json only: too long for a table)
  std::string termination;
  double objective = 0, makespan = 0, device_span = 0, peak = 0;
  double ratio = 0;  // objective / the best objective of any method on the problem
  double bound = 0;  // the best lower bound known for the problem
  double gap = 0;    // (objective - bound) / objective
  double wall_s = 0;
  int invalid = 0;  // checker violations of the schedule
  bool has_numbers() const { return status == "ok"; }
};

// The rows as a table: "md", "csv" or "json".
std::string BenchTable(const std::vector<BenchRow>& rows, const std::string& format);

// objective / bound, the plotted and reported value of a row with numbers.
double BoundRatio(const BenchRow& r);

// A report: the problems x methods summary of objective / bound (best per
// problem in bold, why a method has no number otherwise), the picture `svg_name`
// and the full table.
std::string BenchReportMarkdown(const std::vector<BenchRow>& rows, const std::string& svg_name);

// Grouped bars, one group per problem and one bar per method, bar height
// objective / bound above 1 (the bound); methods without a number keep their
// slot with a grey "n/a", "OOM" or "error" mark.
std::string BenchReportSvg(const std::vector<BenchRow>& rows);

}  // namespace optpipe::cli
