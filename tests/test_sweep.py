"""benchmarks.sweep: planning the missing runs, running them side by side, the deadline, the
archive, and the calibration of seconds per step."""

from __future__ import annotations

import sys
import tarfile

import pytest

from benchmarks import _common as C
from benchmarks import sweep
from benchmarks.protocols import TABLE1_ENDPOINTS

STEP = {"gmnet": 0.02, "chemberta": 0.01}


def plan(tmp_path, **kw):
    args = dict(groups=["table1", "ablation"], protocol_name="chemberta3", results_dir=tmp_path, device="cuda",
                step_seconds=STEP, seeds=None, threads=1)
    args.update(kw)
    return sweep.plan(**args)


def test_plan_covers_table1_and_the_grid_once(tmp_path):
    jobs = plan(tmp_path)
    table1 = [j for j in jobs if j.group == "table1"]
    grid = [j for j in jobs if j.group == "ablation"]
    assert len(table1) == len(TABLE1_ENDPOINTS) * 3 * 2
    # 2 endpoints x 9 cells x 3 seeds, less the k=8 L=3 cells, which are Table 1's runs (one file each)
    assert len(grid) == 2 * 9 * 3 - 2 * 3
    assert len({j.path for j in jobs}) == len(jobs)
    assert all(j.group == "table1" for j in jobs[: len(table1)])  # the first group comes first
    est = [j.estimate_s for j in table1]
    assert est == sorted(est, reverse=True)  # longest first within a group (the default of plan)
    est = [j.estimate_s for j in plan(tmp_path, order="smallest") if j.group == "ablation"]
    assert est == sorted(est)
    cell = next(j for j in grid if (j.k, j.L, j.endpoint, j.seed) == (6, 2, "esol", 1))
    assert cell.argv[2:4] == ["benchmarks.ablation", "--endpoints"] and cell.argv[cell.argv.index("--k") + 1] == "6"
    assert cell.path == C.result_path(tmp_path, "chemberta3", "gmnet", "esol", 1, 6, 2)
    run = next(j for j in table1 if (j.arm, j.endpoint, j.seed) == ("chemberta", "bbbp", 2))
    assert run.argv[2] == "benchmarks.run" and "--resume" in run.argv and "--arm" in run.argv


def test_plan_skips_existing_results_and_filters(tmp_path):
    from .test_benchmarks import _record

    existing = C.result_path(tmp_path, "chemberta3", "chemberta", "esol", 0)
    C.write_json_atomic(existing, _record("chemberta", "esol", 0, 1.0))
    # a file that is no finished run (an empty object, half a record) is planned again (a review:
    # --resume and the sweep kept them, the report dropped them: a hole that never closed)
    empty, cut = (C.result_path(tmp_path, "chemberta3", "chemberta", ep, 0) for ep in ("bbbp", "freesolv"))
    C.write_json_atomic(empty, {})
    cut.parent.mkdir(parents=True)
    cut.write_text(existing.read_text()[:200])
    jobs = plan(tmp_path, groups=["table1"])
    paths = {j.path for j in jobs}
    assert existing not in paths and {empty, cut} <= paths and len(jobs) == len(TABLE1_ENDPOINTS) * 6 - 1
    only = plan(tmp_path, groups=["table1"], arms=["gmnet"], endpoints=["esol", "bbbp"], skip=["gmnet:bbbp"])
    assert {(j.arm, j.endpoint) for j in only} == {("gmnet", "esol")} and len(only) == 3


def test_cost_model_scales_with_steps_and_harmonics():
    assert sweep.training_steps("tox21_sr_p53", 32, 100) > sweep.training_steps("esol", 32, 100)
    assert sweep.cost_factor(None, None, "cpu") == 1.0 == sweep.cost_factor(8, 3, "cpu")
    assert sweep.cost_factor(10, 4, "cpu") > sweep.cost_factor(10, 4, "cuda") > 1.0


def _job(tmp_path, name, seconds, estimate):
    path = tmp_path / "results" / f"{name}.json"
    code = f"import time, pathlib; time.sleep({seconds}); pathlib.Path({str(path)!r}).write_text('{{}}')"
    return sweep.Job("table1", "gmnet", "esol", 0, 8, 3, path, [sys.executable, "-c", code], estimate, name=name)


