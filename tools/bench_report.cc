#include "tools/bench_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/gantt_svg.h"
#include "core/text_format.h"

namespace optpipe::cli {
namespace {

const std::vector<std::string> kHeader = {
    "problem",     "method", "status", "termination", "objective", "makespan", "device_span",
    "peak_memory", "ratio",  "bound",  "gap",         "time_s",    "invalid"};

std::string Fixed(double x, int digits) { return FormatFixed(x, digits, true); }

std::vector<std::string> Cells(const BenchRow& r) {
  if (!r.has_numbers())
    return {r.problem, r.method, r.status, "", "", "", "", "", "", "", "", Fixed(r.wall_s, 3), ""};
  return {r.problem,
          r.method,
          r.status,
          r.termination,
          Fixed(r.objective, 4),
          Fixed(r.makespan, 4),
          Fixed(r.device_span, 4),
          Fixed(r.peak, 4),
          Fixed(r.ratio, 4),
          Fixed(r.bound, 4),
          Fixed(100 * r.gap, 2) + "%",
          Fixed(r.wall_s, 3),
          std::to_string(r.invalid)};
}

std::string MarkdownRow(std::vector<std::string> cells) {
  std::string out = "|";
  for (std::string& c : cells) {
    std::replace(c.begin(), c.end(), '|', '/');
    out += " " + c + " |";
  }
  return out + "\n";
}

std::string MarkdownTable(const std::vector<BenchRow>& rows) {
  std::string out = MarkdownRow(kHeader) + "|";
  for (std::size_t i = 0; i < kHeader.size(); ++i) out += i < 3 ? "---|" : "---:|";
  out += "\n";
  for (const BenchRow& r : rows) out += MarkdownRow(Cells(r));
  return out;
}

std::string CsvTable(const std::vector<BenchRow>& rows) {
  const auto quote = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  const auto line = [&](const std::vector<std::string>& c) {
    std::string out;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (i) out += ',';
      out += quote(c[i]);
    }
    return out + "\n";
  };
  std::string out = line(kHeader);
  for (const BenchRow& r : rows) out += line(Cells(r));
  return out;
}

std::string JsonTable(const std::vector<BenchRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const BenchRow& r : rows) {
    nlohmann::json j{
        {"problem", r.problem}, {"method", r.method}, {"status", r.status}, {"time_s", r.wall_s}};
    if (!r.reason.empty()) j["reason"] = r.reason;
    if (r.has_numbers()) {
      j.update({{"termination", r.termination},
                {"objective", r.objective},
                {"makespan", r.makespan},
                {"device_span", r.device_span},
                {"peak_memory", r.peak},
                {"ratio", r.ratio},
                {"bound", r.bound},
                {"gap", r.gap},
                {"invalid", r.invalid}});
    }
    out.push_back(std::move(j));
  }
  return out.dump(1) + "\n";
}

// What a row without numbers is called in the summary and the plot.
std::string Mark(const BenchRow& r) {
  if (r.status == "not applicable") return "n/a";
  if (r.status == "infeasible") return "OOM";
  return "error";
}

// Problems and methods in the order they first appear.
struct Grid {
  std::vector<std::string> problems, methods;
  std::map<std::pair<std::string, std::string>, const BenchRow*> at;
  std::map<std::string, double> best;  // per problem, the least ratio of a valid row
};

Grid MakeGrid(const std::vector<BenchRow>& rows) {
  Grid g;
  for (const BenchRow& r : rows) {
    if (std::find(g.problems.begin(), g.problems.end(), r.problem) == g.problems.end())
      g.problems.push_back(r.problem);
    if (std::find(g.methods.begin(), g.methods.end(), r.method) == g.methods.end())
      g.methods.push_back(r.method);
    g.at[{r.problem, r.method}] = &r;
    if (r.has_numbers() && !r.invalid) {
      const auto it = g.best.find(r.problem);
      if (it == g.best.end() || BoundRatio(r) < it->second) g.best[r.problem] = BoundRatio(r);
    }
  }
  return g;
}

bool IsBest(const Grid& g, const BenchRow& r) {
  const auto it = g.best.find(r.problem);
  return r.has_numbers() && !r.invalid && it != g.best.end() && BoundRatio(r) <= it->second + 1e-9;
}

// Tableau 10, then ten more hues far from those and from each other, so that
// neighbouring bars of up to 20 methods stay distinguishable.
const char* kColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
                          "#1f3a93", "#17becf", "#333333", "#a6d854", "#d62fa0",
                          "#8c6d31", "#6b6ecf", "#637939", "#e7969c", "#843c39"};

std::string Num(double x) { return FormatFixed(x, 2); }

}  // namespace

std::string BenchTable(const std::vector<BenchRow>& rows, const std::string& format) {
  if (format == "json") return JsonTable(rows);
  if (format == "csv") return CsvTable(rows);
  return MarkdownTable(rows);
}

