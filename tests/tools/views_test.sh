#!/usr/bin/env bash
# End-to-end checks of the views of a schedule: `schedule --svg/--trace/--csv`,
# `draw`, `show` and `import-csv` (exit codes, messages, round trips).
# Usage: views_test.sh OPTPIPE SOURCE_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"

unit=$cases/unit-4x8.json
llama=$cases/llama-8dev-offload.json

# schedule writes every view next to the JSON.
want="" expect 0 "schedule zb-h1 with views" -- "$bin" schedule "$unit" --method zb-h1 -o "$tmp/zb.json" \
  --svg "$tmp/zb.svg" --trace "$tmp/zb.trace.json" --csv "$tmp/zb.csv"
check "svg is XML with one op group per op" -- python3 - "$tmp/zb.svg" "$tmp/zb.json" <<'PY'
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ops = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "op"]
n = len(json.load(open(sys.argv[2]))["ops"])
assert len(ops) == n, (len(ops), n)
PY
check "trace is JSON with one X event per op" -- python3 - "$tmp/zb.trace.json" "$tmp/zb.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
n = len(json.load(open(sys.argv[2]))["ops"])
assert sum(e["ph"] == "X" for e in ev) == n
PY
check "csv has one row per rank using I and W" -- python3 - "$tmp/zb.csv" <<'PY'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert len(rows) == 4, rows
assert all(re.fullmatch(r"\d+[FIW]\d+", c) for r in rows for c in r)
assert sum(len(r) for r in rows) == 4 * 8 * 3
PY

# import-csv times the CSV again: the same makespan as the schedule it came from.
want="makespan" expect 0 "import-csv round trip" -- "$bin" import-csv "$unit" "$tmp/zb.csv" -o "$tmp/back.json"
want='"valid": true' expect 0 "imported schedule validates" -- "$bin" validate "$unit" "$tmp/back.json" --json
m1=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['makespan'])" "$tmp/zb.json")
m2=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['makespan'])" "$tmp/back.json")
if [ "$m1" = "$m2" ]; then passed=$((passed + 1)); else
  echo "FAIL: makespan after import $m2, before $m1"; failed=$((failed + 1)); fi

# Malformed CSVs: exit 2, the message names row and column.
printf '0F0,0F1,0X0\n1F0\n2F0\n3F0\n' >"$tmp/bad.csv"
want="row 1 (rank 0), column 3: '0X0': unknown action" expect 2 "unknown action" -- \
  "$bin" import-csv "$unit" "$tmp/bad.csv" -o "$tmp/x.json"
head -n 3 "$tmp/zb.csv" >"$tmp/short.csv"
want="expected 4 rows" expect 2 "wrong rank count" -- "$bin" import-csv "$unit" "$tmp/short.csv"
sed '1s/^0F0/1F0/' "$tmp/zb.csv" >"$tmp/wrongdev.csv"
want="row 1 (rank 0), column 1: '1F0': stage 1 runs on device 1" expect 2 "op on the wrong device" -- \
  "$bin" import-csv "$unit" "$tmp/wrongdev.csv"
want="" expect 2 "missing file" -- "$bin" import-csv "$unit" "$tmp/nope.csv"

# Orders that parse but cannot run: exit 3.
python3 - "$tmp/dead.csv" <<'PY'
import sys
# Device 0 runs 0I0 (waits for 1I0); device 1 runs micro-batch 1 first (waits for 0F1).
rows = [["0F0", "0I0", "0W0", "0F1", "0I1", "0W1"] + [f"0{t}{m}" for m in range(2, 8) for t in "FIW"],
        ["1F1", "1I1", "1W1", "1F0", "1I0", "1W0"] + [f"1{t}{m}" for m in range(2, 8) for t in "FIW"],
        [f"2{t}{m}" for m in range(8) for t in "FIW"], [f"3{t}{m}" for m in range(8) for t in "FIW"]]
open(sys.argv[1], "w").write("\n".join(",".join(r) for r in rows) + "\n")
PY
want="cannot run" expect 3 "deadlocking order" -- "$bin" import-csv "$unit" "$tmp/dead.csv"
python3 - "$tmp/gpipe-llama.csv" <<'PY'
import sys
# GPipe on llama: 32 activations per device do not fit 42.
rows = [[f"{d}F{m}" for m in range(32)] + [f"{d}{t}{m}" for m in range(32) for t in "IW"] for d in range(8)]
open(sys.argv[1], "w").write("\n".join(",".join(r) for r in rows) + "\n")
PY
want="cannot run" expect 3 "order that never fits memory" -- "$bin" import-csv "$llama" "$tmp/gpipe-llama.csv"