def test_run_jobs_deadline_failures_and_archive(tmp_path):
    (tmp_path / "results").mkdir()
    quick = _job(tmp_path, "quick", 0, 1.0)
    slow = _job(tmp_path, "slow", 60, 2.0)  # predicted to fit, but outlasts the deadline: stopped
    too_long = _job(tmp_path, "too_long", 0, 100.0)  # predicted not to fit: never started
    broken = sweep.Job("table1", "chemberta", "bbbp", 1, None, None, tmp_path / "results" / "x.json",
                       [sys.executable, "-c", "raise SystemExit(3)"], 1.0, name="broken")
    jobs = [too_long, slow, quick, broken]
    archive = tmp_path / "out" / "results.tar.gz"
    sweep.run_jobs(jobs, workers=3, deadline=6.0, safety=1.0, log_dir=tmp_path / "logs",
                   results_dir=tmp_path / "results", archive=archive, poll=0.1)
    assert [j.status for j in jobs] == ["not started", "stopped", "done", "failed"]
    assert slow.proc.poll() is not None  # the stopped run's process is gone
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert "quick.json" in names and "slow.json" not in names and "logs/broken.log" in names


def test_a_run_that_wrote_its_result_before_the_deadline_stop_is_done(tmp_path):
    # it writes its result, then its interpreter takes a while to end: the deadline falls between
    (tmp_path / "results").mkdir()
    path = tmp_path / "results" / "late.json"
    code = f"import time, pathlib; pathlib.Path({str(path)!r}).write_text('{{}}'); time.sleep(60)"
    late = sweep.Job("table1", "gmnet", "esol", 0, 8, 3, path, [sys.executable, "-c", code], 1.0, name="late")
    # a result file left by an earlier run is not this run's
    stale_path = tmp_path / "results" / "stale.json"
    stale_path.write_text("{}")
    import os

    os.utime(stale_path, (1_000_000, 1_000_000))
    stale = sweep.Job("table1", "gmnet", "bbbp", 0, 8, 3, stale_path, [sys.executable, "-c", "import time; time.sleep(60)"],
                      1.0, name="stale")
    archive = tmp_path / "out" / "results.tar.gz"
    sweep.run_jobs([late, stale], workers=2, deadline=3.0, safety=1.0, log_dir=tmp_path / "logs",
                   results_dir=tmp_path / "results", archive=archive, poll=0.1)
    assert (late.status, stale.status) == ("done", "stopped")
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert "late.json" in names and "stale.json" not in names


def test_ablation_cells_get_no_options_that_ablation_lacks(tmp_path):
    from benchmarks import ablation

    jobs = plan(tmp_path, groups=["ablation"], extra_args=["--descriptor-cache", str(tmp_path / "dc"), "--cuda-graphs"])
    cell = next(j for j in jobs if j.argv[2] == "benchmarks.ablation")
    assert "--descriptor-cache" not in cell.argv and str(tmp_path / "dc") not in cell.argv
    ablation.build_parser().parse_args(cell.argv[3:])  # exits on an option it does not know
    run = next(j for j in jobs if j.argv[2] == "benchmarks.run")  # the default cell keeps both
    assert "--descriptor-cache" in run.argv and "--cuda-graphs" in run.argv


def test_step_seconds_option():
    assert sweep.parse_step_seconds(["gmnet=0.5"], "cpu") == {"gmnet": 0.5, "chemberta": sweep.DEFAULT_STEP_SECONDS["cpu"]["chemberta"]}
    with pytest.raises(ValueError, match="ARM=SECONDS"):
        sweep.parse_step_seconds(["bert=1"], "cuda")


def test_calibrate_measures_both_arms(tmp_path, moleculenet_path, deepchem_vocab):
    out = sweep.calibrate(protocol_name="smoke", device="cpu", workers=2, threads=1, endpoint="freesolv", epochs=2,
                          scratch=tmp_path / "cal",
                          extra_args=["--limit", "120", "--data-home", str(moleculenet_path), "--vocab-file", str(deepchem_vocab)])
    assert set(out) == {"gmnet", "chemberta", "startup"}
    assert all(v > 0 for v in out.values())


