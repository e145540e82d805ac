"""Tests of the peer arms (benchmarks/peers.py): fingerprints, per-task forests with missing
labels masked, the rf_ecfp arm end to end through ``benchmarks.run``, the chemprop arm without a
Chemprop executable, and the report's peers section from hand-made records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import _common as C
from benchmarks import peers, run
from benchmarks.protocols import ENDPOINTS

from .test_benchmarks import REQUIRED, _record, _report_section, _write_records

LIMIT = 120  # first rows of the data file: a 96/12/12 scaffold split


# ------------------------------------------------------------------------------------------
# Fingerprints and forests
# ------------------------------------------------------------------------------------------
def test_morgan_fingerprints_shape_bits_and_invalid_smiles():
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    smiles = ["CCO", "c1ccccc1O", "not a smiles", "CCO"]
    fps, invalid = peers.morgan_fingerprints(smiles)
    assert fps.shape == (4, 2048) and fps.dtype == np.uint8
    assert set(np.unique(fps)) <= {0, 1}
    assert invalid == 1 and not fps[2].any()  # unparsable: an all-zero row, counted
    assert (fps[0] == fps[3]).all() and (fps[0] != fps[1]).any()
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
    for row, s in ((0, "CCO"), (1, "c1ccccc1O")):
        on = list(gen.GetFingerprint(Chem.MolFromSmiles(s)).GetOnBits())
        assert sorted(np.flatnonzero(fps[row]).tolist()) == on


def _bits(n, d=64, seed=0):
    return np.random.default_rng(seed).integers(0, 2, size=(n, d)).astype(np.uint8)


def test_one_forest_per_task_on_its_labelled_rows(monkeypatch):
    from sklearn.ensemble import RandomForestClassifier

    X = _bits(60)
    y = np.stack([X[:, 0], X[:, 1], np.zeros(60)], axis=1).astype(float)
    y[::3, 0] = np.nan  # missing labels of task 0
    y[1::4, 1] = np.nan
    y[:, 2] = np.where(np.arange(60) % 2, 0.0, np.nan)  # task 2: one class only where labelled
    seen = []
    fit = RandomForestClassifier.fit

    def spy(self, X_, y_, *a, **k):
        seen.append(len(y_))
        return fit(self, X_, y_, *a, **k)

    monkeypatch.setattr(RandomForestClassifier, "fit", spy)
    models = peers.fit_rf("classification", X, y, seed=0)
    assert seen == [40, 45]  # each forest saw only its labelled rows (no NaN reaches sklearn)
    assert models[2] == 0.0  # one class: a constant, not a forest
    assert all(m.n_estimators == 500 and m.random_state == 0 for m in models[:2])
    # the same forest as one fitted on the labelled rows alone
    obs = ~np.isnan(y[:, 0])
    alone = RandomForestClassifier(n_estimators=500, random_state=0).fit(X[obs], y[obs, 0].astype(int))
    proba = peers.predict_rf("classification", models, X)
    assert proba.shape == (60, 3) and (proba[:, 2] == 0.0).all()
    np.testing.assert_array_equal(proba[:, 0], alone.predict_proba(X)[:, 1])
    # scored with missing labels masked
    from gmnet_sklearn.estimators.metrics import mean_roc_auc

    assert 0.5 < mean_roc_auc(y, proba) <= 1.0


def test_regression_forest_masks_missing_targets():
    X = _bits(50, seed=1)
    y = np.stack([X[:, :4].sum(1), X[:, 4:8].sum(1)], axis=1).astype(float)
    y[::5, 1] = np.nan
    models = peers.fit_rf("regression", X, y, seed=3)
    pred = peers.predict_rf("regression", models, X)
    assert pred.shape == (50, 2) and np.isfinite(pred).all()
    assert models[1].random_state == 3


# ------------------------------------------------------------------------------------------
# End to end through benchmarks.run
# ------------------------------------------------------------------------------------------
def test_rf_ecfp_end_to_end_record_and_resume(tmp_path, moleculenet_path, capsys):
    results = tmp_path / "results"
    argv = ["--arm", "rf_ecfp", "--endpoints", "freesolv", "--seeds", "0", "--limit", str(LIMIT),
            "--threads", "1", "--results-dir", str(results), "--data-home", str(moleculenet_path)]
    assert run.main(argv) == 0
    path = results / f"peers@limit={LIMIT}" / "rf_ecfp" / "freesolv" / "seed0.json"
    assert path == peers.peer_result_path(results, "rf_ecfp", "freesolv", 0, LIMIT)
    rec = json.loads(path.read_text())
    assert REQUIRED <= set(rec)
    assert rec["schema"] == C.RESULT_SCHEMA and rec["arm"] == "rf_ecfp" and rec["protocol_base"] == "peers"
    assert rec["protocol"] == f"peers@limit={LIMIT}" and rec["seed"] == 0 and rec["metric"] == "rmse"
    assert "own defaults" in rec["protocol_definition"]["description"]
    assert rec["hyperparameters"]["n_estimators"] == 500 and rec["hyperparameters"]["random_state"] == 0
    assert rec["hyperparameters"]["n_jobs"] == 1 and rec["hardware"]["torch_threads"] == 1
    assert rec["peer"]["fingerprint"]["radius"] == 2 and rec["peer"]["fingerprint"]["fpSize"] == 2048
    assert rec["peer"]["invalid_smiles"] == {"train": 0, "valid": 0, "test": 0}
    assert rec["wall_time_s"]["fit"] > 0 and rec["wall_time_s"]["total"] >= rec["wall_time_s"]["fit"]
    assert rec["versions"]["rdkit"] and rec["versions"]["scikit-learn"]
    assert rec["git"]["commit"] or not (C.REPO / ".git").exists()  # (a copy without git: no commit to name)
    assert rec["command"].startswith("python -m benchmarks.run --arm rf_ecfp")
    # the same split as the transformer arms, and the figure recomputed by hand
    data = C.load_endpoint(ENDPOINTS["freesolv"], data_home=str(moleculenet_path), limit=LIMIT)
    assert rec["sizes"]["split_sha256"] == data.split_sha256
    assert sum(rec["sizes"][k] for k in ("train", "valid", "test")) == LIMIT
    from sklearn.ensemble import RandomForestRegressor

    Xtr, _ = peers.morgan_fingerprints(data.X_train)
    Xte, _ = peers.morgan_fingerprints(data.X_test)
    rf = RandomForestRegressor(n_estimators=500, random_state=0, n_jobs=1).fit(Xtr, data.y_train)
    assert rec["test_metric"] == pytest.approx(float(np.sqrt(np.mean((rf.predict(Xte) - data.y_test) ** 2))), rel=1e-9)
    assert "rf_ecfp freesolv seed0: test rmse" in capsys.readouterr().out

    mtime = path.stat().st_mtime_ns
    assert run.main(argv + ["--resume"]) == 0
    assert "0 run(s) written, 1 skipped" in capsys.readouterr().out and path.stat().st_mtime_ns == mtime


def test_rf_trains_clearance_on_log1p_and_scores_in_original_units(moleculenet_path, monkeypatch):
    data = C.load_endpoint(ENDPOINTS["clearance"], data_home=str(moleculenet_path), limit=LIMIT)
    seen = {}
    fit = peers.fit_rf

    def spy(task_type, X, y, seed, n_jobs=1):
        seen["y"] = y
        return fit(task_type, X, y, seed, n_jobs)

    monkeypatch.setattr(peers, "fit_rf", spy)
    rec = peers.run_peer("rf_ecfp", data, 0, threads=1, command="test", limit=LIMIT)
    np.testing.assert_allclose(seen["y"], np.log1p(data.y_train))
    # predictions mapped back by expm1: the RMSE is in the file's units (tens), not log units
    assert rec["test_metric"] > 5 and rec["target_transform"] == "log1p"


def test_chemprop_without_an_executable_fails_cleanly(tmp_path, moleculenet_path, monkeypatch, capsys):
    monkeypatch.delenv("GMNET_CHEMPROP_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no chemprop on PATH
    monkeypatch.setattr(C, "REPO", tmp_path)  # no .venv-chemprop in the checkout
    with pytest.raises(peers.ChempropNotFound, match="--chemprop-bin"):
        peers.resolve_chemprop_bin()
    with pytest.raises(peers.ChempropNotFound, match="not an executable"):
        peers.resolve_chemprop_bin(str(tmp_path / "nope" / "chemprop"))
    monkeypatch.setenv("GMNET_CHEMPROP_BIN", str(tmp_path / "missing"))
    with pytest.raises(peers.ChempropNotFound, match="GMNET_CHEMPROP_BIN"):
        peers.resolve_chemprop_bin()
    monkeypatch.delenv("GMNET_CHEMPROP_BIN")

    results = tmp_path / "results"
    argv = ["--arm", "chemprop", "rf_ecfp", "--endpoints", "freesolv", "--seeds", "0", "--limit", str(LIMIT),
            "--threads", "1", "--results-dir", str(results), "--data-home", str(moleculenet_path)]
    assert run.main(argv) == 1  # the chemprop run fails with the message, the RF run goes on
    err = capsys.readouterr().err
    assert "FAILED chemprop freesolv seed0" in err and "no Chemprop executable" in err
    assert not (results / f"peers@limit={LIMIT}" / "chemprop").exists()
    assert (results / f"peers@limit={LIMIT}" / "rf_ecfp" / "freesolv" / "seed0.json").is_file()


def test_peer_arms_reject_max_epochs(capsys):
    with pytest.raises(SystemExit):
        run.main(["--arm", "rf_ecfp", "--endpoints", "esol", "--max-epochs", "2"])
    assert "--max-epochs applies to the transformer arms" in capsys.readouterr().err


def _chemprop_or_skip():
    try:
        return peers.resolve_chemprop_bin()
    except peers.ChempropNotFound:
        pytest.skip("no Chemprop executable (.venv-chemprop, GMNET_CHEMPROP_BIN or PATH)")


@pytest.mark.slow
def test_chemprop_end_to_end(tmp_path, moleculenet_path):
    exe = _chemprop_or_skip()
    data = C.load_endpoint(ENDPOINTS["freesolv"], data_home=str(moleculenet_path), limit=LIMIT)
    rec = peers.run_peer("chemprop", data, 0, threads=1, command="test", limit=LIMIT, chemprop_bin=exe)
    assert rec["arm"] == "chemprop" and rec["test_metric"] > 0 and rec["valid_metric"] > 0
    assert rec["versions"]["chemprop"] == peers.CHEMPROP_VERSION and rec["versions"]["chemprop_env"]["rdkit"]
    assert rec["n_epochs"] == 50 and 1 <= rec["best_epoch"] <= 50 and len(rec["valid_curve"]) == 50
    assert any(" train " in c and "--pytorch-seed 0" in c for c in rec["peer"]["commands"])
    assert sum(" predict " in c for c in rec["peer"]["commands"]) == 2
    assert rec["hyperparameters"]["epochs"] == "50" and rec["wall_time_s"]["fit"] > 0


# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------
def _peer_record(arm, endpoint, seed, test, fit=2.0, sha="abc"):
    r = _record("chemberta", endpoint, seed, test)
    r.update(arm=arm, k=None, L=None, protocol="peers", protocol_base="peers",
             protocol_definition=peers.peer_protocol_definition(), n_epochs=None, n_parameters=None,
             wall_time_s={"total": fit + 1, "fit": fit, "per_epoch_mean": None},
             hardware={"cpu_model": "Test CPU", "cpu_count": 2, "torch_threads": 1, "device": "cpu"},
             sizes={"train": 8, "valid": 1, "test": 1, "split_sha256": sha},
             timestamp_utc="2026-02-01T00:00:00Z")
    return r


def test_report_peers_section_from_hand_made_records(tmp_path):
    results = tmp_path / "results"
    recs = [_peer_record("rf_ecfp", "esol", s, v) for s, v in enumerate((1.1, 1.2, 1.3))]
    recs += [_peer_record("chemprop", "esol", s, v, fit=100.0) for s, v in enumerate((0.9, 1.0))]
    recs += [_peer_record("rf_ecfp", "bbbp", 0, 0.80), _peer_record("rf_ecfp", "tox21", 0, 0.70)]
    recs += [_record("gmnet", "esol", s, v) for s, v in enumerate((1.0, 1.0, 1.0))]
    recs += [_record("chemberta", "bbbp", 0, 0.85)]
    tuned = _record("gmnet", "esol", 0, 0.85, protocol="tuned")
    elsewhere = _record("gmnet", "bbbp", 0, 0.99, protocol="tuned", k=10, L=2)  # not tuned's (k, L): not its column
    recs += [tuned, elsewhere]
    _write_records(results, recs)
    text, section = _report_section(results, tmp_path, "Peers: what a chemist would pick instead")
    header = next(ln for ln in section.splitlines() if ln.startswith("| Endpoint | Metric"))
    assert header.split("|")[3:9] == [" RF-ECFP4 ", " Chemprop ", " Chem-GMNet `tuned` ", " ChemBERTa `tuned` ",
                                      " Chem-GMNet `chemberta3` ", " ChemBERTa `chemberta3` "]
    esol = next(ln for ln in section.splitlines() if ln.startswith("| ESOL | RMSE"))
    cells = [c.strip() for c in esol.split("|")[3:9]]
    assert cells == ["1.200 ± 0.082 (n=3)", "0.950 ± 0.050 (n=2)", "**0.850** (n=1)", "—", "1.000 ± 0.000 (n=3)", "—"]
    bbbp = next(ln for ln in section.splitlines() if ln.startswith("| BBBP | ROC-AUC"))
    assert [c.strip() for c in bbbp.split("|")[3:9]] == ["0.800 (n=1)", "—", "—", "—", "—", "**0.850** (n=1)"]
    assert "| Tox21 (12 tasks) * |" in section and "| HIV *" not in section  # extras only when a peer has them
    times = next(ln for ln in section.splitlines() if ln.startswith("| ESOL |") and "RMSE" not in ln)
    rf_time, cp_time = (c.strip() for c in times.split("|")[2:4])
    assert rf_time.startswith("2.0 s (H") and cp_time.startswith("100.0 s (H")
    assert "Best of the row:" in section and "same one per endpoint" in section
    # the peers protocol gets no "Other protocols" table of its own, but its hardware and commands are listed
    assert "### Protocol `peers`" not in text
    hw = text.split("## Hardware and wall time")[1]
    assert "| peers | RF-ECFP4 | esol | 3 |" in hw and "| peers | Chemprop | esol | 2 |" in hw
    # a target counts only against every peer on the same seeds: ESOL's one tuned seed is not compared
    assert "Not comparable yet: ESOL (RF-ECFP4, Chemprop on other seeds than ours)" in section
    assert "BBBP (no Chemprop records)" not in section  # no tuned BBBP run at tuned's (k, L): nothing to compare
    summary = json.loads((results / "summary.json").read_text())["peers"]
    assert summary["endpoints"]["esol"]["best"] == ["gmnet@tuned"]
    assert summary["endpoints"]["esol"]["columns"]["rf_ecfp"]["test"]["n"] == 3
    assert summary["endpoints"]["esol"]["columns"]["chemprop"]["mean_fit_s"] == pytest.approx(100.0)

    # a record on another split is flagged
    odd = _peer_record("chemprop", "esol", 2, 1.0, sha="other")
    _write_records(results, [odd])
    text, _ = _report_section(results, tmp_path, "Peers: what a chemist would pick instead")
    assert "**Warning:** the records of ESOL do not all carry the same `split_sha256`" in text


def _epoch_average_cell(root, endpoint, seed, top3, **changed):
    """A hand-made cell of benchmarks.epoch_average: the defaults of its round (the best epoch
    restored; ``changed``: parameters the fit had otherwise) and its variants' valid figures."""
    from benchmarks import epoch_average

    params = C.estimator_class("gmnet", ENDPOINTS[endpoint])(random_state=seed, average_epochs=1).get_params(deep=False)
    params = {**{k: v for k, v in params.items() if k != "callbacks"}, **changed}
    cell = {"schema": epoch_average.SCHEMA, "endpoint": endpoint, "seed": seed, "params": params,
            "variants": {"best": {"valid_metric": top3 - 0.01}, "top3": {"valid_metric": top3}}}
    C.write_json_atomic(Path(root) / f"{endpoint}_seed{seed}.json", C.jsonable(cell))


