#!/usr/bin/env bash
# Malformed and extreme input, end to end: every command ends, in its time,
# with an exit code of the CLI's contract (0 ok, 1 invalid, 2 bad input, 3 not
# applicable), on problems and schedules mutated at random from a fixed seed,
# and on the extreme values that once hung a method, ran one out of memory or
# made a probe prove a wrong bound. Usage: inputs_test.sh OPTPIPE SOURCE_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"

check "mutated problems and schedules: exit codes 0-3, no hang" -- python3 - "$bin" "$src" "$tmp" <<'PY'
import copy, json, random, subprocess, sys
bin, src, tmp = sys.argv[1:4]
rng = random.Random(29)
problems = [f"{src}/tests/cases/{n}.json" for n in ("unit-4x8", "gpt-4dev-fused", "llama-8dev-offload")]
problems += [f"{src}/tests/bench/problems/{n}.json" for n in ("hetoff-1f", "u48-r2-o2")]
values = [0, -1, 0.5, 3, 1e-300, 1e308, 2**31, 2**63, 1e10, "x", None, [], {}, True, [1], [0, 0]]
failures = []

def run(args, limit=60):
    try:
        rc = subprocess.run([bin] + args, capture_output=True, timeout=limit).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    if rc not in (0, 1, 2, 3):
        failures.append((rc, args))
    return rc

def paths(o, at=()):
    if at:
        yield at
    items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else []
    for k, v in items:
        yield from paths(v, at + (k,))

def mutate(o):
    at = rng.choice([p for p in paths(o) if p != ("format",)])
    parent = o
    for k in at[:-1]:
        parent = parent[k]
    if rng.random() < 0.1 and isinstance(parent, dict):
        del parent[at[-1]]
    else:
        parent[at[-1]] = copy.deepcopy(rng.choice(values))

# Extreme values that each once broke a command (see the commit log): a w of
# 1e5 among times of 20 (a window of billions of SAT variables), a b of 1e308
# (an infinite sum that hung po-f), memory of 1e308, times scaled to millions
# on a grain of 0.001 (a probe's grains wrapped around an int).
extreme = []
llama = json.load(open(problems[2]))
llama["stage_time"]["w"][6] = 1e5
extreme.append(llama)
het = json.load(open(problems[3]))
het["stage_time"]["b"][0] = 1e308
extreme.append(het)
het = json.load(open(problems[3]))
het["memory"]["activation"] = [1e308] * 4
het["memory"]["limit"] = [1.7e308] * 4
extreme.append(het)
het = json.load(open(problems[3]))
for k in ("f", "b", "w"):
    het["stage_time"][k] = [x * 1234567.891 for x in het["stage_time"][k]]
het["offload_time"] = [x * 1234567.891 for x in het["offload_time"]]
extreme.append(het)

cases = list(extreme)
for _ in range(24):
    o = json.load(open(rng.choice(problems)))
    for _ in range(rng.randint(1, 2)):
        mutate(o)
    cases.append(o)
for i, o in enumerate(cases):
    path = f"{tmp}/p{i}.json"
    json.dump(o, open(path, "w"))
    method = rng.choice(["auto", "milp", "list", "po-f", "zb-h1"])
    run(["schedule", path, "--method", method, "--time-limit", "0.3", "-o", f"{tmp}/s{i}.json"])
    run(["bound", path, "--search-seconds", "0.3"])

# Schedules: a valid one mutated, for validate, show and draw.
unit = problems[0]
run(["schedule", unit, "--method", "zb-h1", "-o", f"{tmp}/zb.json"])
for i in range(12):
    s = json.load(open(f"{tmp}/zb.json"))
    for _ in range(rng.randint(1, 2)):
        if rng.random() < 0.7:
            op = rng.choice(s["ops"])
            op[rng.choice(list(op))] = copy.deepcopy(rng.choice(values + ["F", "copy"]))
        else:
            s["ops"].pop(rng.randrange(len(s["ops"])))
    path = f"{tmp}/m{i}.json"
    json.dump(s, open(path, "w"))
    run(["validate", unit, path])
    run(["show", unit, path])
    run(["draw", unit, path, "-o", f"{tmp}/m{i}.svg"])

for rc, args in failures:  # the command, and the mutated file it read
    print("exit", rc, "from", " ".join(args))
    mutated = [a for a in args if a.startswith(tmp) and a.endswith(".json")][:1]
    for path in mutated:
        print("   ", open(path).read()[:400])
sys.exit(1 if failures else 0)
PY

echo "inputs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