# draw: the kind follows the extension.
want="wrote" expect 0 "draw svg" -- "$bin" draw "$unit" "$tmp/zb.json" -o "$tmp/d.svg"
check "draw svg equals schedule --svg" -- cmp "$tmp/d.svg" "$tmp/zb.svg"
want="" expect 0 "draw trace" -- "$bin" draw "$unit" "$tmp/zb.json" -o "$tmp/d.json"
check "draw trace equals schedule --trace" -- cmp "$tmp/d.json" "$tmp/zb.trace.json"
want="" expect 0 "draw csv" -- "$bin" draw "$unit" "$tmp/zb.json" -o "$tmp/d.csv"
check "draw csv equals schedule --csv" -- cmp "$tmp/d.csv" "$tmp/zb.csv"
want="" expect 0 "draw narrow, no memory" -- "$bin" draw "$llama" "$tmp/back.json" -o "$tmp/n.svg" \
  --width 400 --no-memory
want="" expect 2 "draw a problem file given as the schedule" -- "$bin" draw "$unit" "$unit" -o "$tmp/x.svg"
want="" expect 2 "draw without -o" -- "$bin" draw "$unit" "$tmp/zb.json"

# show: one line per device at the requested width.
want="d3 |" expect 0 "show" -- "$bin" show "$unit" "$tmp/zb.json" --width 60
check "show lines are 60 wide" -- bash -c "'$bin' show '$unit' '$tmp/zb.json' --width 60 | grep '^d' | awk '{ if (length(\$0) != 60) exit 1 }'"
want="" expect 2 "show too narrow" -- "$bin" show "$unit" "$tmp/zb.json" --width 5
want="it was made for problem 'unit-4x8', not 'llama-8dev-offload'" \
  expect 0 "show warns of a schedule made for another problem" -- "$bin" show "$llama" "$tmp/zb.json"

# A list schedule with holds (two chunks, room for 3 activations, a slow link):
# its reloads wait for their turn, which the orders alone do not say; read
# back, every op is held at its start, so show, draw, validate and run replay
# the file as written (as soon as possible the orders would deadlock).
tight="$tmp/tight.json"
cat >"$tight" <<'JSON'
{"format": "optpipe-problem/1", "name": "tight", "devices": 8, "microbatches": 16,
 "stages_per_device": 2, "split_backward": false, "stage_time": {"f": 1, "b": 2},
 "offload_time": 2, "memory": {"activation": 1, "limit": 3}}
JSON
check "list schedule, tight memory" -- "$bin" schedule "$tight" --method list -o "$tmp/tight.s.json"
check "the list offloads there" -- grep -q '"type":"R"' "$tmp/tight.s.json"
want="d3 |" expect 0 "show a held schedule" -- "$bin" show "$tight" "$tmp/tight.s.json"
want="" expect 0 "validate a held schedule" -- "$bin" validate "$tight" "$tmp/tight.s.json"
want="" expect 0 "draw a held schedule" -- "$bin" draw "$tight" "$tmp/tight.s.json" -o "$tmp/tight.svg"
want="measured" expect 0 "run a held schedule" -- "$bin" run "$tight" "$tmp/tight.s.json" --time-scale 0.001

# run draws what it measured: one trace event and one Gantt op per op run.
want="measured" expect 0 "run with views" -- "$bin" run "$unit" "$tmp/zb.json" --time-scale 0.001 \
  --trace "$tmp/run.trace.json" --svg "$tmp/run.svg" --measured-out "$tmp/run.m.json"
check "run's trace and svg have every measured op" -- python3 - "$tmp/run.trace.json" "$tmp/run.svg" \
  "$tmp/run.m.json" <<'PY'
import json, sys, xml.etree.ElementTree as ET
n = len(json.load(open(sys.argv[3]))["ops"])
assert n == 96, n
assert sum(e["ph"] == "X" for e in json.load(open(sys.argv[1]))["traceEvents"]) == n
root = ET.parse(sys.argv[2]).getroot()
assert sum(g.get("class") == "op" for g in root.iter("{http://www.w3.org/2000/svg}g")) == n
PY

# Help texts teach the formats.
want="compute_only" expect 0 "import-csv --help" -- "$bin" import-csv --help
want="Perfetto" expect 0 "draw --help" -- "$bin" draw --help
want="lower case" expect 0 "show --help" -- "$bin" show --help
want="--svg" expect 0 "schedule --help" -- "$bin" schedule --help

echo "views: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
