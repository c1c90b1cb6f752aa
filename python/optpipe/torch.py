"""optpipe schedules for torch.distributed.pipelining (imports torch when used).

    import optpipe, optpipe.torch
    result = optpipe.solve(problem, method="zb-h1")
    schedule = optpipe.torch.build_schedule(stages, problem, result.schedule, loss_fn=loss_fn)
    schedule.step(x, target=y)          # on the rank holding the first and last stages

`actions()` gives each rank's compute actions in PyTorch's names: F (forward), I (backward
for the input: optpipe's B where W is separate), W (backward for the weights) and B (the
full backward: optpipe's B where W is fused); `build_schedule()` hands them to PyTorch's
`_PipelineScheduleRuntime`, which adds the sends and receives as it does for a CSV it loads.
PyTorch has no offload action: a schedule that offloads is refused (NotApplicableError says
how many O/R ops would be lost). A schedule that holds ops back on purpose runs in its order
alone under PyTorch: build_schedule warns, with the makespan that order gives.
"""
from __future__ import annotations

import json
import warnings
from typing import Any, Callable, Optional, Union

from . import Problem, Schedule, _optpipe


def _text(schedule: Union[Schedule, dict]) -> str:
    return json.dumps(schedule.to_dict() if isinstance(schedule, Schedule) else schedule)


def actions(problem: Problem, schedule: Union[Schedule, dict]) -> dict[int, list[str]]:
    """Each rank's (device's) compute actions in execution order, as PyTorch writes them
    ("0F0", "3I2", "3W2", ...). Raises NotApplicableError for a schedule that offloads."""
    rows = _optpipe.pytorch_actions(problem._native, _text(schedule))
    return {rank: list(row) for rank, row in enumerate(rows)}


def build_schedule(stages: list, problem: Problem, schedule: Union[Schedule, dict], *,
                   loss_fn: Optional[Callable] = None, scale_grads: bool = True,
                   **kwargs: Any):
    """A torch.distributed.pipelining schedule that runs `schedule` with this rank's
    `stages` (PipelineStage objects whose stage_index follows problem.stage_device, the
    rank being the device). Extra keyword arguments go to _PipelineScheduleRuntime."""
    from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime

    order = _optpipe.order_only(problem._native, _text(schedule))
    scheduled = (schedule.objective if isinstance(schedule, Schedule)
                 else schedule.get("objective", order["objective"]))
    if order["held"] and order["objective"] > scheduled * (1 + 1e-9):
        warnings.warn(
            f"{order['held']} ops of this schedule are held back on purpose, which an action "
            f"list cannot say: PyTorch runs them as soon as their order allows, which takes "
            f"{order['objective']:g} instead of {scheduled:g} in optpipe's simulation",
            stacklevel=2)
    runtime = _PipelineScheduleRuntime(stages, problem.microbatches, loss_fn=loss_fn,
                                       scale_grads=scale_grads, **kwargs)
    plan = {rank: [_Action.from_str(a) for a in acts]
            for rank, acts in actions(problem, schedule).items()}
    runtime._prepare_schedule_with_comms(plan)
    return runtime