def test_report_compares_the_targets_on_the_valid_split(tmp_path):
    """The peers beside the defaults on the valid split: the defaults' cells fitted as a user would
    (averaging the three best epochs, the epoch-average round's top3 variant; a cell of other
    parameters left out) against RF-ECFP4, `tuned` against Chemprop; a peer not beaten on test is
    named with whether the valid split shows the gap."""
    from gmnet_sklearn import GMNetClassifier

    assert GMNetClassifier().average_epochs == 3  # (with 1: the recipe search's cells of the defaults)
    results = tmp_path / "results"
    recs = []
    for s in range(2):
        rf = _peer_record("rf_ecfp", "bace_classification", s, 0.87)
        cp = _peer_record("chemprop", "bace_classification", s, 0.70)
        mine = _record("gmnet", "bace_classification", s, 0.83, protocol="tuned")
        rf["valid_metric"], cp["valid_metric"], mine["valid_metric"] = 0.72, 0.55, 0.76
        recs += [rf, cp, mine]
    _write_records(results, recs)
    for s, v in enumerate((0.74, 0.75, 0.76)):
        _epoch_average_cell(results / "epoch_average", "bace_classification", s, v)
    _epoch_average_cell(results / "epoch_average", "bace_classification", 3, 0.10, max_epochs=7)  # not the defaults
    _, section = _report_section(results, tmp_path, "Peers: what a chemist would pick instead")
    part = section.split("### The targets on the valid split")[1]
    assert "the defaults' cells (`epoch_average` top3)" in part
    row = next(ln for ln in part.splitlines() if ln.startswith("| BACE-cls |"))
    assert [c.strip() for c in row.split("|")][3:7] == ["0.750 ± 0.008 (n=3)", "0.720 ± 0.000 (n=2)",
                                                        "0.550 ± 0.000 (n=2)", "0.760 ± 0.000 (n=2)"]
    # on the seeds both have (0 and 1), as on test: the cell of seed 2 is in the table, not the pair
    assert ("BACE-cls: behind RF-ECFP4 on test (0.830 vs 0.870, seeds 0, 1), ahead of it on the valid split "
            "(the defaults' cells 0.745 vs 0.720, seeds 0, 1)") in part
    assert "behind Chemprop" not in part  # beaten on test: not a gap
    summary = json.loads((results / "summary.json").read_text())["peers_on_valid"]
    assert summary["candidate"] == "the defaults' cells (`epoch_average` top3)"
    gap = summary["endpoints"]["bace_classification"]["test_gap_on_valid"]["rf_ecfp"]
    assert gap["ahead_on_valid"] is True and gap["seeds"] == [0, 1] and gap["valid"] == pytest.approx([0.745, 0.72])


