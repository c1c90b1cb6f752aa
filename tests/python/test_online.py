"""optpipe.OnlineScheduler: schedules change only at advance(), never for a worse one, and a
drift reported in measured times leads to a schedule timed and valid on them."""
import optpipe


def slower(problem, stage, factor):
    d = problem.to_dict()
    for kind in ("f", "b", "w"):
        d["stage_time"][kind][stage] *= factor
    return optpipe.Problem.from_dict(d)


def test_online_loop(cases):
    problem = optpipe.Problem.from_file(cases / "llama-8dev-offload.json")
    with optpipe.OnlineScheduler(problem, refine_seconds=1, methods=("auto",)) as online:
        first = online.current()
        assert first.version == 0 and first.method.startswith("initial: ")
        assert optpipe.validate(problem, first.schedule).valid
        assert online.wait_idle(60)
        assert online.current().version == 0  # found, but waiting for a boundary
        assert online.advance()
        now = online.current()
        assert now.version == 1 and now.objective < first.objective
        assert optpipe.validate(problem, now.schedule).valid

        measured = slower(problem, 3, 1.5)
        for _ in range(3):
            online.report(measured)
        assert online.model.to_dict()["stage_time"] == measured.to_dict()["stage_time"]
        assert online.wait_idle(60)
        assert online.advance()
        after = online.current()
        assert after.model == 1
        v = optpipe.validate(measured, after.schedule)
        assert v.valid and abs(v.objective - after.objective) < 1e-6 * after.objective
        assert any("drift: stage 3" in line for line in online.log())
    assert not online.refining
