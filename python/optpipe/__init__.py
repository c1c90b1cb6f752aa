"""optpipe: pipeline-parallel training schedules, from heuristics to proven optima.

    import optpipe
    problem = optpipe.Problem.from_file("tests/cases/unit-4x8.json")
    result = optpipe.solve(problem, method="auto", time_limit=1.0)
    print(result.objective, result.bound, result.termination)
    for device, order in enumerate(result.schedule.orders):
        print(device, " ".join(order))

Problems and schedules are optpipe's JSON formats (docs/FORMAT.md) as Python dicts;
results are plain dataclasses. Solving releases the GIL; Ctrl-C stops a solve and raises
KeyboardInterrupt. `optpipe.torch` turns a schedule into torch.distributed.pipelining's
actions (it imports torch when used).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from . import _optpipe

__version__: str = _optpipe.__version__
NotApplicableError = _optpipe.NotApplicableError  # a ValueError: says why and what would apply
__all__ = ["NotApplicableError", "OnlineScheduler", "ScheduleVersion", "Problem", "Schedule", "Op", "Result", "Validation", "Violation", "Bound",
           "Method", "solve", "validate", "bound", "methods", "__version__"]


class Problem:
    """A scheduling problem (optpipe-problem/1): devices, stages, micro-batches, op times,
    memory, offload. Build it with from_dict, from_json or from_file."""

    def __init__(self, native: _optpipe.Problem) -> None:
        self._native = native

    @classmethod
    def from_dict(cls, d: dict) -> "Problem":
        return cls(_optpipe.Problem.from_json(json.dumps(d)))

    @classmethod
    def from_json(cls, text: str) -> "Problem":
        return cls(_optpipe.Problem.from_json(text))

    @classmethod
    def from_file(cls, path: Union[str, os.PathLike]) -> "Problem":
        return cls(_optpipe.Problem.from_file(os.fspath(path)))

    def to_dict(self) -> dict:
        return json.loads(self._native.to_json())

    def to_json(self) -> str:
        return self._native.to_json()

    name = property(lambda self: self._native.name)
    devices = property(lambda self: self._native.devices, doc="D, the pipeline's devices")
    microbatches = property(lambda self: self._native.microbatches, doc="M")
    stages_per_device = property(lambda self: self._native.stages_per_device, doc="v")
    stages = property(lambda self: self._native.stages, doc="D * v")
    stage_device = property(lambda self: list(self._native.stage_device),
                            doc="the device of every stage")
    split_backward = property(lambda self: self._native.split_backward,
                              doc="W runs apart from B (else B includes it)")
    offload_allowed = property(lambda self: self._native.offload_allowed)
    memory_limited = property(lambda self: self._native.memory_limited)

    def __repr__(self) -> str:
        return (f"Problem({self.name!r}, devices={self.devices}, "
                f"stages_per_device={self.stages_per_device}, microbatches={self.microbatches})")


@dataclass(frozen=True)
class Op:
    """One op of a timed schedule: F, B, W (compute) or O, R (offload, reload)."""
    type: str
    stage: int
    microbatch: int
    device: int
    stream: str  # "compute" or "copy"
    start: float
    end: float

    def __str__(self) -> str:
        return f"{self.stage}{self.type}{self.microbatch}"


@dataclass
class Schedule:
    """A timed schedule (optpipe-schedule/1). `orders[d]` lists device d's compute ops in
    the order they run, `copies[d]` its offloads and reloads, as "stage TYPE micro-batch"."""
    ops: list[Op]
    method: str
    makespan: float
    objective: float
    peak_memory: list[float]
    raw: dict = field(repr=False)

    @classmethod
    def from_dict(cls, d: dict) -> "Schedule":
        ops = [Op(o["type"], o["stage"], o["microbatch"], o["device"], o["stream"], o["start"],
                  o["end"]) for o in d["ops"]]
        ops.sort(key=lambda o: (o.start, o.device))
        return cls(ops, d.get("method", ""), d.get("makespan", 0.0), d.get("objective", 0.0),
                   d.get("peak_memory", []), d)

    @classmethod
    def from_file(cls, path: Union[str, os.PathLike]) -> "Schedule":
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def to_dict(self) -> dict:
        return self.raw

    @property
    def devices(self) -> int:
        return 1 + max((o.device for o in self.ops), default=-1)

    @property
    def orders(self) -> list[list[str]]:
        return self._lanes("compute")

    @property
    def copies(self) -> list[list[str]]:
        return self._lanes("copy")

    def _lanes(self, stream: str) -> list[list[str]]:
        lanes: list[list[str]] = [[] for _ in range(self.devices)]
        for o in self.ops:
            if o.stream == stream:
                lanes[o.device].append(str(o))
        return lanes


@dataclass
class Result:
    """What solve() found: a schedule (None when termination is "infeasible" or
    "not applicable", with `message` saying why), its objective, a proven lower bound on
    every schedule's objective and the gap between them."""
    termination: str  # optimal, feasible, time limit, work limit, interrupted, ...
    schedule: Optional[Schedule]
    objective: float
    bound: float
    gap: float
    message: str
    found_by: str
    wall_s: float
    evaluations: int = 0  # schedules auto's local search simulated
    nodes: int = 0        # milp's branch-and-bound nodes