def test_defaults_on_valid_reads_the_cells_of_the_defaults_kind(tmp_path, monkeypatch):
    """With the best epoch restored (average_epochs=1) the defaults' figures on the valid split are
    the recipe search's cells of their candidate; with k epochs averaged, round twenty-one's
    cells' top<k> variant (the same fit's, its other parameters today's defaults)."""
    from benchmarks.report import validation

    from .test_benchmarks import _search_cell

    monkeypatch.setattr(validation, "defaults_candidate", lambda: "desc_d256_fp_forest_e20")
    _search_cell(tmp_path / "recipe_search", "esol", "desc_d256_fp_forest_e20", 0, 0.90)
    _search_cell(tmp_path / "recipe_search", "esol", "base", 0, 1.20)
    _epoch_average_cell(tmp_path / "epoch_average", "esol", 0, 0.95)
    assert validation.defaults_on_valid(tmp_path, k=1) == (
        "the defaults' search cells (`desc_d256_fp_forest_e20`)", {"esol": {0: 0.90}})
    assert validation.defaults_on_valid(tmp_path, k=3) == ("the defaults' cells (`epoch_average` top3)", {"esol": {0: 0.95}})
    assert validation.defaults_on_valid(tmp_path) == validation.defaults_on_valid(tmp_path, k=3)
    assert validation.defaults_on_valid(tmp_path, k=2)[1] == {}  # (no top2 variant in this cell)


