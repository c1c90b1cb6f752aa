"""optpipe's schedules under torch.distributed.pipelining: a model of Linear layers cut into
4 stages (one a rank) and 8 stages (two a rank, interleaved and V-shaped), run by 4 CPU
processes (gloo) on optpipe's auto and zb-h1 schedules through optpipe.torch; loss and every
gradient must match the same model run whole, without pipelining."""
import copy
import json
import socket

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed "
                                            "(tools/setup.sh --with-torch installs it)")
import optpipe  # noqa: E402
import optpipe.torch  # noqa: E402

RANKS, MICROBATCHES, WIDTH = 4, 8, 16


def problem(stages_per_device, placement):
    return optpipe.Problem.from_dict({
        "format": "optpipe-problem/1", "name": f"linear-{placement}-{stages_per_device}",
        "devices": RANKS, "microbatches": MICROBATCHES,
        "stages_per_device": stages_per_device, "placement": placement,
        "stage_time": {"f": 1, "b": 1, "w": 1}, "comm_time": 0,
        "memory": {"activation": 1, "freed_by_b": 0.5}})


def cases():
    """(name, problem dict, schedule dict) for every schedule the workers run."""
    out = []
    for v, placement, method in [(1, "interleaved", "zb-h1"), (1, "interleaved", "auto"),
                                 (2, "interleaved", "auto"), (2, "vshape", "auto")]:
        p = problem(v, placement)
        r = optpipe.solve(p, method=method, evaluations=300, threads=1)
        assert r.schedule is not None, r.message
        out.append((f"{method} v={v} {placement}", p.to_dict(), r.schedule.to_dict()))
    return out


def layers(count):
    torch.manual_seed(0)
    return [torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())
            for _ in range(count)]


def worker(rank, port, work, out):
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=RANKS)
    results = {}
    for name, problem_dict, schedule_dict in work:
        p = optpipe.Problem.from_dict(problem_dict)
        model = layers(p.stages)
        torch.manual_seed(1)
        x = torch.randn(2 * MICROBATCHES, WIDTH)
        y = torch.randn(2 * MICROBATCHES, WIDTH)
        whole = copy.deepcopy(torch.nn.Sequential(*model))
        loss = torch.nn.functional.mse_loss(whole(x), y)
        loss.backward()

        mine = [s for s in range(p.stages) if p.stage_device[s] == rank]
        stages = [PipelineStage(copy.deepcopy(model[s]), s, p.stages, torch.device("cpu"))
                  for s in mine]
        schedule = optpipe.torch.build_schedule(stages, p, schedule_dict,
                                                loss_fn=torch.nn.functional.mse_loss)
        losses = []
        args = (x,) if 0 in mine else ()
        kwargs = {"target": y, "losses": losses} if p.stages - 1 in mine else {}
        schedule.step(*args, **kwargs)

        grad = 0.0
        for stage, s in zip(stages, mine):
            for a, b in zip(stage.submod.parameters(), whole[s].parameters()):
                grad = max(grad, (a.grad - b.grad).abs().max().item())
        result = {"grad": grad, "stages": mine}
        if losses:  # micro-batches of equal size: the mean of their means is the whole mean
            result["loss"] = abs(torch.stack(losses).mean().item() - loss.item())
        results[name] = result
    dist.destroy_process_group()
    with open(f"{out}/{rank}.json", "w") as f:
        json.dump(results, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pipelining_matches_the_whole_model(tmp_path):
    work = cases()
    # Forked, the ranks share this process's imported torch (spawned, each imports it: 5 s).
    torch.multiprocessing.start_processes(worker, args=(free_port(), work, str(tmp_path)),
                                          nprocs=RANKS, start_method="fork")
    per_rank = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(RANKS)]
    for name, problem_dict, _ in work:
        p = optpipe.Problem.from_dict(problem_dict)
        ran = sorted(s for r in per_rank for s in r[name]["stages"])
        assert ran == list(range(p.stages)), name
        for r in per_rank:
            assert r[name]["grad"] < 1e-5, (name, r[name])
        losses = [r[name]["loss"] for r in per_rank if "loss" in r[name]]
        assert len(losses) == 1 and losses[0] < 1e-5, (name, losses)


def test_offload_is_refused_not_dropped(cases):
    p = optpipe.Problem.from_file(cases / "llama-8dev-offload.json")
    r = optpipe.solve(p, method="auto", evaluations=200, threads=1)
    offloads = sum(o.type == "O" for o in r.schedule.ops)
    assert offloads > 0
    with pytest.raises(optpipe.NotApplicableError, match=f"offloads {offloads} activations"):
        optpipe.torch.actions(p, r.schedule)


def test_actions_use_pytorch_names(unit):
    r = optpipe.solve(unit, method="zb-h1")
    acts = optpipe.torch.actions(unit, r.schedule)
    assert sorted(acts) == [0, 1, 2, 3]
    # Split backward: optpipe's B is PyTorch's I; every op once, in the schedule's order.
    assert acts[0] == [o.replace("B", "I") for o in r.schedule.orders[0]]
    assert sum(len(a) for a in acts.values()) == 3 * 4 * 8
