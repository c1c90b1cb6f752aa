// Number and markup formatting shared by core's messages and pictures, so that
// a value reads the same in an error, a Gantt chart and a terminal timeline.
//
//   FormatNumber(51.3)          -> "51.3"      (shortest, 6 significant digits)
//   FormatFixed(12.50, 2)       -> "12.5"      (at most 2 decimals, zeros trimmed)
//   FormatFixed(12.5, 2, true)  -> "12.50"
//   NiceStep(7.3)               -> 10          (axis ticks: 1, 2 or 5 x 10^k)
//   XmlEscape("a<b")            -> "a&lt;b"
#pragma once

#include <string>
#include <vector>

namespace optpipe {

// Shortest ostream form with `precision` significant digits.
std::string FormatNumber(double x, int precision = 6);
// Fixed-point with `decimals` digits, trailing zeros trimmed unless `keep_zeros`
// (for aligned table columns): "12.5", "30", never "-0"; from 1e15 on, as
// FormatNumber ("2e+300", where the digits had been cut at 63).
std::string FormatFixed(double x, int decimals, bool keep_zeros = false);
// The smallest 1, 2 or 5 times a power of ten that is at least `raw` (> 0).
double NiceStep(double raw);
// The multiples of `step` in [t0, t1], at most `max_count` of them: axis
// ticks without integer overflow (none where t0/step is beyond a double's
// exact integers: times far from zero relative to their spread).
std::vector<double> Ticks(double t0, double t1, double step, int max_count);
// Decimals needed to print multiples of `step` exactly (0..6).
int DecimalsFor(double step);
// Text safe inside an XML attribute or element.
std::string XmlEscape(const std::string& s);

}  // namespace optpipe