def test_fingerprints_match_the_library_transformer():
    """The peer arm's bits are those of gmnet_sklearn.fingerprints.MorganFingerprint (gmnet-train's RF)."""
    fingerprints = pytest.importorskip("gmnet_sklearn.fingerprints")
    smiles = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C[C@H](N)C(=O)O"]
    ours, _ = peers.morgan_fingerprints(smiles)
    np.testing.assert_array_equal(ours, fingerprints.MorganFingerprint().fit_transform(smiles))


def test_report_shows_a_forest_blending_arm_beside_its_network_alone(tmp_path):
    """Chem-GMNet `tuned` records that blend in a forest: the peers table adds the network alone (never
    the best of a row) and a second target line for it; Table 2's scratch column, beside a fine-tuning
    protocol that trains the network alone, reads the network alone too."""
    results = tmp_path / "results"
    recs = [_peer_record("rf_ecfp", "esol", s, 0.95) for s in range(2)]
    recs += [_peer_record("chemprop", "esol", s, 0.97) for s in range(2)]  # targets count against every peer
    for s in range(2):
        for protocol in ("tuned", "tuned_avg1", "tuned_e30"):  # tuned_avg1: tuned_moses' scratch reference
            r = _record("gmnet", "esol", s, 0.90, protocol=protocol)
            r["forest"] = {"weight": 0.3, "network_valid_metric": 1.1, "network_test_metric": 1.0}
            recs.append(r)
        recs.append(_record("gmnet", "esol", s, 0.92, protocol="tuned_moses"))
    _write_records(results, recs)
    text, section = _report_section(results, tmp_path, "Peers: what a chemist would pick instead")
    header = next(ln for ln in section.splitlines() if ln.startswith("| Endpoint | Metric"))
    assert " Chem-GMNet `tuned`, network alone " in header.split("|")
    esol = next(ln for ln in section.splitlines() if ln.startswith("| ESOL | RMSE"))
    cells = [c.strip() for c in esol.split("|")]
    assert "**0.900 ± 0.000** (n=2)" in cells and "1.000 ± 0.000 (n=2)" in cells
    assert "ESOL (0.900 vs RF-ECFP4 0.950, n=2)" in section  # the target counts the blend ...
    assert "the network of Chem-GMNet `tuned` alone beats the best peer on 0 of 7" in section  # ... and says this
    summary = json.loads((results / "summary.json").read_text())["peers"]
    assert summary["endpoints"]["esol"]["best"] == ["gmnet@tuned"]
    # the network alone has no fit time of its own (its fit is the blend's, the column before)
    times = next(ln for ln in section.splitlines() if ln.startswith("| ESOL |") and "RMSE" not in ln)
    header = next(ln for ln in section.splitlines() if ln.startswith("| Endpoint |") and "Metric" not in ln)
    column = [c.strip() for c in header.split("|")].index("Chem-GMNet `tuned`, network alone")
    assert [c.strip() for c in times.split("|")][column] == "—"
    assert summary["endpoints"]["esol"]["columns"]["gmnet@tuned:network"]["mean_fit_s"] is None
    table2 = text.split("## Table 2: pretrained encoders")[1].split("\n## ")[0]
    row = next(ln for ln in table2.splitlines() if ln.startswith("| ESOL |"))
    assert [c.strip() for c in row.split("|")][5:8] == ["0.920 ± 0.000 (n=2)", "—", "1.000 ± 0.000 (n=2)"]