def _schedule_json(s: Union[Schedule, dict, None]) -> Optional[str]:
    if s is None:
        return None
    return json.dumps(s.to_dict() if isinstance(s, Schedule) else s)


def solve(problem: Problem, method: str = "auto", time_limit: float = 1.0, *,
          evaluations: Optional[int] = None, threads: int = 0, seed: int = 1,
          warm_start: Union[Schedule, dict, None] = None,
          on_improvement: Optional[Callable[[float, Schedule], Any]] = None) -> Result:
    """Schedules `problem` with `method` (see methods(); "milp" is the exact solver).

    time_limit: seconds for the methods that search; evaluations: a deterministic budget of
    simulations instead (the same schedule on every run with threads=1); warm_start: a
    schedule to start from (auto, milp); on_improvement(objective, schedule): called with
    every better schedule as it is found (an exception there ends the search and is raised).
    Raises ValueError for an unknown method or a bad warm start."""
    callback = None
    if on_improvement is not None:
        callback = lambda objective, text: on_improvement(objective,
                                                          Schedule.from_dict(json.loads(text)))
    r = _optpipe.solve(problem._native, method, float(time_limit), evaluations, threads, seed,
                        _schedule_json(warm_start), callback)
    schedule = Schedule.from_dict(json.loads(r["schedule"])) if r["schedule"] else None
    return Result(r["termination"], schedule, r["objective"], r["bound"], r["gap"],
                  r["message"], r["found_by"], r["wall_s"], r["evaluations"], r["nodes"])


@dataclass(frozen=True)
class Violation:
    """A broken rule: kind (missing, duplicate, duration, dependency, overlap, memory, ...),
    the op ("1F3") and device involved and the time, where the rule has them."""
    kind: str
    op: Optional[str]
    device: Optional[int]
    time: Optional[float]
    detail: str


@dataclass
class Validation:
    valid: bool
    makespan: float
    device_span: float
    objective: float
    peak_memory: list[float]
    violations: list[Violation]


def validate(problem: Problem, schedule: Union[Schedule, dict]) -> Validation:
    """Checks a timed schedule against every rule of the problem (an independent checker)."""
    r = _optpipe.validate(problem._native, _schedule_json(schedule))
    r["violations"] = [Violation(**v) for v in r["violations"]]
    return Validation(**r)


@dataclass
class Bound:
    """The strongest lower bound proven, and its sources (None where a search did not run)."""
    bound: float
    device_bound: float
    critical_path: float
    memory_bound: float
    device_search_bound: float
    order_search_bound: Optional[float]
    sat_search_bound: Optional[float]
    schedule_objective: Optional[float]
    schedule_gap: Optional[float]


def bound(problem: Problem, search_seconds: float = 1.0,
          schedule: Union[Schedule, dict, None] = None) -> Bound:
    """Proves a lower bound on every schedule's objective; with `schedule`, aims at it and
    says its gap."""
    return Bound(**_optpipe.bound(problem._native, float(search_seconds),
                                   _schedule_json(schedule)))


@dataclass(frozen=True)
class Method:
    name: str
    summary: str
    applies: bool  # to the problem given to methods(), True without one
    why_not: str


def methods(problem: Optional[Problem] = None) -> list[Method]:
    """Every method solve() accepts; with a problem, whether it applies and why not."""
    return [Method(*m) for m in _optpipe.methods(problem._native if problem else None)]


@dataclass
class ScheduleVersion:
    """A schedule an OnlineScheduler handed out: `version` 0 is the initial one; `model`
    counts the drifts its times were measured after; `objective` is on that model."""
    version: int
    method: str
    model: int
    objective: float
    found_s: float
    schedule: Schedule


class OnlineScheduler:
    """The training loop's scheduler (OptPipe, Fig. 1): starts at once on a schedule that
    fits, refines it in a background thread, hands a better one out only at advance() (call
    it at an iteration boundary), and re-solves when report()ed times drift.

        with optpipe.OnlineScheduler(problem, refine_seconds=60) as online:
            for step in range(steps):
                online.advance()
                run(online.current().schedule)
                online.report(measured_problem)   # the problem with the measured op times
    """

    def __init__(self, problem: Problem, refine_seconds: float = 30.0, *,
                 methods: tuple = ("auto", "milp"), cache: Optional[str] = None,
                 drift_threshold: float = 0.05, drift_window: int = 3, threads: int = 1):
        self._native = _optpipe.online_start(problem._native, float(refine_seconds),
                                             list(methods), threads,
                                             None if cache is None else os.fspath(cache),
                                             float(drift_threshold), drift_window)

    def current(self) -> ScheduleVersion:
        v = self._native.current()
        v["schedule"] = Schedule.from_dict(json.loads(v["schedule"]))
        return ScheduleVersion(**v)

    def advance(self) -> bool:
        """Adopts the best schedule found since, if better; True when current() changed."""
        return self._native.advance()

    def report(self, measured: Problem) -> None:
        self._native.report(measured._native)

    @property
    def model(self) -> Problem:
        return Problem(self._native.model())

    @property
    def refining(self) -> bool:
        return self._native.refining()

    def wait_idle(self, seconds: float) -> bool:
        return self._native.wait_idle(float(seconds))

    def log(self) -> list[str]:
        """The progress lines since the last call."""
        return self._native.drain_log()

    def stop(self) -> None:
        self._native.stop()

    def __enter__(self) -> "OnlineScheduler":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
