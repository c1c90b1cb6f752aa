#!/usr/bin/env bash
# End-to-end checks of the optpipe CLI: exit codes, messages and the
# schedule -> validate round trip. Usage: cli_test.sh OPTPIPE SOURCE_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"

json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

# schedule -> validate agree on the makespan.
want="" expect 0 "schedule 1f1b" -- "$bin" schedule "$cases/unit-4x8.json" --method 1f1b -o "$tmp/s.json"
want='"valid": true' expect 0 "validate 1f1b" -- "$bin" validate "$cases/unit-4x8.json" "$tmp/s.json" --json
# For people: 1F1B holds 4, 3, 2, 1 activations of 1 (4 x 8 unit problem, W with its B).
want="valid: makespan 30, device_span 30, peak memory [4, 3, 2, 1]" expect 0 "validate text" -- "$bin" validate "$cases/unit-4x8.json" "$tmp/s.json"
m_sched=$(json_field "$tmp/s.json" makespan)
"$bin" validate "$cases/unit-4x8.json" "$tmp/s.json" --json >"$tmp/v.json"
m_val=$(json_field "$tmp/v.json" makespan)
if [ "$m_sched" = "$m_val" ] && [ "$m_sched" = "30.0" ]; then passed=$((passed + 1)); else
  echo "FAIL: makespan schedule=$m_sched validate=$m_val (expected 30.0)"; failed=$((failed + 1)); fi
check "validate --json: format and generator" -- python3 -c "import json, sys
v = json.load(open(sys.argv[1]))
assert v['format'] == 'optpipe-validation/1' and v['generator'].startswith('optpipe '), v
assert v['violations'] == [], v" "$tmp/v.json"
# A broken schedule: its violations as records (an op one unit too long, so its lane overlaps).
python3 -c "import json, sys
s = json.load(open(sys.argv[1]))
op = next(o for o in s['ops'] if (o['stage'], o['microbatch'], o['type']) == (0, 0, 'F'))
op['end'] += 1
json.dump(s, open(sys.argv[2], 'w'))" "$tmp/s.json" "$tmp/broken.json"
"$bin" validate "$cases/unit-4x8.json" "$tmp/broken.json" --json >"$tmp/vb.json"
check "validate --json: exit 1 on a broken schedule" -- test $? -eq 1
check "validate --json: violations as records" -- python3 -c "import json, sys
v = json.load(open(sys.argv[1]))
d = [x for x in v['violations'] if x['kind'] == 'duration']
assert len(d) == 1 and d[0]['op'] == '0F0' and d[0]['device'] == 0 and d[0]['time'] == 0, v
assert all(set(x) == {'kind', 'op', 'device', 'time', 'detail'} for x in v['violations']), v
assert not v['valid'], v" "$tmp/vb.json"

# One device runs its work without a gap: 1F1B is optimal, its bound (core's,
# summed in another order: 3 x 0.8 = 2.4000000000000004) no more than its
# makespan, gap 0 (not a negative rounding error), in the file and for people.
echo '{"format": "optpipe-problem/1", "devices": 1, "microbatches": 3, "stage_time":
  {"f": 0.1, "b": 0.7}}' >"$tmp/one.json"
want="bound 2.4 (gap 0%)" expect 0 "schedule: bound no more than the makespan" -- \
  "$bin" schedule "$tmp/one.json" --method 1f1b -o "$tmp/one-s.json"
check "schedule file: gap 0, bound = makespan" -- python3 -c "import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(0 if s['gap'] == 0 and s['bound'] == s['makespan'] else 1)" "$tmp/one-s.json"

# bound on a problem with offload on a time grid (unit costs, room for two
# activations, a slow link): the device search and the SAT probes run and say
# so on stderr, the order search does not apply (null), and the bound is the
# largest of its parts. The values they reach: tests/exact/solver_claims_test.cc and
# tests/exact/milp_slow_test.cc (the optimum, 33).
tight="$tmp/tight.json"
echo '{"format": "optpipe-problem/1", "devices": 4, "microbatches": 8, "stage_time":
  {"f": 1, "b": 1, "w": 1}, "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5,
  "limit": 2}}' >"$tight"