double BoundRatio(const BenchRow& r) { return r.bound > 0 ? r.objective / r.bound : 1.0; }

std::string BenchReportMarkdown(const std::vector<BenchRow>& rows, const std::string& svg_name) {
  const Grid g = MakeGrid(rows);
  std::ostringstream md;
  md << "# optpipe bench report\n\n"
     << "Objective of every method on every problem, divided by the problem's lower bound "
        "(1.000 = provably optimal; the bound is core's lower bound or a better one a method "
        "proved). **Bold**: the best on the problem. `n/a`: the method does not apply; `OOM`: it "
        "does not fit the memory limit; `error`: it failed (see the table below).\n\n"
     << "![objective / lower bound per problem and method](" << svg_name << ")\n\n";
  std::vector<std::string> head = {"problem", "bound"};
  head.insert(head.end(), g.methods.begin(), g.methods.end());
  md << MarkdownRow(head) << "|---|---:|";
  for (std::size_t i = 0; i < g.methods.size(); ++i) md << "---:|";
  md << "\n";
  for (const std::string& p : g.problems) {
    std::vector<std::string> cells = {p, ""};
    for (const std::string& m : g.methods) {
      const auto it = g.at.find({p, m});
      if (it == g.at.end()) {
        cells.push_back("");
        continue;
      }
      const BenchRow& r = *it->second;
      if (!r.has_numbers()) {
        cells.push_back(Mark(r));
        continue;
      }
      cells[1] = FormatNumber(r.bound);
      std::string c = Fixed(BoundRatio(r), 3);
      if (r.invalid) c += " (invalid)";
      cells.push_back(IsBest(g, r) ? "**" + c + "**" : c);
    }
    md << MarkdownRow(cells);
  }
  md << "\n## Every run\n\n"
     << "objective, makespan, device_span and peak_memory (largest device) in the problem's "
        "units; ratio to the best method on the problem; gap = (objective - bound) / "
        "objective; time_s wall-clock; invalid = checker violations (0 unless a schedule is "
        "wrong).\n\n"
     << MarkdownTable(rows);
  bool reasons = false;
  for (const BenchRow& r : rows) {
    if (r.has_numbers() || r.reason.empty()) continue;
    if (!reasons) md << "\n## Why some methods have no number\n\n";
    reasons = true;
    md << "- " << r.problem << " / " << r.method << ": " << r.reason << "\n";
  }
  return md.str();
}

