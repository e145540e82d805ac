"""benchmarks/embedder_features.py on the first rows of two endpoints, and its report section."""

from __future__ import annotations

import json

import pytest

from benchmarks import embedder_features, report

LIMIT = 80


@pytest.mark.filterwarnings("ignore:ROC-AUC is undefined")
def test_embedder_features_run_resume_and_report(tmp_path, moleculenet_path, deepchem_vocab, capsys):
    results = tmp_path / "results"
    argv = ["--protocol", "smoke", "--limit", str(LIMIT), "--max-epochs", "1", "--endpoints", "freesolv",
            "bbbp", "--seeds", "0", "--features", "pooled", "head", "moments",
            "--data-home", str(moleculenet_path), "--vocab-file", str(deepchem_vocab), "--device", "cpu",
            "--results-dir", str(results)]
    assert embedder_features.main(argv) == 0
    run = f"smoke@max_epochs=1,limit={LIMIT}"
    for endpoint, metric in (("freesolv", "rmse"), ("bbbp", "roc_auc")):
        rec = json.loads((results / "embedder" / run / endpoint / "seed0.json").read_text())
        assert rec["schema"] == embedder_features.SCHEMA and rec["run"] == run and rec["metric"] == metric
        assert set(rec["models"]) == {"gmnet", "rf_ecfp4", *(f"{m}_{f}" for m in ("rf", "ridge")
                                                              for f in ("pooled", "head", "moments"))}
        models = rec["models"]
        assert models["rf_pooled"]["n_features"] == models["ridge_head"]["n_features"] == rec["hyperparameters"]["d_model"]
        assert models["rf_moments"]["n_features"] > models["rf_pooled"]["n_features"]
        assert models["rf_ecfp4"]["n_features"] == 2048
        assert models["rf_moments"]["model"]["params"]["max_features"] == "sqrt"
        assert models["rf_ecfp4"]["model"]["params"]["n_estimators"] == 500
        if metric == "rmse":  # freesolv's first rows hold both splits' values: every score is a number
            assert all(m["test_metric"] > 0 and m["valid_metric"] > 0 for m in models.values())
        for key in ("hardware", "versions", "git", "command", "sizes", "wall_time_s"):
            assert rec[key]
    assert "rf_ecfp4" in capsys.readouterr().out
    # --resume skips what exists
    assert embedder_features.main(argv + ["--resume"]) == 0
    assert capsys.readouterr().out == ""
    # ... made with the same estimator and features; a record of other ones is redone
    from benchmarks import _common as C
    from benchmarks.protocols import ENDPOINTS, get_protocol

    path = results / "embedder" / run / "freesolv" / "seed0.json"
    est = C.make_estimator(get_protocol("smoke"), "gmnet", ENDPOINTS["freesolv"], 0, vocab_file="moved/vocab.txt",
                           device="cpu", max_epochs=1)
    features = ["pooled", "head", "moments"]
    assert embedder_features.stale_record(path, est, features) is None  # where the vocabulary lies is no matter
    assert "other features" in embedder_features.stale_record(path, est, ["pooled"])
    assert embedder_features.stale_record(path, est, features[::-1]) is None  # the same features, another order
    assert "max_epochs=1 (now 2)" in embedder_features.stale_record(path, est.set_params(max_epochs=2), features)
    # a record written before a parameter existed ran as its default does: still this run's ...
    rec = json.loads(path.read_text())
    before = {k: v for k, v in rec["hyperparameters"].items() if k != "normalize_y"}
    path.write_text(json.dumps({**rec, "hyperparameters": before}))
    est.set_params(max_epochs=1)
    assert embedder_features.stale_record(path, est, features) is None
    # ... not a run with it at another value
    assert "normalize_y=True (now False)" in embedder_features.stale_record(path, est.set_params(normalize_y=False),
                                                                             features)
    est.set_params(normalize_y=True)
    path.write_text(json.dumps(rec))
    # the report leaves shortened runs out, and shows full ones
    assert report.embedder_section(results, tmp_path)[0] is None
    full = results / "embedder" / "smoke" / "freesolv" / "seed0.json"
    full.parent.mkdir(parents=True)
    rec = json.loads((results / "embedder" / run / "freesolv" / "seed0.json").read_text())
    full.write_text(json.dumps({**rec, "run": "smoke"}))
    text, summary = report.embedder_section(results, tmp_path)
    assert "Estimator protocol `smoke`" in text and "| FreeSolv | RMSE ↓ |" in text and "RF-ECFP4" in text
    test = summary["smoke"]["endpoints"]["freesolv"]["test"]
    assert test["rf_moments"]["mean"] == pytest.approx(rec["models"]["rf_moments"]["test_metric"])
    # and the README gets the section (the benchmark records are not Table 1 records)
    readme = tmp_path / "README.md"
    assert report.main(["--results-dir", str(results), "--output", str(readme)]) == 0
    assert "## Model features: RF and ridge on Chem-GMNet's embeddings" in readme.read_text()