"$bin" bound "$tight" --json --search-seconds 0.2 >"$tmp/tb.json" 2>"$tmp/tb.err"
check "bound reports the device search and the SAT probes on stderr" -- bash -c \
  'grep -q "device search bound" "$1" && grep -q "SAT probes below" "$1" && grep -q "sat: by " "$1"' \
  - "$tmp/tb.err"
check "bound --json: the largest of its parts, no order search with offload" -- python3 -c "import json, sys
b = json.load(open(sys.argv[1]))
parts = [b[k] for k in ('device_bound', 'critical_path', 'memory_bound', 'device_search_bound',
                        'sat_search_bound')]
sys.exit(0 if b['order_search_bound'] is None and b['order_search_optimal'] is None
         and b['sat_search_optimal'] is not None and b['bound'] >= max(parts) - 1e-9 else 1)" \
  "$tmp/tb.json"
# The same problem with every time scaled by k = 1234567.891 (optimum 33 k):
# on its grain of 0.001 its horizon spans tens of billions of grains, more
# than a SAT probe may encode. The probes prove nothing there, where their grains
# once wrapped around an int and "proved" po-h's 35 k optimal.
k=1234567.891
echo "{\"format\": \"optpipe-problem/1\", \"devices\": 4, \"microbatches\": 8, \"stage_time\":
  {\"f\": $k, \"b\": $k, \"w\": $k}, \"offload_time\": 2469135.782, \"memory\": {\"activation\": 1,
  \"freed_by_b\": 0.5, \"limit\": 2}}" >"$tmp/tight-k.json"
want="" expect 0 "schedule po-h, times scaled" -- "$bin" schedule "$tmp/tight-k.json" --method po-h \
  -o "$tmp/tks.json"
"$bin" bound "$tmp/tight-k.json" --schedule "$tmp/tks.json" --json --search-seconds 0.2 \
  >"$tmp/tkb.json" 2>"$tmp/tkb.err"
check "bound, times scaled: no more than the optimum 33 k, not proven" -- python3 -c "import json, sys
b = json.load(open(sys.argv[1]))
sys.exit(0 if b['bound'] <= 33 * $k * (1 + 1e-12) and b['sat_search_optimal'] is False else 1)" \
  "$tmp/tkb.json"
check "bound, times scaled: the probe says too large" -- grep -q "too large to encode" "$tmp/tkb.err"
# In nanoseconds with fractions (the same times scaled by a thousand), the
# iteration's serial time passes 1e10, where sums of doubles no longer hold a
# millionth of a unit: refused, naming the field and what to do.
sed "s/$k/1234567891.123/g; s/2469135.782/2469135782.246/" "$tmp/tight-k.json" >"$tmp/tight-ns.json"
want="stage_time: the iteration's serial time" expect 2 "schedule: times too large to check" -- \
  "$bin" schedule "$tmp/tight-ns.json" --method po-h
want="give them in a coarser unit" expect 2 "validate: times too large to check" -- \
  "$bin" validate "$tmp/tight-ns.json" "$tmp/tks.json"
# bound --schedule aims at a given schedule (the same problem with 5
# micro-batches, where milp proves its schedule optimal at once): milp's has
# gap 0, po-h's a gap from the bound, which is no more than milp's makespan;
# and 1F1B without offload (the 4x8 unit problem's) does not fit the room.
small="$tmp/small.json"
sed 's/"microbatches": 8/"microbatches": 5/' "$tight" >"$small"
want="" expect 0 "schedule milp small" -- "$bin" schedule "$small" --method milp --time-limit 10 \
  -o "$tmp/sm.json"
want="" expect 0 "schedule po-h small" -- "$bin" schedule "$small" --method po-h -o "$tmp/sp.json"
"$bin" bound "$small" --schedule "$tmp/sm.json" --json >"$tmp/sbm.json" 2>/dev/null
"$bin" bound "$small" --schedule "$tmp/sp.json" --json --search-seconds 0.2 >"$tmp/sbp.json" \
  2>"$tmp/sbp.err"
if python3 - "$tmp/sbm.json" "$tmp/sbp.json" "$tmp/sm.json" "$tmp/sp.json" <<'PY'
import json, sys
bm, bp, sm, sp = (json.load(open(f)) for f in sys.argv[1:])
ok = (bm["schedule_objective"] == sm["makespan"] and bm["schedule_gap"] == 0
      and bm["bound"] == sm["makespan"]
      and bp["schedule_objective"] == sp["makespan"] > sm["makespan"]
      and bp["bound"] <= sm["makespan"]
      and abs(bp["schedule_gap"] - (sp["makespan"] - bp["bound"]) / sp["makespan"]) < 1e-12)
sys.exit(0 if ok else 1)
PY
then passed=$((passed + 1)); else
  echo "FAIL: bound --schedule: $(cat "$tmp/sbm.json") $(cat "$tmp/sbp.json")"
  failed=$((failed + 1)); fi
check "bound --schedule says what it aims at" -- grep -q "(the schedule given)" "$tmp/sbp.err"
want="% to the bound" expect 0 "bound --schedule text" -- \
  "$bin" bound "$small" --schedule "$tmp/sp.json" --search-seconds 0.2
want="--schedule: not a schedule of this problem" expect 1 "bound --schedule that does not fit" -- \
  "$bin" bound "$tight" --schedule "$tmp/s.json"

# Without offload bound runs the order search and reports its probes
# (what it proves: tests/exact/solver_claims_test.cc).
"$bin" bound "$src/tests/bench/problems/hetmem8x16-1f.json" --json >"$tmp/hb.json" 2>"$tmp/hb.err"
check "bound reports the order search's probes on stderr" -- grep -q "order search: probe" "$tmp/hb.err"
check "bound --json: the order search's bound, no SAT probes" -- python3 -c "import json, sys
b = json.load(open(sys.argv[1]))
sys.exit(0 if b['order_search_bound'] is not None and b['sat_search_bound'] is None else 1)" \
  "$tmp/hb.json"

# --write-model: the MILP below the schedule, as free MPS or LP text naming
# its columns (offload choices included); a path that cannot be written is bad
# input. (--time-limit here holds only the bound's searches.)
want="wrote the MILP" expect 0 "schedule --write-model mps" -- "$bin" schedule "$tight" \
  --method list --time-limit 0.1 -o "$tmp/wm.json" --write-model "$tmp/m.mps"
check "model file is MPS with offload columns" -- bash -c \
  "grep -q '^ROWS' '$tmp/m.mps' && grep -q 'Y_s0_m' '$tmp/m.mps' && grep -q 'S_3W7' '$tmp/m.mps'"
want="" expect 0 "schedule --write-model lp" -- "$bin" schedule "$tight" --method list \
  --time-limit 0.1 -o "$tmp/wm.json" --write-model "$tmp/m.lp"
check "model file is LP text minimising C" -- grep -q "^min: +C;" "$tmp/m.lp"
want="$tmp/none/m.lp" expect 2 "unwritable --write-model" -- "$bin" schedule "$tight" \
  --method list --time-limit 0.1 -o "$tmp/wm.json" --write-model "$tmp/none/m.lp"

# --evaluations replaces the clock (which then holds only the bound's
# searches): the same seed gives the same schedule on one thread and on two.
# A negative --threads is bad input.
for t in 1 2; do
  want="" expect 0 "auto --evaluations, $t threads" -- "$bin" schedule "$tight" --method auto \
    --evaluations 3000 --seed 5 --threads "$t" --time-limit 0.2 -o "$tmp/e$t.json"
done
if python3 -c "import json,sys; a,b=(json.load(open(f))['ops'] for f in sys.argv[1:]); sys.exit(a!=b)" \
  "$tmp/e1.json" "$tmp/e2.json"; then passed=$((passed + 1)); else
  echo "FAIL: auto --evaluations 3000 --seed 5 differs on 1 and 2 threads"; failed=$((failed + 1)); fi
want="--threads" expect 2 "negative --threads" -- "$bin" schedule "$tight" --threads -1
want="--time-limit: must be a number > 0, not 0" expect 2 "zero --time-limit" -- \
  "$bin" schedule "$tight" --time-limit 0
want="--time-limit: must be a number >= 0, not soon" expect 2 "--time-limit not a number" -- \
  "$bin" bench "$tight" --time-limit soon
want="--evaluations: must be a number > 0, not 0" expect 2 "zero --evaluations" -- \
  "$bin" schedule "$tight" --evaluations 0

# Corrupting any one op's time makes validate exit 1 naming that op: its end
# alone (a wrong duration), or the whole op moved earlier (the simulator's
# schedule is as early as it can be, so that breaks a rule or a metric).
python3 - "$tmp/s.json" "$tmp" <<'PY' >"$tmp/corrupted.txt"
import copy, json, sys
s = json.load(open(sys.argv[1]))
for i, op in enumerate(s["ops"]):
    for how in ("end", "shift"):
        bad = copy.deepcopy(s)
        o = bad["ops"][i]
        if how == "end":
            o["end"] += 0.25
        else:
            o["start"] -= 0.25
            o["end"] -= 0.25
        path = f"{sys.argv[2]}/bad-{how}-{i}.json"
        json.dump(bad, open(path, "w"))
        print(path, how, f'{op["stage"]}{op["type"]}{op["microbatch"]}')
PY
while read -r path how name; do
  want="op $name" expect 1 "op $name corrupted ($how)" -- "$bin" validate "$cases/unit-4x8.json" "$path"
done <"$tmp/corrupted.txt"
[ "$(wc -l <"$tmp/corrupted.txt")" -eq 192 ] || { echo "FAIL: expected 192 corrupted files"; failed=$((failed + 1)); }

# Every bundled case loads (bound reads the problem; its searches get little time).
for f in "$cases"/*.json; do
  want="lower bound" expect 0 "bound $(basename "$f")" -- "$bin" bound "$f" --search-seconds 0.1
done
want='"bound": 27.0' expect 0 "bound --json" -- "$bin" bound "$cases/unit-4x8.json" --json

# Malformed problems: exit 2 naming the field.
mk() { echo "{\"format\": \"optpipe-problem/1\", \"devices\": 4, \"microbatches\": 8, $1}" >"$tmp/p.json"; }
mk '"stage_time": {"f": -1, "b": 1}'
want="stage_time.f[0]" expect 2 "negative time" -- "$bin" schedule "$tmp/p.json" --method 1f1b
mk '"stage_time": {"f": [1, 1, 1], "b": 1}'
want="stage_time.f" expect 2 "stage array of wrong length" -- "$bin" bound "$tmp/p.json"
mk '"stage_time": {"f": 1, "b": 1}, "memory": {"static": 12, "limit": [20, 20, 20, 10]}'
want="memory.limit[3]" expect 2 "limit below static" -- "$bin" validate "$tmp/p.json" "$tmp/s.json"
want="cannot open" expect 2 "missing file" -- "$bin" bound "$tmp/none.json"
echo '{"format": "optpipe-schedule/1", "ops": [{"device": 0}]}' >"$tmp/bad-s.json"
want="ops[0].stream" expect 2 "malformed schedule" -- "$bin" validate "$cases/unit-4x8.json" "$tmp/bad-s.json"

# Not applicable / infeasible: exit 3 with the reason.
want="not applicable" expect 3 "1f1b on vshape" -- "$bin" schedule "$cases/unit-4x8-vshape.json" --method 1f1b
want="needs peak memory" expect 3 "1f1b over memory" -- "$bin" schedule "$cases/llama-8dev-offload.json" --method 1f1b
want="unknown method" expect 2 "unknown method" -- "$bin" schedule "$cases/unit-4x8.json" --method nope
want="[not applicable" expect 0 "methods PROBLEM" -- "$bin" methods "$cases/unit-4x8-vshape.json"
# Ctrl-C (SIGINT): a search ends early and writes its best schedule so far, a
# run stops every lane (keeping the iterations that ended), a bench prints the
# rows it has; exit 130. hetoff-4s is not proven in 60 s, llama at 10 ms a unit
# runs 25 s, and bench has no device search to run for llama (32 micro-batches)
# before its first row.
# interrupted DESCRIPTION SECONDS TEST command...: runs the command, sends it
# SIGINT after SECONDS; passes when it exits 130 within 6 s and the bash TEST
# (on $out, its output) holds.
interrupted() {
  local what=$1 after=$2 test=$3 start=$SECONDS
  shift 3
  local out="$tmp/int.out"
  # --foreground: one SIGINT, to the command alone, as a terminal's Ctrl-C sends. Without
  # it timeout signals the command and then its process group: a second SIGINT, which
  # kills a command whose handler ran in between ("Ctrl-C again quits at once").
  timeout --foreground --preserve-status -s INT "$after" "$@" >"$out" 2>&1
  local rc=$? took=$((SECONDS - start))
  if [ "$rc" -eq 130 ] && [ "$took" -le 6 ] && out="$out" bash -c "$test"; then
    passed=$((passed + 1))
  else
    echo "FAIL: $what: exit $rc after $took s"; sed 's/^/    /' "$out"; failed=$((failed + 1))
  fi
}
hetoff4s="$src/tests/bench/problems/hetoff-4s.json"
interrupted "Ctrl-C milp: schedule interrupted and valid" 1 \
  "grep -q '\"termination\": \"interrupted\"' '$tmp/int.json' && grep -q 'Ctrl-C again quits' \$out \
   && '$bin' validate '$hetoff4s' '$tmp/int.json'" \
  "$bin" schedule "$hetoff4s" --method milp --time-limit 60 -o "$tmp/int.json"
"$bin" schedule "$cases/llama-8dev-offload.json" --method list -o "$tmp/ll.json" 2>/dev/null
interrupted "Ctrl-C run: every lane stopped" 1 \
  "grep -q 'every lane stopped' \$out && ! grep -q 'still running' \$out" \
  "$bin" run "$cases/llama-8dev-offload.json" "$tmp/ll.json" --time-scale 0.01
interrupted "Ctrl-C run after some iterations: their figures written" 1 \
  "grep -q 'median of' \$out && grep -q 'the figures are those of' \$out && [ -s '$tmp/int.m.json' ]" \
  "$bin" run "$cases/unit-4x8.json" "$tmp/s.json" --iterations 1000 --time-scale 0.002 \
  --measured-out "$tmp/int.m.json"
interrupted "Ctrl-C bench: the row it was in, none after" 1 \
  "grep -q '| llama-8dev-offload | milp | ok | interrupted' \$out && ! grep -q '| unit-4x8' \$out \
   && ! grep -q '| auto' \$out" \
  "$bin" bench "$cases/llama-8dev-offload.json" "$cases/unit-4x8.json" --methods milp,auto \
  --time-limit 60

want="" expect 2 "no subcommand" -- "$bin"
want="validate" expect 0 "--help" -- "$bin" --help

# --quiet (before or after the command) leaves errors and warnings only.
check "--quiet: a success prints nothing on stderr" -- bash -c \
  "'$bin' schedule '$cases/unit-4x8.json' -m zb-h1 -o '$tmp/q.json' --quiet 2>'$tmp/q.err' && test ! -s '$tmp/q.err'"
want="does not fit the memory limit" expect 3 "--quiet: an error still prints" -- \
  "$bin" -q schedule "$cases/llama-8dev-offload.json" -m 1f1b -o "$tmp/q.json"

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