std::string BenchReportSvg(const std::vector<BenchRow>& rows) {
  const Grid g = MakeGrid(rows);
  constexpr double kLeft = 64, kRight = 24, kTop = 64, kPlotH = 300, kBarW = 16, kGroupGap = 28;
  constexpr double kFont = 11, kValueFont = 9, kLabelRoom = 40;  // room above the tallest bar

  double top = 1.05;
  for (const BenchRow& r : rows) {
    if (r.has_numbers()) top = std::max(top, BoundRatio(r));
  }
  const double step = NiceStep((top - 1) / 5);
  top = 1 + std::ceil((top - 1) / step - 1e-9) * step;
  const double scale = (kPlotH - kLabelRoom) / (top - 1);  // px per unit of ratio
  const double y_bound = kTop + kPlotH;
  const auto Y = [&](double ratio) { return y_bound - (ratio - 1) * scale; };

  // Groups: wide enough for their bars and their name.
  std::vector<double> group_x, group_w;
  double x = kLeft + kGroupGap / 2;
  for (const std::string& p : g.problems) {
    const double w = std::max(g.methods.size() * kBarW, LabelWidthPx(p.size(), kFont) + 8);
    group_x.push_back(x);
    group_w.push_back(w);
    x += w + kGroupGap;
  }
  const double width = std::max(x - kGroupGap / 2 + kRight, 480.0);

  // Legend rows under the problem names.
  std::vector<std::pair<double, double>> legend_xy;
  double lx = kLeft, ly = y_bound + 44;
  for (const std::string& m : g.methods) {
    const double w = 18 + LabelWidthPx(m.size(), kFont) + 14;
    if (lx + w > width - kRight && lx > kLeft) {
      lx = kLeft;
      ly += 18;
    }
    legend_xy.push_back({lx, ly});
    lx += w;
  }
  const double height = ly + 28;

  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(width) << "\" height=\""
    << Num(height) << "\" viewBox=\"0 0 " << Num(width) << " " << Num(height)
    << "\" data-y-bound=\"" << Num(y_bound) << "\" data-px-per-unit=\"" << FormatNumber(scale, 10)
    << "\">\n"
    << "<style>\n"
       "text{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;font-size:11px;fill:#222}\n"
       ".title{font-size:15px;font-weight:bold}\n"
       ".sub{font-size:12px}\n"
       ".tick{font-size:10px;text-anchor:end;fill:#555}\n"
       ".value{font-size:9px}\n"
       ".best{font-weight:bold}\n"
       ".none{font-size:9px;fill:#888}\n"
       ".grid{stroke:#ddd;stroke-width:1}\n"
       ".axis{stroke:#444;stroke-width:1}\n"
       "</style>\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
    << "<text class=\"title\" x=\"12\" y=\"22\">optpipe bench: objective / lower bound</text>\n"
    << "<text class=\"sub\" x=\"12\" y=\"40\">" << g.problems.size() << " problems \xC3\x97 "
    << g.methods.size()
    << " methods \xC2\xB7 1 = the bound (optimal) \xC2\xB7 lower is better \xC2\xB7 n/a: does "
       "not apply, OOM: does not fit memory</text>\n";

  // Y axis: grid lines and ticks from 1 to the top.
  s << "<g class=\"yaxis\">\n";
  for (int k = 0;; ++k) {
    const double v = 1 + k * step;
    if (v > top + 1e-9) break;
    s << "<line class=\"grid\" x1=\"" << Num(kLeft) << "\" y1=\"" << Num(Y(v)) << "\" x2=\""
      << Num(width - kRight) << "\" y2=\"" << Num(Y(v)) << "\"/>\n"
      << "<text class=\"tick\" x=\"" << Num(kLeft - 6) << "\" y=\"" << Num(Y(v) + 3.5) << "\">"
      << FormatFixed(v, std::max(2, DecimalsFor(step)), true) << "</text>\n";
  }
  s << "<line class=\"axis\" x1=\"" << Num(kLeft) << "\" y1=\"" << Num(kTop) << "\" x2=\""
    << Num(kLeft) << "\" y2=\"" << Num(y_bound) << "\"/>\n"
    << "<line class=\"axis\" x1=\"" << Num(kLeft) << "\" y1=\"" << Num(y_bound) << "\" x2=\""
    << Num(width - kRight) << "\" y2=\"" << Num(y_bound) << "\"/>\n"
    << "</g>\n";

  // Bars, one group per problem; a method keeps its slot in every group.
  for (std::size_t pi = 0; pi < g.problems.size(); ++pi) {
    const std::string& p = g.problems[pi];
    const double x0 = group_x[pi] + (group_w[pi] - g.methods.size() * kBarW) / 2;
    s << "<g class=\"problem\" data-problem=\"" << XmlEscape(p) << "\">\n";
    for (std::size_t mi = 0; mi < g.methods.size(); ++mi) {
      const auto it = g.at.find({p, g.methods[mi]});
      if (it == g.at.end()) continue;
      const BenchRow& r = *it->second;
      const double bx = x0 + mi * kBarW, cx = bx + kBarW / 2;
      if (!r.has_numbers()) {
        s << "<text class=\"none\" transform=\"translate(" << Num(cx + 3) << " " << Num(y_bound - 4)
          << ") rotate(-90)\">" << Mark(r) << "</text>\n";
        continue;
      }
      const double ratio = BoundRatio(r);
      const double h = std::max(1.5, (ratio - 1) * scale);
      s << "<rect class=\"bar\" data-problem=\"" << XmlEscape(p) << "\" data-method=\""
        << XmlEscape(r.method) << "\" data-ratio=\"" << FormatNumber(ratio, 10) << "\" x=\""
        << Num(bx + 1) << "\" y=\"" << Num(y_bound - h) << "\" width=\"" << Num(kBarW - 2)
        << "\" height=\"" << Num(h) << "\" fill=\"" << kColours[mi % 20] << "\"><title>"
        << XmlEscape(p + " / " + r.method + ": " + FormatNumber(r.objective) + " = " +
                     Fixed(ratio, 4) + " x bound " + FormatNumber(r.bound))
        << "</title></rect>\n"
        << "<text class=\"value" << (IsBest(g, r) ? " best" : "") << "\" transform=\"translate("
        << Num(cx + kValueFont * 0.35) << " " << Num(y_bound - h - 3) << ") rotate(-90)\">"
        << Fixed(ratio, 3) << "</text>\n";
    }
    s << "<text x=\"" << Num(group_x[pi] + group_w[pi] / 2) << "\" y=\"" << Num(y_bound + 18)
      << "\" text-anchor=\"middle\">" << XmlEscape(p) << "</text>\n</g>\n";
  }

  s << "<g class=\"legend\">\n";
  for (std::size_t mi = 0; mi < g.methods.size(); ++mi) {
    const auto [lx0, ly0] = legend_xy[mi];
    s << "<rect x=\"" << Num(lx0) << "\" y=\"" << Num(ly0 - 10) << "\" width=\"12\" height=\"12\""
      << " fill=\"" << kColours[mi % 20] << "\"/>\n"
      << "<text x=\"" << Num(lx0 + 17) << "\" y=\"" << Num(ly0) << "\">" << XmlEscape(g.methods[mi])
      << "</text>\n";
  }
  s << "</g>\n</svg>\n";
  return s.str();
}

}  // namespace optpipe::cli