def test_dry_run_lists_the_plan(tmp_path, capsys):
    assert sweep.main(["--dry-run", "--device", "cpu", "--workers", "2", "--what", "table1", "--arms", "chemberta",
                       "--endpoints", "esol", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 run(s) missing") and out.count("chemberta esol seed") == 3


def test_several_protocols_are_planned_in_the_order_given(tmp_path, capsys):
    assert sweep.main(["--dry-run", "--device", "cpu", "--workers", "2", "--what", "table1", "--arms", "chemberta",
                       "--endpoints", "esol", "--results-dir", str(tmp_path),
                       "--protocol", "tuned_moses_ft", "tuned_moses", "tuned_moses_ft"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("6 run(s) missing")  # a protocol named twice is planned once
    assert [ln.split("] ")[1].split(" ")[0] for ln in lines[1:]] == ["tuned_moses_ft"] * 3 + ["tuned_moses"] * 3


def test_interrupted_sweep_stops_its_runs(tmp_path, monkeypatch):
    # The runs live in their own process sessions, so a Ctrl-C or SIGTERM of the sweep does not
    # reach them: the sweep stops them itself.
    (tmp_path / "results").mkdir()
    slow = _job(tmp_path, "slow", 60, 1.0)
    def interrupt(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "_sleep", interrupt)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_jobs([slow], workers=1, deadline=float("inf"), safety=1.0, log_dir=tmp_path / "logs",
                       results_dir=tmp_path / "results", archive=tmp_path / "a.tar.gz", poll=0.1)
    assert slow.status == "stopped"
    assert slow.proc.wait(timeout=10) is not None and not slow.path.exists()
    assert (tmp_path / "a.tar.gz").is_file()


def test_plan_with_snapshots_counts_the_epochs_left(tmp_path):
    snaps = tmp_path / "snaps"
    d = C.snapshot_dir(snaps, "chemberta3", "gmnet", "bbbp")
    d.mkdir(parents=True)
    # an interrupted k=10 L=4 seed 1 run, 40 of its 100 epochs done (what TrainingSnapshot leaves)
    info = {"format": "gmnet_sklearn.training_snapshot.v1", "fingerprint": "f", "epochs_done": 40, "max_epochs": 100,
            "fit": {"estimator": "GMNetClassifier", "k": 10, "L": 4, "random_state": 1}}
    (d / "f.json").write_text(__import__("json").dumps(info))
    (d / "f.pt").write_bytes(b"")
    kw = dict(groups=["ablation"], endpoints=["bbbp"], device="cpu")
    plain = {(j.k, j.L, j.seed): j for j in plan(tmp_path, **kw)}
    jobs = {(j.k, j.L, j.seed): j for j in plan(tmp_path, snapshot_dir=snaps, **kw)}
    resumed, fresh = jobs[10, 4, 1], jobs[10, 4, 0]
    assert resumed.epochs_done == 40 and fresh.epochs_done == 0 and "(resumes after epoch 40)" in resumed.label()
    train_s = plain[10, 4, 1].estimate_s - sweep.STARTUP_SECONDS
    assert resumed.estimate_s == pytest.approx(sweep.STARTUP_SECONDS + 0.6 * train_s)
    assert fresh.estimate_s == pytest.approx(plain[10, 4, 0].estimate_s)
    assert fresh.startable_s() == pytest.approx(sweep.STARTUP_SECONDS + 0.02 * train_s)  # two epochs
    assert all(j.argv[j.argv.index("--snapshot-dir") + 1] == str(snaps) for j in jobs.values())
    assert not any(j.resumable or "--snapshot-dir" in j.argv for j in plain.values())


def test_plan_predicts_from_measured_runs_made_the_same_way(tmp_path):
    here = {"device": "cpu", "cpu_model": "AMD EPYC", "gpu_name": None, "gmnet_path": "fused"}

    def record(seed, per_epoch, k=10, L=4, threads=2, workers=1, **hw):
        C.write_json_atomic(C.result_path(tmp_path, "chemberta3", "gmnet", "bbbp", seed, k, L), {
            "k": k, "L": L, "sweep_workers": workers, "wall_time_s": {"per_epoch_mean": per_epoch},
            "hardware": {**here, "torch_threads": threads, **hw}})

    record(0, 80.0)
    record(3, 90.0)
    record(4, 500.0, threads=1)  # not like this sweep's runs: each mismatch is left out
    record(5, 500.0, workers=2)
    record(6, 500.0, cpu_model="Intel Xeon")
    record(7, 500.0, gmnet_path="eager zonal forms")
    record(8, 500.0, device="cuda")
    # a run resumed from a snapshot whose first part ran elsewhere: its epochs average both parts
    C.write_json_atomic(C.result_path(tmp_path, "chemberta3", "gmnet", "bbbp", 12, 10, 4), {
        "k": 10, "L": 4, "sweep_workers": 1, "wall_time_s": {"per_epoch_mean": 500.0},
        "hardware": {**here, "torch_threads": 2},
        "resumed": {"parts": [{"meta": {"hardware": {**here, "device": "cuda", "gpu_name": "H100"}}}]}})
    C.result_path(tmp_path, "chemberta3", "gmnet", "bbbp", 9, 10, 4).write_text("{not json")
    for seed, fields in ((10, {"wall_time_s": [80.0]}), (11, {"hardware": "AMD EPYC"})):  # not mappings: not measurements
        C.write_json_atomic(C.result_path(tmp_path, "chemberta3", "gmnet", "bbbp", seed, 10, 4), {
            "k": 10, "L": 4, "sweep_workers": 1, "wall_time_s": {"per_epoch_mean": 500.0},
            "hardware": {**here, "torch_threads": 2}, **fields})
    kw = dict(groups=["ablation"], endpoints=["bbbp"], device="cpu", threads=2, machine=lambda: here)
    jobs = {(j.k, j.L, j.seed): j for j in plan(tmp_path, workers=1, **kw)}
    assert jobs[10, 4, 1].estimate_s == pytest.approx(sweep.STARTUP_SECONDS + 85.0 * 100)
    assert jobs[10, 4, 1].basis == "measured, 2 run(s)"
    assert jobs[10, 4, 1].startable_s() == jobs[10, 4, 1].estimate_s  # no snapshots: the whole run
    modelled = jobs[8, 2, 1]  # no run of this cell yet: the step-cost model at the cells' measured step cost
    assert modelled.basis == "step-cost model, 2 measured run(s) of other endpoints"
    steps = sweep.training_steps("bbbp", 32, 1)
    per_step = 85.0 / steps / sweep.cost_factor(10, 4, "cpu")  # the median of the two runs like this sweep's
    assert modelled.estimate_s == pytest.approx(sweep.STARTUP_SECONDS + 100 * steps * per_step
                                                * sweep.cost_factor(8, 2, "cpu"))
    # the measured step cost carries to other endpoints of the arm, scaled by their steps
    other = plan(tmp_path, workers=1, **{**kw, "endpoints": ["esol"], "groups": ["table1"]})
    assert {j.basis for j in other if j.arm == "gmnet"} == {"step-cost model, 2 measured run(s) of other endpoints"}
    assert [j.estimate_s for j in other if j.arm == "gmnet"] == [pytest.approx(
        sweep.STARTUP_SECONDS + 100 * sweep.training_steps("esol", 32, 1) * per_step)] * 3
    assert {j.basis for j in other if j.arm == "chemberta"} == {"step-cost model"}  # none of that arm
    # with two workers only the run made with two counts; without workers, the model throughout
    two = {(j.k, j.L, j.seed): j for j in plan(tmp_path, workers=2, **kw)}
    assert two[10, 4, 1].basis == "measured, 1 run(s)"
    assert two[10, 4, 1].estimate_s == pytest.approx(sweep.STARTUP_SECONDS + 500.0 * 100)
    assert all(j.basis == "step-cost model" for j in plan(tmp_path, **kw))


def test_resumable_run_starts_when_only_a_part_fits(tmp_path):
    (tmp_path / "results").mkdir()
    whole_only = _job(tmp_path, "whole_only", 0, 100.0)  # not resumable: never started
    part = _job(tmp_path, "part", 60, 100.0)  # resumable: two epochs fit, so it starts (and is stopped)
    part.resumable, part.min_part_s = True, 1.0
    sweep.run_jobs([whole_only, part], workers=2, deadline=3.0, safety=1.0, log_dir=tmp_path / "logs",
                   results_dir=tmp_path / "results", archive=None, poll=0.1)
    assert [whole_only.status, part.status] == ["not started", "stopped"]


def test_the_exit_code_says_whether_the_sweep_is_complete():
    from benchmarks.sweep import exit_code

    assert exit_code({"done": 4}) == 0
    assert exit_code({"done": 3, "stopped": 1}) == 3 and exit_code({"done": 3, "not started": 2}) == 3
    assert exit_code({"failed": 1, "stopped": 1}) == 1


def test_a_record_made_under_other_parameters_is_planned_again(tmp_path, capsys):
    """The sweep plans what `run --resume` would redo: a record its protocol no longer builds."""
    import json

    from benchmarks import _common as C
    from benchmarks.protocols import ENDPOINTS, PROTOCOLS

    args = ["--dry-run", "--device", "cpu", "--workers", "2", "--what", "table1", "--arms", "chemberta",
            "--endpoints", "esol", "--seeds", "0", "--results-dir", str(tmp_path), "--protocol", "tuned"]
    est = C.estimator_class("chemberta", ENDPOINTS["esol"])(**PROTOCOLS["tuned"].estimator_params("chemberta", "esol",
                                                                                                  random_state=0))
    params = {k: v for k, v in est.get_params(deep=False).items() if k != "callbacks"}
    path = C.result_path(tmp_path, "tuned", "chemberta", "esol", 0, None, None)
    path.parent.mkdir(parents=True)
    from .test_benchmarks import _record

    record = {**_record("chemberta", "esol", 0, 1.0, protocol="tuned"), "hyperparameters": params}
    path.write_text(json.dumps(record))
    assert sweep.main(args) == 0 and capsys.readouterr().out.startswith("0 run(s) missing")
    path.write_text(json.dumps({**record, "hyperparameters": {**params, "max_epochs": params["max_epochs"] + 10}}))
    assert sweep.main(args) == 0 and capsys.readouterr().out.startswith("1 run(s) missing")