def test_report_shows_a_candidate_recipe_beside_tuned_without_ranking_it(tmp_path, monkeypatch):
    """A recipe scored on test before the defaults take it (``CANDIDATE_PROTOCOLS``): its column
    follows `tuned`'s, it is never the best of a row (it is that arm's next recipe), and a line of
    its own counts the targets it would meet."""
    from benchmarks.report import peers

    candidate = "tuned_avg3"  # (round twenty-one's, the defaults since: a protocol that still exists)
    monkeypatch.setattr(peers, "CANDIDATE_PROTOCOLS", (candidate,))
    results = tmp_path / "results"
    recs = [_peer_record("rf_ecfp", "esol", s, 0.95) for s in range(2)]
    recs += [_peer_record("chemprop", "esol", s, 0.97) for s in range(2)]
    for s in range(2):
        recs += [_record("gmnet", "esol", s, 0.96, protocol="tuned"), _record("gmnet", "esol", s, 0.90, protocol=candidate)]
    _write_records(results, recs)
    _, section = _report_section(results, tmp_path, "Peers: what a chemist would pick instead")
    header = [c.strip() for c in next(ln for ln in section.splitlines() if ln.startswith("| Endpoint | Metric")).split("|")]
    at = header.index("Chem-GMNet `tuned`")
    assert header[at + 1] == f"Chem-GMNet `{candidate}` (candidate)"
    esol = [c.strip() for c in next(ln for ln in section.splitlines() if ln.startswith("| ESOL | RMSE")).split("|")]
    assert esol[at + 1] == "0.900 ± 0.000 (n=2)"  # the lowest RMSE, not bold: not ranked
    assert esol[header.index("RF-ECFP4")] == "**0.950 ± 0.000** (n=2)"
    assert "Not met: ESOL (0.960 vs RF-ECFP4 0.950, n=2; gap 0.010)" in section
    assert (f"For comparison, not a target: Chem-GMNet `{candidate}`, the candidate recipe, beats the best peer on "
            "1 of 7: ESOL (0.900 vs RF-ECFP4 0.950, n=2)") in section
    summary = json.loads((results / "summary.json").read_text())["peers"]
    assert summary["endpoints"]["esol"]["best"] == ["rf_ecfp"]


