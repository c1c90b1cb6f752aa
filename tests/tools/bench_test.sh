#!/usr/bin/env bash
# End-to-end checks of `optpipe bench`: the rows' arithmetic (ratio, bound,
# gap), what methods that do not apply or do not fit report, the CSV form, and
# `--report DIR` (Markdown summary and SVG bars drawn to scale).
# Usage: bench_test.sh OPTPIPE SOURCE_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"

unit=$cases/unit-4x8.json
llama=$cases/llama-8dev-offload.json
methods=1f1b,zb-h1,po-h,list

want="wrote" expect 0 "bench json with a report" -- "$bin" bench "$unit" "$llama" --methods "$methods" \
  --time-limit 0.2 --format json --report "$tmp/rep"
"$bin" bench "$unit" "$llama" --methods "$methods" --time-limit 0.2 --format json >"$tmp/rows.json" 2>/dev/null
"$bin" bound "$unit" --json >"$tmp/bound.json"

check "rows: ratio, bound and gap follow from the objectives" -- python3 - "$tmp/rows.json" "$tmp/bound.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
unit_bound = json.load(open(sys.argv[2]))["bound"]
assert len(rows) == 8, len(rows)
by = {(r["problem"], r["method"]): r for r in rows}
# Known outcomes: 1F1B overshoots the Llama case's 42 GiB; PO needs v > 1 or
# offload, which unit-4x8 lacks; 1F1B on unit-4x8 is (M + D - 1)(f + b + w) = 30.
assert by[("llama-8dev-offload", "1f1b")]["status"] == "infeasible", by[("llama-8dev-offload", "1f1b")]
assert "memory" in by[("llama-8dev-offload", "1f1b")]["reason"]
assert by[("unit-4x8", "po-h")]["status"] == "not applicable"
assert abs(by[("unit-4x8", "1f1b")]["objective"] - 30) < 1e-9
for p in {r["problem"] for r in rows}:
    ok = [r for r in rows if r["problem"] == p and r["status"] == "ok"]
    best = min(r["objective"] for r in ok)
    for r in ok:
        assert r["invalid"] == 0, r
        assert abs(r["ratio"] - r["objective"] / best) < 1e-9, r
        assert r["bound"] <= r["objective"] + 1e-9, r
        assert abs(r["gap"] - (r["objective"] - r["bound"]) / r["objective"]) < 1e-9, r
    if p == "unit-4x8":
        assert all(abs(r["bound"] - unit_bound) < 1e-9 for r in ok)
PY

check "report.svg: one bar per row with numbers, drawn to scale" -- python3 - "$tmp/rep/report.svg" "$tmp/rows.json" <<'PY'
import json, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
rows = [r for r in json.load(open(sys.argv[2])) if r["status"] == "ok"]
y_bound, scale = float(root.get("data-y-bound")), float(root.get("data-px-per-unit"))
bars = {(b.get("data-problem"), b.get("data-method")): b
        for b in root.iter(ns + "rect") if b.get("class") == "bar"}
assert set(bars) == {(r["problem"], r["method"]) for r in rows}, (sorted(bars), rows)
for r in rows:
    b = bars[(r["problem"], r["method"])]
    ratio = r["objective"] / r["bound"]
    assert abs(float(b.get("data-ratio")) - ratio) < 1e-6, (b.attrib, ratio)
    h, y = float(b.get("height")), float(b.get("y"))
    assert abs(h - max(1.5, (ratio - 1) * scale)) < 0.02, (b.attrib, ratio, scale)
    assert abs(y + h - y_bound) < 0.02, b.attrib
    assert y >= 0
# Methods without numbers keep their slot with a mark.
marks = [t.text for t in root.iter(ns + "text") if t.get("class") == "none"]
assert sorted(marks) == ["OOM", "n/a"], marks
PY

check "report.md: a summary row per problem, best in bold, marks, every run" -- python3 - "$tmp/rep/report.md" "$tmp/rows.json" <<'PY'
import json, sys
md = open(sys.argv[1]).read().splitlines()
rows = json.load(open(sys.argv[2]))
assert "![" in "\n".join(md) and "report.svg" in "\n".join(md)
head = next(l for l in md if l.startswith("| problem | bound |"))
cols = [c.strip() for c in head.strip("|").split("|")]
assert cols[2:] == ["1f1b", "zb-h1", "po-h", "list"], cols
summary = {}
for l in md:
    c = [x.strip() for x in l.strip("|").split("|")]
    if l.startswith("| ") and len(c) == len(cols) and c[0] in ("unit-4x8", "llama-8dev-offload"):
        summary[c[0]] = dict(zip(cols, c))
assert set(summary) == {"unit-4x8", "llama-8dev-offload"}, summary
assert summary["llama-8dev-offload"]["1f1b"] == "OOM"
assert summary["unit-4x8"]["po-h"] == "n/a"
for p, cells in summary.items():
    ok = [r for r in rows if r["problem"] == p and r["status"] == "ok"]
    best = min(r["objective"] for r in ok)
    for r in ok:
        cell = cells[r["method"]]
        want = "%.3f" % (r["objective"] / r["bound"])
        assert cell.strip("*") == want, (cell, want)
        assert cell.startswith("**") == (abs(r["objective"] - best) < 1e-9), (p, r["method"], cell)
# The full table has one line per run.
runs = [l for l in md if l.count("|") == 14 and l.split("|")[1].strip() in summary]
assert len(runs) == len(rows), runs
PY

want="problem,method,status" expect 0 "bench csv" -- "$bin" bench "$unit" --methods 1f1b --format csv
want="--format" expect 2 "bench unknown format" -- "$bin" bench "$unit" --methods 1f1b --format xml
want="unknown method 'nope'" expect 2 "bench unknown method" -- "$bin" bench "$unit" --methods 1f1b,nope
echo '{"format": "optpipe-problem/1", "devices": 2}' >"$tmp/bad.json"
want="microbatches" expect 2 "bench with a malformed problem after a good one" -- "$bin" bench "$unit" \
  "$tmp/bad.json" --methods 1f1b
cp "$tmp/out" "$tmp/bad.out"
check "bench reads every problem before it runs a method" -- \
  bash -c '! grep -q "optpipe: bench" "$0"' "$tmp/bad.out"
want="report.svg" expect 0 "bench --help" -- "$bin" bench --help

echo "bench: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
