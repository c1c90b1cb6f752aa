#!/usr/bin/env bash
# The schedule cache end to end: schedule --cache misses, stores, then hits
# with the same schedule at once; near hits; cache list|show|remove|import;
# damaged files reported once and ignored. Usage: cache_test.sh OPTPIPE SOURCE_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"

db="$tmp/c.db"
unit="$cases/unit-4x8.json"
# A schedule file without its solve time, for comparing two runs.
schedule_of() { python3 -c "import json, sys
d = json.load(open(sys.argv[1])); d.pop('solve_seconds', None); print(json.dumps(d, sort_keys=True))" "$1"; }

# First run: a miss, solved and stored; second: a hit, the same schedule, no solve.
want="cache: miss" expect 0 "schedule --cache: miss" -- \
  "$bin" schedule "$unit" --cache "$db" --time-limit 0.2 -o "$tmp/s1.json"
cp "$tmp/out" "$tmp/miss.out"
check "schedule --cache: stored" -- grep -q "cache: stored as row 1 of $db" "$tmp/miss.out"
start=$(date +%s%N)
"$bin" schedule "$unit" --cache "$db" -o "$tmp/s2.json" 2>"$tmp/hit.err"
rc=$?
hit_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "cache hit: optpipe schedule returned in $hit_ms ms (the issue asks for < 50 ms)"
check "schedule --cache: hit, exit 0" -- test "$rc" -eq 0
check "schedule --cache: hit says what it saved" -- \
  grep -q "cache: hit (saved ~.* s of solving; stored by auto on 20" "$tmp/hit.err"
check "schedule --cache: the hit is the stored schedule" -- \
  test "$(schedule_of "$tmp/s1.json")" = "$(schedule_of "$tmp/s2.json")"
want='"valid": true' expect 0 "the hit validates" -- "$bin" validate "$unit" "$tmp/s2.json" --json

# F 20% slower: another key, 3 buckets away (f: -25, b and w: -30, were -28): a near hit warm-starts auto.
python3 -c "import json, sys
d = json.load(open(sys.argv[1])); d['name'] = 'unit-slow-f'; d['stage_time']['f'] = 1.2
json.dump(d, open(sys.argv[2], 'w'))" "$unit" "$tmp/slow.json"
want="cache: near (distance 3; row 1 by auto" expect 0 "schedule --cache: near hit" -- \
  "$bin" schedule "$tmp/slow.json" --cache "$db" --time-limit 0.2 -o "$tmp/s3.json"
cp "$tmp/out" "$tmp/near.out"
check "near hit: warm start, then stored" -- \
  bash -c 'grep -q ": warm start" "$1" && grep -q "cache: stored as row 2" "$1"' - "$tmp/near.out"
cp "$db" "$tmp/copy.db"
python3 -c "import json, sys
d = json.load(open(sys.argv[1])); d['stage_time']['f'] = 1.3; json.dump(d, open(sys.argv[2], 'w'))" \
  "$tmp/slow.json" "$tmp/slower.json"
want="takes no warm start" expect 0 "near hit: 1f1b takes no warm start" -- \
  "$bin" schedule "$tmp/slower.json" --method 1f1b --cache "$tmp/copy.db" -o /dev/null

# list, show, remove.
want="unit-4x8" expect 0 "cache list" -- "$bin" cache list --cache "$db"
"$bin" cache --cache "$db" list --json >"$tmp/list.json"
check "cache list --json: two rows, auto's objective 27" -- python3 -c "import json, sys
listed = json.load(open(sys.argv[1]))
rows = listed['rows']
assert listed['format'] == 'optpipe-cache-list/1', listed
sys.exit(0 if [r['id'] for r in rows] == [1, 2] and rows[0]['objective'] == 27
         and rows[0]['method'] == 'auto' and rows[0]['name'] == 'unit-4x8' else 1)" "$tmp/list.json"
want="method: auto (optimal" expect 0 "cache show ID" -- "$bin" cache show 1 --cache "$db" -o "$tmp/shown.json"
check "cache show -o: the stored schedule" -- cmp "$tmp/s1.json" "$tmp/shown.json"
want='"id": 1' expect 0 "cache show PROBLEM --json" -- "$bin" cache show "$unit" --json --cache "$db"
want="no row 7" expect 2 "cache show: no such row" -- "$bin" cache show 7 --cache "$db"
want="removed 1" expect 0 "cache remove" -- "$bin" cache remove 1 --cache "$db"
want="no row 1" expect 2 "cache remove: gone" -- "$bin" cache remove 1 --cache "$db"
want="cache: near (distance 3; row 2" expect 0 "removed: the slower row is near" -- \
  "$bin" schedule "$unit" --method 1f1b --cache "$db" -o /dev/null

# import: a problem and its schedule, another cache file; a schedule of
# another problem is rejected (exit 1).
want="1 added" expect 0 "cache import PROBLEM SCHEDULE" -- \
  "$bin" cache import "$unit" "$tmp/s2.json" --cache "$tmp/other.db"
want="1 added, 0 replaced, 1 kept" expect 0 "cache import OTHER.db" -- \
  "$bin" cache import "$db" --cache "$tmp/other.db"
want="not valid for problem" expect 1 "cache import: a schedule of another problem" -- \
  "$bin" cache import "$tmp/slow.json" "$tmp/s2.json" --cache "$tmp/other.db"
want="no schedule file follows" expect 2 "cache import: a problem alone" -- \
  "$bin" cache import "$unit" --cache "$tmp/other.db"

# The default file: $OPTPIPE_CACHE, else $XDG_CACHE_HOME/optpipe, else ~/.cache/optpipe.
want="cache: miss" expect 0 "default: ~/.cache/optpipe/schedules.db" -- env -u OPTPIPE_CACHE \
  -u XDG_CACHE_HOME HOME="$tmp/home" "$bin" schedule "$unit" --method 1f1b --cache -o /dev/null
check "default: the folder made, the file there" -- test -s "$tmp/home/.cache/optpipe/schedules.db"
want="cache: hit" expect 0 "default: \$OPTPIPE_CACHE" -- env OPTPIPE_CACHE="$db" \
  "$bin" schedule "$unit" --cache -o /dev/null

# Damaged or foreign files: reported once, the schedule solved anyway, the file untouched.
head -c 5000 /dev/urandom >"$tmp/garbage.db"
cp "$db" "$tmp/full.db"
head -c 3000 "$tmp/full.db" >"$tmp/truncated.db"
python3 -c "import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute('create table notes (t text)'); c.commit()" "$tmp/foreign.db"
for f in garbage truncated foreign; do
  cp "$tmp/$f.db" "$tmp/$f.orig"
  want="cache: $tmp/$f.db: " expect 0 "$f cache file: solved without it" -- \
    "$bin" schedule "$unit" --method zb-h1 --cache "$tmp/$f.db" -o "$tmp/s-$f.json"
  check "$f cache file: reported once, no hit or miss" -- test "$(grep -c 'cache: ' "$tmp/out")" -eq 1
  check "$f cache file: left as it was" -- cmp "$tmp/$f.db" "$tmp/$f.orig"
  want="" expect 0 "$f cache file: a valid schedule" -- "$bin" validate "$unit" "$tmp/s-$f.json"
  want="optpipe: cache: $tmp/$f.db: " expect 2 "$f cache file: cache list exits 2" -- \
    "$bin" cache list --cache "$tmp/$f.db"
done
check "garbage: says why" -- bash -c '"$1" schedule "$2" --method 1f1b --cache "$3" -o /dev/null 2>&1 |
  grep -q "file is not a database; going on without it"' - "$bin" "$unit" "$tmp/garbage.db"
want="not an optpipe schedule cache" expect 0 "foreign SQLite file: says whose" -- \
  "$bin" schedule "$unit" --method 1f1b --cache "$tmp/foreign.db" -o /dev/null
want="is a directory" expect 0 "a directory as the cache: solved without it" -- \
  "$bin" schedule "$unit" --method 1f1b --cache "$tmp" -o /dev/null

want="4% buckets" expect 0 "cache --help teaches" -- "$bin" cache --help
want="near hit warm-starts" expect 0 "schedule --help names --cache" -- "$bin" schedule --help

echo "cache: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