def test_report_never_averages_gpu_and_cpu_times_and_ranks_on_shared_seeds(tmp_path):
    results = tmp_path / "results"
    gpu = {"cpu_model": "Test CPU", "cpu_count": 16, "torch_threads": 1, "device": "cuda", "gpu_name": "Test GPU"}
    recs = [_peer_record("rf_ecfp", "esol", s, v) for s, v in enumerate((1.0, 0.6, 0.6))]
    recs += [_record("gmnet", "esol", 0, 0.8, protocol="tuned")]
    recs += [{**_record("chemberta", "esol", 0, 0.85, protocol="tuned"), "hardware": gpu}]  # timed on the GPU only
    # ChemBERTa chemberta3: two seeds on the CPU, one on a GPU
    cb = [_record("chemberta", "esol", s, 1.0) for s in range(3)]
    for r, total, epoch in zip(cb, (600.0, 620.0, 30.0), (6.0, 6.2, 0.3)):
        r["wall_time_s"] = {"total": total, "fit": total - 1, "per_epoch_mean": epoch}
    cb[2]["hardware"] = gpu
    # Chem-GMNet chemberta3 BBBP: seed 0 on the CPU, seed 1 on the GPU, seed 2 missing
    gm = [_record("gmnet", "bbbp", s, 0.7) for s in (0, 1)]
    gm[0]["wall_time_s"], gm[1]["wall_time_s"] = {"total": 1200.0, "per_epoch_mean": 12.0}, {"total": 60.0, "per_epoch_mean": 0.6}
    gm[1]["hardware"] = {**gpu, "gmnet_path": "triton fused kernel"}
    _write_records(results, recs + cb + gm)
    text, section = _report_section(results, tmp_path, "Peers: what a chemist would pick instead")
    # ranked on seed 0, the only one all columns have: Chem-GMNet `tuned` 0.8 beats RF's 1.0 there,
    # though RF's mean over its three seeds (0.733) is lower
    esol = next(ln for ln in section.splitlines() if ln.startswith("| ESOL | RMSE"))
    assert [c.strip() for c in esol.split("|")[3:6]] == ["0.733 ± 0.189 (n=3)", "—", "**0.800** (n=1)"]
    summary = json.loads((results / "summary.json").read_text())
    assert summary["peers"]["endpoints"]["esol"]["best"] == ["gmnet@tuned"]
    # fit times: one mean per device
    times = next(ln for ln in section.splitlines() if ln.startswith("| ESOL |") and "RMSE" not in ln)
    cb_time = [c.strip() for c in times.split("|")][-2]
    assert cb_time.startswith("10.2 min (H") and "; 29.0 s (H" in cb_time and cb_time.endswith(", GPU)")
    column = summary["peers"]["endpoints"]["esol"]["columns"]["chemberta@chemberta3"]
    assert column["mean_fit_s"] == pytest.approx(609.0) and column["fit_s_by_device"]["cuda"]["mean_fit_s"] == 29.0
    # a column timed on the GPU only has no mean_fit_s: no ratio of two columns mixes GPU and CPU seconds
    gpu_only = summary["peers"]["endpoints"]["bbbp"]["columns"]["gmnet@chemberta3"]
    assert set(gpu_only["fit_s_by_device"]) == {"cpu", "cuda"} and gpu_only["mean_fit_s"] == pytest.approx(1200.0)
    tuned_gpu = summary["peers"]["endpoints"]["esol"]["columns"]["chemberta@tuned"]
    assert set(tuned_gpu["fit_s_by_device"]) == {"cuda"} and tuned_gpu["mean_fit_s"] is None
    # hardware: the GPU run has its own row
    hw = text.split("## Hardware and wall time")[1]
    assert "| chemberta3 | ChemBERTa | esol | 2 |" in hw and "| chemberta3 | ChemBERTa (GPU) | esol | 1 |" in hw
    row = next(ln for ln in hw.splitlines() if ln.startswith("| chemberta3 | ChemBERTa | esol |"))
    assert "| 6.10 |" in row  # the CPU runs' seconds an epoch alone
    # the missing seed's measured runs: one figure per device
    missing = next(ln for ln in text.splitlines() if "Chem-GMNet k=8 L=3 bbbp: seed 2" in ln)
    assert "the run made took 20.0 min, on H" in missing and "; the run made took 60.0 s, on H" in missing
    assert missing.endswith(", GPU)")


