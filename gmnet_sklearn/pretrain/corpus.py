"""Streaming reader of a SMILES corpus: a file or a folder of ``.smi``, ``.txt`` or ``.csv`` files,
each optionally gzip-compressed (``.gz``).

Records are read line by line and handed out in chunks of ``chunk_size``; nothing holds more than
one chunk, so memory does not grow with the corpus. ``.smi``/``.txt``: the first whitespace-separated
field of each line (blank lines and ``#`` comments skipped; a first line whose field is ``smiles``
is a header). ``.csv``: the column named ``smiles`` (any case), or ``smiles_column``.

A folder's corpus files are read in name order; files whose name starts with ``test`` or ``valid``
are held out (MOSES ships ``train.csv.gz``, ``test.csv.gz`` and ``test_scaffolds.csv.gz`` side by
side) and :func:`held_out_file` finds the ``test`` file for evaluation. Files are UTF-8, with or
without a byte-order mark (as spreadsheet programs write CSV); a byte that is not UTF-8 becomes
U+FFFD, which no SMILES holds, so its record is counted as invalid like any other.
"""

from __future__ import annotations

import csv
import gzip
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

SUFFIXES = (".smi", ".txt", ".csv")
HELD_OUT_PREFIXES = ("test", "valid")
#: Names of molecule data this reader does not take: a folder's files named so are reported, not
#: silently passed over (a folder's notes, MOSES's MANIFEST.md, are no data).
_OTHER_DATA = (".smiles", ".tsv", ".sdf", ".mol2", ".parquet", ".bz2", ".xz", ".zst", ".zip", ".7z")


def _kind(path: Path) -> str | None:
    """'smi' or 'csv' for a corpus file name, else None."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return "csv" if suffix == ".csv" else "smi"
    return None


def corpus_files(corpus, hold_out: bool = True) -> list[Path]:
    """The training files of ``corpus`` (a file, or a folder's corpus files minus held-out ones;
    all of them with ``hold_out=False``, for a folder that is itself the held-out set)."""
    path = Path(corpus)
    if path.is_file():
        if _kind(path) is None:
            raise ValueError(f"{path}: not a SMILES corpus file (expected {', '.join(SUFFIXES)}, optionally .gz)")
        return [path]
    if path.is_dir():
        other = sorted(p.name for p in path.iterdir() if p.is_file() and _kind(p) is None
                       and p.name.lower().removesuffix(".gz").endswith(_OTHER_DATA))
        if other:
            import warnings

            from ..utils.stacklevel import _caller_stacklevel

            warnings.warn(f"{path}: files this reader does not take are left out: {other} (a corpus file is "
                          f"{', '.join(SUFFIXES)}, optionally .gz)", UserWarning, stacklevel=_caller_stacklevel())
        files = sorted(p for p in _corpus_like(path) if not (hold_out and p.name.lower().startswith(HELD_OUT_PREFIXES)))
        if not files:
            raise ValueError(f"{path}: no SMILES corpus files ({', '.join(SUFFIXES)}, optionally .gz"
                             + (f"; names starting with {HELD_OUT_PREFIXES} are held out)" if hold_out else ")"))
        return files
    raise FileNotFoundError(f"SMILES corpus {path} does not exist")


def _corpus_like(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and _kind(p) is not None)


def unused_files(corpus, used) -> list[str]:
    """The corpus files of a folder ``corpus`` that are not in ``used`` (the files trained on and
    evaluated): held out by name but not the evaluated set, so a run says it leaves them unused."""
    path = Path(corpus)
    if not path.is_dir():
        return []
    used = {Path(p).resolve() for p in used}
    return [p.name for p in _corpus_like(path) if p.resolve() not in used]


def held_out_file(corpus) -> Path | None:
    """The corpus's test file: ``test.<ext>`` in the folder (or beside the file), or None."""
    path = Path(corpus)
    folder = path if path.is_dir() else path.parent
    for p in sorted(folder.iterdir()):
        stem = p.name.lower().split(".")[0]
        if p.is_file() and stem == "test" and _kind(p) is not None and p != path:
            return p
    return None


def _open_text(path: Path):
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline="")
    return open(path, encoding="utf-8-sig", errors="replace", newline="")


def iter_file(path, smiles_column: str | None = None) -> Iterator[str]:
    """The SMILES of one corpus file, one at a time (see the module docstring for the formats).
    A file that cannot be read to its end (not gzip, a truncated gzip, a broken CSV) is a
    ``ValueError`` naming it and how far it was read."""
    path = Path(path)
    kind = _kind(path)
    if kind is None:
        raise ValueError(f"{path}: not a SMILES corpus file (expected {', '.join(SUFFIXES)}, optionally .gz)")
    n = 0
    try:
        with _open_text(path) as fh:
            for smi in (_csv_records(fh, path, smiles_column) if kind == "csv" else _line_records(fh)):
                yield smi
                n += 1
    except (OSError, EOFError, csv.Error) as exc:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"{path}: unreadable after {n} records ({type(exc).__name__}: {exc})") from exc


