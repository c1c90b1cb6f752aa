"""The Python module against values known independently: the 1F1B formula, the proven
optimum of the 4x8 unit problem, hand-broken schedules."""
import _thread
import json
import pathlib
import threading
import time

import pytest

import optpipe

# unit-4x8: D = 4 devices, M = 8 micro-batches, F = B = W = 1, W split from B.
D, M = 4, 8


def test_problem_round_trip(unit):
    assert (unit.devices, unit.microbatches, unit.stages_per_device, unit.stages) == (4, 8, 1, 4)
    again = optpipe.Problem.from_dict(unit.to_dict())
    assert again.to_dict() == unit.to_dict()
    assert json.loads(unit.to_json())["format"] == "optpipe-problem/1"


def test_bad_input_names_the_field(unit, tmp_path):
    d = unit.to_dict()
    d["microbatches"] = -3
    with pytest.raises(ValueError, match="microbatches"):
        optpipe.Problem.from_dict(d)
    with pytest.raises(FileNotFoundError):
        optpipe.Problem.from_file(tmp_path / "absent.json")
    with pytest.raises(ValueError, match="no-such-method"):
        optpipe.solve(unit, method="no-such-method")


def test_1f1b_matches_its_formula(unit):
    r = optpipe.solve(unit, method="1f1b")
    # M (F + B + W) of work per device, and the pipeline fills and drains through F and B.
    assert r.objective == M * 3 + (D - 1) * 2 == 30
    assert r.schedule.peak_memory == [4, 3, 2, 1]  # D - d activations in flight on device d
    # Device d runs D - d forwards before its first backward.
    for d, order in enumerate(r.schedule.orders):
        first_b = next(i for i, op in enumerate(order) if "B" in op)
        assert order[:first_b] == [f"{d}F{m}" for m in range(D - d)]
        assert len(order) == 3 * M
    assert r.termination == "feasible"


def test_auto_proves_the_optimum(unit):
    r = optpipe.solve(unit, method="auto", time_limit=2)
    # Known optimum 27 = M (F + B + W) + (D - 1) F: the last device waits for D - 1 forwards.
    assert (r.objective, r.bound, r.gap, r.termination) == (27, 27, 0, "optimal")
    v = optpipe.validate(unit, r.schedule)
    assert v.valid and v.violations == [] and v.makespan == 27


def test_validate_lists_violations_as_records(unit):
    s = optpipe.solve(unit, method="1f1b").schedule.to_dict()
    op = next(o for o in s["ops"] if (o["stage"], o["microbatch"], o["type"]) == (1, 2, "F"))
    op["end"] += 0.5
    v = optpipe.validate(unit, s)
    assert not v.valid
    kinds = {(x.kind, x.op, x.device) for x in v.violations}
    assert ("duration", "1F2", 1) in kinds
    s["ops"] = [o for o in s["ops"] if (o["stage"], o["microbatch"], o["type"]) != (3, 7, "W")]
    assert ("missing", None, 3) in {(x.kind, x.op, x.device) for x in
                                    optpipe.validate(unit, s).violations}


def test_bound_and_methods(unit):
    b = optpipe.bound(unit, search_seconds=0.5)
    # Device 3 idles for the D - 1 forwards before its first; one micro-batch's chain is
    # D forwards, D backwards and a W.
    assert (b.bound, b.device_bound, b.critical_path) == (27, M * 3 + (D - 1), 2 * D + 1)
    assert b.schedule_gap is None
    one = optpipe.solve(unit, method="1f1b").schedule
    assert optpipe.bound(unit, 0.5, schedule=one).schedule_gap == pytest.approx(3 / 30)
    names = {m.name: m for m in optpipe.methods(unit)}
    assert {"1f1b", "zb-h1", "auto", "milp"} <= names.keys()
    assert all(m.applies for m in optpipe.methods())


def test_improvements_arrive_better_and_valid(cases):
    problem = optpipe.Problem.from_file(cases.parent / "bench/problems/r48-6s.json")
    seen = []
    r = optpipe.solve(problem, method="auto", evaluations=2000, threads=1,
                      on_improvement=lambda objective, s: seen.append((objective, s)))
    assert seen, "auto's search improves on its seeds here"
    objectives = [o for o, _ in seen]
    assert objectives == sorted(objectives, reverse=True) and len(set(objectives)) == len(seen)
    assert objectives[-1] >= r.objective
    for objective, s in seen:
        v = optpipe.validate(problem, s)
        assert v.valid and v.objective == pytest.approx(objective)


def test_warm_start_is_never_worse(unit):
    zb = optpipe.solve(unit, method="zb-h1").schedule
    r = optpipe.solve(unit, method="auto", evaluations=50, threads=1, warm_start=zb)
    assert r.objective <= zb.objective


def test_callback_exception_ends_the_solve(cases):
    problem = optpipe.Problem.from_file(cases.parent / "bench/problems/r48-6s.json")

    def fail(objective, schedule):
        raise RuntimeError("stop here")

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="stop here"):
        optpipe.solve(problem, method="auto", time_limit=20, on_improvement=fail)
    assert time.monotonic() - t0 < 5


def test_solve_releases_the_gil(cases):
    problem = optpipe.Problem.from_file(cases.parent / "bench/problems/r48-6s.json")
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.005)

    t = threading.Thread(target=count)
    t.start()
    optpipe.solve(problem, method="auto", time_limit=0.5, threads=1)
    done.set()
    t.join()
    assert len(ticks) > 20  # about 100 if the counter never waited for the GIL


def test_ctrl_c_stops_a_solve(cases):
    problem = optpipe.Problem.from_file(cases.parent / "bench/problems/r48-6s.json")
    threading.Timer(0.3, _thread.interrupt_main).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        optpipe.solve(problem, method="auto", time_limit=30)
    assert time.monotonic() - t0 < 5


def test_type_stubs_ship_with_the_module():
    package = pathlib.Path(optpipe.__file__).parent
    assert (package / "_optpipe.pyi").is_file() and (package / "py.typed").is_file()
    assert "def solve" in (package / "_optpipe.pyi").read_text()
    assert optpipe.__version__.count(".") == 2