def test_morgan_fingerprint_rejects_blank_smiles_and_checks_on_invalid_without_fit():
    from gmnet_sklearn.exceptions import InvalidSmilesWarning
    from gmnet_sklearn.fingerprints import MorganFingerprint

    with pytest.raises(ValueError, match=r"rows 1 \(''\)"):
        MorganFingerprint().transform(["CCO", ""])
    with pytest.warns(InvalidSmilesWarning, match=r"1 of 2 SMILES .* all-zero rows: rows 1 \(''\)"):
        assert MorganFingerprint(on_invalid="zeros").transform(["CCO", ""])[1].sum() == 0
    with pytest.raises(ValueError, match="on_invalid must be 'raise' or 'zeros'"):
        MorganFingerprint(on_invalid="bogus").transform(["CCO"])  # transform needs no fit: it checks too
    # RDKit would truncate a float radius (names saying otherwise), overflow on a negative one,
    # fail obscurely at n_bits=0 and take any truthy counts
    for params, match in [({"radius": 1.7}, "radius must be an integer >= 0, got 1.7"),
                          ({"radius": -1}, "radius must be an integer >= 0"),
                          ({"n_bits": 0}, "n_bits must be an integer >= 1, got 0"),
                          ({"n_bits": 2.9}, "n_bits must be an integer >= 1"),
                          ({"counts": "no"}, "counts must be True or False")]:
        for call in (lambda fp: fp.fit(["CCO"]), lambda fp: fp.transform(["CCO"])):
            with pytest.raises(ValueError, match=match):
                call(MorganFingerprint(**params))
    assert MorganFingerprint(radius=np.int64(1), n_bits=np.int64(16), counts=np.bool_(True)).transform(["CCO"]).shape == (1, 16)