def check_headers(files, smiles_column: str | None = None, hint: str = "") -> None:
    """The SMILES column of every CSV among ``files``, found before any is encoded (a later file's
    header would otherwise fail after the earlier files' minutes of encoding); ``hint`` is added
    to the error (where the files come from)."""
    for path in files:
        if _kind(Path(path)) != "csv":
            continue
        try:
            with _open_text(Path(path)) as fh:
                header = next(csv.reader(fh), None)
        except (OSError, EOFError, csv.Error) as exc:
            raise ValueError(f"{path}: unreadable header ({type(exc).__name__}: {exc})") from exc
        if header is not None:
            _smiles_column_index(header, Path(path), smiles_column, hint)


def _smiles_column_index(header: list, path: Path, smiles_column: str | None, hint: str = "") -> int:
    wanted = (smiles_column or "smiles").lower()
    names = [h.strip().lower() for h in header]
    if wanted not in names:
        from rdkit import rdBase

        from ..utils.validation import mol_from_smiles

        with rdBase.BlockLogs():  # (a header that is no molecule: RDKit's log would say so on stderr)
            molecule = smiles_column is None and len(header) == 1 and mol_from_smiles(header[0].strip()) is not None
        if molecule:
            fix = "its first line is a molecule, not a header: add a first line 'smiles'"
        else:
            fix = "pass smiles_column= naming the column that holds them"
        raise ValueError(f"{path}: no {smiles_column or 'SMILES'!r} column in its header {header[:10]}; {fix}{hint}")
    return names.index(wanted)


def _csv_records(fh, path: Path, smiles_column: str | None) -> Iterator[str]:
    reader = csv.reader(fh)
    header = next(reader, None)
    if header is None:
        return
    col = _smiles_column_index(header, path, smiles_column)
    for row in reader:
        if not any(field.strip() for field in row):  # a blank line, as pandas and .smi skip it
            continue
        yield row[col].strip() if len(row) > col else ""


def _line_records(fh) -> Iterator[str]:
    first = True
    for line in fh:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        field = line.split()[0]
        if first and field.lower() == "smiles":
            first = False
            continue
        first = False
        yield field


def iter_smiles(corpus, smiles_column: str | None = None, skip: int = 0) -> Iterator[str]:
    """Every SMILES of the corpus's training files in order, after skipping ``skip`` records."""
    for path in corpus_files(corpus):
        for smi in iter_file(path, smiles_column):
            if skip:
                skip -= 1
                continue
            yield smi


def read_chunks(records, chunk_size: int) -> Iterator[list[str]]:
    """Lists of at most ``chunk_size`` consecutive records of the iterator ``records``."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    chunk: list[str] = []
    for rec in records:
        chunk.append(rec)
        if len(chunk) == chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def describe(files) -> list[dict]:
    """Name and size of each file: a corpus's identity for the cache and the run's fingerprint
    (not the path or the modification time, so a run goes on from a fresh copy of the corpus in
    another session or on another machine)."""
    return [{"name": Path(p).name, "bytes": os.stat(p).st_size} for p in files]


def content_digest(files) -> str:
    """SHA-256 (16 hex digits) of the files' contents, in order (a ``.gz`` file's uncompressed
    bytes: the same corpus gzipped again is the same corpus): what tells an edit that keeps a
    file's name and size (Cl to Br, lines reordered) from the corpus a cache or a run was made
    from. Kept beside :func:`describe`'s identity, not in it, so the caches and runs made before
    it keep theirs (a fraction of a second for MOSES's 10 MB of gzip)."""
    import hashlib

    h = hashlib.sha256()
    for p in files:
        try:
            with (gzip.open(p, "rb") if str(p).lower().endswith(".gz") else open(p, "rb")) as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except FileNotFoundError:
            raise
        except (OSError, EOFError, zlib.error) as exc:  # (read first: iter_file's error came too late, a review)
            raise ValueError(f"{p}: unreadable ({type(exc).__name__}: {exc})") from exc
        h.update(b"\0")  # a file boundary: (ab, c) is not (a, bc)
    return h.hexdigest()[:16]


__all__ = ["corpus_files", "held_out_file", "iter_file", "iter_smiles", "read_chunks", "describe", "content_digest"]