def test_whitespace_inside_a_smiles_is_no_molecule_for_the_featurisers():
    """RDKit's default parser reads what follows a space as the molecule's name (or CXSMILES),
    so "CC O" would be ethane; here it is invalid, as for the tokenizer."""
    from gmnet_sklearn.augment import randomized_smiles
    from gmnet_sklearn.descriptors import compute_descriptors
    from gmnet_sklearn.fingerprints import MorganFingerprint
    from gmnet_sklearn.utils import mol_from_smiles

    for s in ("CC O", "CCO\tN", "c1ccccc1 |$;;;;;;$|"):
        assert mol_from_smiles(s) is None
    for s in (" CCO", "CCO ", "CCO\n"):  # around it: stripped, as the tokenizer does
        assert mol_from_smiles(s) is not None
    with pytest.raises(ValueError, match=r"rows 1 \('CC O'\)"):
        MorganFingerprint().transform(["CC", "CC O"])
    with pytest.raises(ValueError, match=r"rows 1 \('CC O'\)"):
        compute_descriptors(["CC", "CC O"])
    assert randomized_smiles(["CC O"], 2, random_state=0) == [["CC O", "CC O"]]  # passed through, as invalid


def test_chemprop_split_sizes_read_from_its_logs(tmp_path):
    """Found in review: nothing checked that Chemprop trained on all of our train/valid rows (its own
    RDKit could drop some); the sizes it logs are compared with the split's."""
    from benchmarks.peers import _chemprop_split_sizes

    assert _chemprop_split_sizes(tmp_path) is None
    (tmp_path / "chemprop.log").write_text("$ chemprop train ...\nno sizes here\n")
    assert _chemprop_split_sizes(tmp_path) is None
    logs = tmp_path / "chemprop_logs" / "train"
    logs.mkdir(parents=True)
    (logs / "2026.log").write_text("INFO:chemprop.cli.utils - train/val/test split_0 sizes: [902, 113, 113]\n")
    assert _chemprop_split_sizes(tmp_path) == [902, 113, 113]
