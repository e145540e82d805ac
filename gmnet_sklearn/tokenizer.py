"""SMILES tokenisation for Chem-GMNet.

The token split is DeepChem's (Schwaller et al. regex), so ids produced with DeepChem's vocabulary
file are identical to ``deepchem.feat.smiles_tokenizer.SmilesTokenizer(vocab_file).encode``.
On top of that, every token carries a *conjugation flag* computed with RDKit, which the model
uses as an extra per-token feature.

Differences from DeepChem, all deliberate:

* characters the regex cannot match (whitespace, ``|``, stray ``[``) raise ``ValueError``;
  DeepChem silently drops them;
* sequences are never truncated (DeepChem cuts at 510 tokens); use ``max_length`` in
  :meth:`SmilesTokenizer.encode_batch` to reject over-long inputs explicitly.

Nothing here imports torch or DeepChem.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .utils.messages import short_repr
from .utils.validation import check_smiles_input

__all__ = [
    "SMILES_REGEX",
    "SMILES_PATTERN",
    "SPECIAL_TOKENS",
    "EncodedBatch",
    "SmilesTokenizer",
    "conjugation_flags",
    "is_atom_token",
    "tokenize_smiles",
]

# Verbatim from deepchem/feat/smiles_tokenizer.py (SMI_REGEX_PATTERN); do not edit, the ids
# must stay compatible with DeepChem's vocabulary.
SMILES_REGEX: str = (
    r"""(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>>?|\*|\$|\%[0-9]{2}|[0-9])"""
)
SMILES_PATTERN: re.Pattern[str] = re.compile(SMILES_REGEX)

PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
# Order matters: it fixes the ids of a fitted (file-less) vocabulary.
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

# Atoms that may appear without brackets in SMILES (the organic subset, aliphatic and aromatic).
_ORGANIC_ATOMS = frozenset({"B", "Br", "C", "Cl", "N", "O", "S", "P", "F", "I", "b", "c", "n", "o", "s", "p", "*"})
_UNUSED_RE = re.compile(r"\[unused\d+\]")

_MAX_REPORTED = 10  # offenders listed in an error message


# --------------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------------
def tokenize_smiles(smiles: str) -> list[str]:
    """Split ``smiles`` with :data:`SMILES_REGEX`.

    Raises ``ValueError`` if the tokens do not re-join to the input, i.e. some characters are
    not covered by the regex (DeepChem would drop them silently and change the molecule).
    """
    if not isinstance(smiles, str):
        raise TypeError(f"SMILES must be a str, got {type(smiles).__name__}: {short_repr(smiles)}")
    # Surrounding whitespace is not part of a SMILES (RDKit and DeepChem ignore it; ESOL has
    # trailing spaces); whitespace inside one is still an error.
    smiles = smiles.strip()
    tokens, problem = _tokens_or_problem(smiles)
    if problem is not None:
        raise ValueError(f"cannot tokenize SMILES {short_repr(smiles)}: {problem}")
    return tokens


def _tokens_or_problem(smiles: str) -> tuple[list[str] | None, str | None]:
    """The tokens of a stripped SMILES, or why it has none (the batch path's reason, the single
    path's error)."""
    inner = next((i for i, ch in enumerate(smiles) if ch.isspace()), None)
    if inner is not None:  # (the regex's bracket atoms would take "[N H4+]" whole)
        return None, f"whitespace {smiles[inner]!r} at {inner} inside it (a name or a CXSMILES extension after the SMILES?)"
    tokens = SMILES_PATTERN.findall(smiles)
    if sum(map(len, tokens)) != len(smiles):  # cheap check first; findall never overlaps
        return None, _describe_unmatched(smiles)
    return tokens, None


def _describe_unmatched(smiles: str) -> str:
    """Human-readable list of the characters the regex leaves uncovered, with positions."""
    covered = np.zeros(len(smiles), dtype=bool)
    for m in SMILES_PATTERN.finditer(smiles):
        covered[m.start() : m.end()] = True
    bad = [(i, smiles[i]) for i in np.flatnonzero(~covered)]
    shown = ", ".join(f"{ch!r} at {i}" for i, ch in bad[:_MAX_REPORTED])
    more = f" (+{len(bad) - _MAX_REPORTED} more)" if len(bad) > _MAX_REPORTED else ""
    return f"unmatched characters {shown}{more}"


def is_atom_token(tok: str) -> bool:
    """True for a token that is one atom: ``[...]`` bracket atoms, the organic subset and ``*``.

    The vocabulary's special tokens (``[PAD]``, ``[CLS]``, ``[unused3]``, ...) look like bracket
    atoms but are not atoms.
    """
    if tok in _ORGANIC_ATOMS:
        return True
    return (
        len(tok) > 2
        and tok[0] == "["
        and tok[-1] == "]"
        and tok not in SPECIAL_TOKENS
        and _UNUSED_RE.fullmatch(tok) is None
    )


def _parser_params() -> Any:
    from rdkit import Chem

    params = Chem.SmilesParserParams()
    # Keep explicit [H] atoms as atoms so RDKit atoms and atom tokens correspond one to one.
    params.removeHs = False
    return params


_PARAMS: Any = None  # built on first use, so importing this module does not import RDKit


def _parse(smiles: str) -> Any:
    """RDKit mol with explicit H kept, or ``None``; RDKit's own error log is silenced."""
    global _PARAMS
    from rdkit import Chem, rdBase

    if _PARAMS is None:
        _PARAMS = _parser_params()
    with rdBase.BlockLogs():
        return Chem.MolFromSmiles(smiles, _PARAMS)


def _parse_error(smiles: str) -> str:
    """Why RDKit rejects ``smiles`` (syntax vs. chemistry), for error messages. Slow path only."""
    from rdkit import Chem, rdBase

    params = _parser_params()
    params.sanitize = False
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles, params)
        if mol is None:
            return "RDKit cannot parse it (SMILES syntax error)"
        try:
            Chem.SanitizeMol(mol)
        except Exception as exc:  # RDKit raises several sanitisation exception types
            return f"RDKit rejects it: {str(exc).strip()}"
    return "RDKit cannot parse it"


def _flags_from_mol(mol: Any, tokens: Sequence[str], smiles: str) -> np.ndarray:
    atom_pos = [i for i, t in enumerate(tokens) if is_atom_token(t)]
    if len(atom_pos) != mol.GetNumAtoms():
        # Should not happen for valid SMILES; guards the token<->atom alignment assumption.
        raise ValueError(
            f"SMILES {short_repr(smiles)}: {len(atom_pos)} atom tokens but RDKit has {mol.GetNumAtoms()} atoms; "
            "cannot align conjugation flags with tokens"
        )
    # Index loops: RDKit's GetAtoms()/GetBonds() sequence wrappers are ~3x slower in Python.
    per_atom = [mol.GetAtomWithIdx(i).GetIsAromatic() for i in range(len(atom_pos))]
    for i in range(mol.GetNumBonds()):
        bond = mol.GetBondWithIdx(i)
        if bond.GetIsConjugated():
            per_atom[bond.GetBeginAtomIdx()] = True
            per_atom[bond.GetEndAtomIdx()] = True
    flags = np.zeros(len(tokens), dtype=np.int8)
    # RDKit numbers atoms in order of appearance in the SMILES, which is the atom-token order.
    flags[atom_pos] = per_atom
    return flags


def conjugation_flags(smiles: str, tokens: list[str] | None = None) -> np.ndarray:
    """Per-token conjugation flags (int8, one per token of :func:`tokenize_smiles`).

    1 for an atom token whose RDKit atom is aromatic or has a conjugated bond, 0 otherwise
    (including every non-atom token). ``[CLS]``/``[SEP]`` are not included.
    """
    # RDKit reads "" as a molecule without atoms: blank is an error here, as in the tokenizer
    smiles = SmilesTokenizer._check_str(smiles).strip()
    if tokens is None:
        tokens = tokenize_smiles(smiles)
    mol = _parse(smiles)
    if mol is None:
        raise ValueError(f"invalid SMILES {short_repr(smiles)}: {_parse_error(smiles)}")
    return _flags_from_mol(mol, tokens, smiles)


# --------------------------------------------------------------------------------------------
# Batch container
# --------------------------------------------------------------------------------------------
@dataclass
class EncodedBatch:
    """Result of :meth:`SmilesTokenizer.encode_batch`, one entry per input item.

    ``ids``/``flags`` include ``[CLS]``/``[SEP]``; ``lengths[i] == len(ids[i])``. Items with
    ``valid[i] == False`` (only with ``on_invalid="mask"``) hold just ``[CLS], [SEP]``.
    """

    ids: list[np.ndarray]
    flags: list[np.ndarray]
    lengths: np.ndarray
    valid: np.ndarray
    pad_id: int = 0
    # Reason per invalid item (position -> message); empty when everything is valid.
    errors: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, index) -> "EncodedBatch":
        """The items at ``index`` (positions, negative ones from the end, repeats allowed), in that
        order; ``errors`` keyed by new positions."""
        index = np.asarray(index)
        if index.dtype == bool:  # numpy would read True/False as positions 1/0
            raise TypeError("subset takes positions, not a boolean mask (use np.flatnonzero(mask))")
        index = index.astype(np.int64)
        if ((index < -len(self)) | (index >= len(self))).any():
            raise IndexError(f"positions out of range for {len(self)} items: {index[(index < -len(self)) | (index >= len(self))][:5].tolist()}")
        index = np.where(index < 0, index + len(self), index)
        return EncodedBatch(
            ids=[self.ids[i] for i in index],
            flags=[self.flags[i] for i in index],
            lengths=self.lengths[index],
            valid=self.valid[index],
            pad_id=self.pad_id,
            errors={new: self.errors[int(old)] for new, old in enumerate(index) if int(old) in self.errors},
        )

    @classmethod
    def concat(cls, batches: list["EncodedBatch"]) -> "EncodedBatch":
        """The items of ``batches`` one after another (same tokenizer); ``errors`` re-keyed."""
        errors, offset = {}, 0
        for b in batches:
            errors.update({offset + p: why for p, why in b.errors.items()})
            offset += len(b)
        return cls(ids=[i for b in batches for i in b.ids], flags=[f for b in batches for f in b.flags],
                   lengths=np.concatenate([b.lengths for b in batches]),
                   valid=np.concatenate([b.valid for b in batches]), pad_id=batches[0].pad_id, errors=errors)

    def padded(self, length: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Right-padded ``(ids int64, flags int8, attention_mask bool)`` of shape (n, length)."""
        n = len(self.ids)
        width = int(self.lengths.max(initial=0)) if length is None else int(length)
        if n and width < int(self.lengths.max()):
            raise ValueError(f"length={width} is shorter than the longest sequence ({int(self.lengths.max())})")
        ids = np.full((n, width), self.pad_id, dtype=np.int64)
        flags = np.zeros((n, width), dtype=np.int8)
        mask = np.zeros((n, width), dtype=bool)
        for i, (row_ids, row_flags) in enumerate(zip(self.ids, self.flags)):
            k = len(row_ids)
            ids[i, :k] = row_ids
            flags[i, :k] = row_flags
            mask[i, :k] = True
        return ids, flags, mask


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------
def _format_offenders(problems: list[tuple[int, Any, str]]) -> str:
    lines = [f"  [{pos}] {short_repr(value)}: {why}" for pos, value, why in problems[:_MAX_REPORTED]]
    if len(problems) > _MAX_REPORTED:
        lines.append(f"  ... and {len(problems) - _MAX_REPORTED} more")
    return "\n".join(lines)


def invalid_smiles_error(problems: list[tuple[int, Any, str]], n_items: int) -> Exception:
    """What ``encode_batch(on_invalid="raise")`` raises for ``problems`` ((position, item, why))
    among ``n_items``: a ``TypeError`` where an item is no string, else a ``ValueError``."""
    exc_type = TypeError if any(not isinstance(item, str) for _, item, _ in problems) else ValueError
    hint = ("\n(an RDKit Mol: Chem.MolToSmiles(mol) gives its SMILES)"
            if any(type(item).__name__ == "Mol" for _, item, _ in problems) else "")
    return exc_type(f"{len(problems)} of {n_items} SMILES are invalid:\n" + _format_offenders(problems) + hint)


def _as_items(smiles_list: Iterable[Any]) -> list[Any]:
    """The package's one input coercion; an empty list is fine here (a loaded vocabulary)."""
    return check_smiles_input(smiles_list, "smiles_list", ensure_min_samples=0)


#: DeepChem's 591-token SMILES vocabulary (the paper's, the benchmarks', every shipped encoder's),
#: shipped with the package: the estimators' default vocabulary.
DEEPCHEM_VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepchem_smiles_vocab.txt")


class SmilesTokenizer:
    """Regex SMILES tokenizer with a BERT-style vocabulary and per-token conjugation flags.

    Parameters
    ----------
    vocab_file : path, optional
        One token per line; the line number is the id (DeepChem's ``vocab.txt`` layout). It must
        contain ``[PAD] [UNK] [CLS] [SEP] [MASK]``. Without a file the vocabulary is learnt by
        :meth:`fit`: special tokens get ids 0..4, then the training tokens in sorted order.

    Attributes
    ----------
    vocabulary_ : dict of str to int
        Token -> id (from ``vocab_file``, or set by :meth:`fit`).
    ids_to_tokens_ : dict of int to str
        Id -> token.
    pad_id, unk_id, cls_id, sep_id, mask_id : int
        The special tokens' ids. ``vocab_size`` (a property) is the number of ids.
    """

    def __init__(self, vocab_file: str | os.PathLike[str] | None = None) -> None:
        self.vocab_file = None if vocab_file is None else os.fspath(vocab_file)
        if self.vocab_file is not None:
            self._load_vocab(self.vocab_file)

    # -- vocabulary ------------------------------------------------------------------------
    def _load_vocab(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as fh:
                # As transformers' load_vocab: the id is the line index. Unlike it, "\r" is stripped too
                # (a file saved on Windows), a trailing blank line is tolerated and a repeated token
                # is an error (there the later line would silently win).
                tokens = [line.rstrip("\r\n") for line in fh]
        except UnicodeDecodeError as exc:  # (a binary file given by mistake: the error named no file)
            raise ValueError(f"vocab file {path!r} is not UTF-8 text ({exc.reason} at byte {exc.start}): give a "
                             "vocabulary file, one token a line") from exc
        if tokens and tokens[-1] == "":  # tolerate a trailing blank line
            tokens.pop()
        vocab: dict[str, int] = {}
        for i, tok in enumerate(tokens):
            if tok in vocab:
                raise ValueError(f"vocab file {path!r}: token {tok!r} appears twice (lines {vocab[tok] + 1}, {i + 1})")
            vocab[tok] = i
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ValueError(f"vocab file {path!r} lacks special tokens {missing}")
        self._set_vocab(vocab)

    def _set_vocab(self, vocab: dict[str, int]) -> None:
        self.vocabulary_ = vocab
        self.pad_id = vocab[PAD_TOKEN]
        self.unk_id = vocab[UNK_TOKEN]
        self.cls_id = vocab[CLS_TOKEN]
        self.sep_id = vocab[SEP_TOKEN]
        self.mask_id = vocab[MASK_TOKEN]
        self.ids_to_tokens_ = {i: t for t, i in vocab.items()}
        # Specials and [unusedN] are dropped by decode().
        self._special_ids = frozenset(i for t, i in vocab.items() if t in SPECIAL_TOKENS or _UNUSED_RE.fullmatch(t))

    def fit(self, smiles_list: Iterable[str], y: Any = None, on_invalid: str = "raise") -> SmilesTokenizer:
        """Learn the vocabulary from ``smiles_list`` (or just load ``vocab_file``). Returns self.

        ``on_invalid="ignore"`` learns from the items that tokenize and skips the rest, for callers
        that report every invalid item (RDKit failures included) in one later ``encode_batch``.
        """
        if on_invalid not in ("raise", "ignore"):
            raise ValueError(f"on_invalid must be 'raise' or 'ignore', got {on_invalid!r}")
        if self.vocab_file is not None:
            self._load_vocab(self.vocab_file)
            return self
        items = _as_items(smiles_list)
        seen: set[str] = set()
        problems: list[tuple[int, Any, str]] = []
        for pos, smi in enumerate(items):
            if not isinstance(smi, str):
                problems.append((pos, smi, f"not a string ({type(smi).__name__})"))
                continue
            try:
                seen.update(tokenize_smiles(smi))
            except ValueError as exc:
                problems.append((pos, smi, str(exc)))
        if problems and on_invalid == "raise":
            exc_type = TypeError if any(not isinstance(v, str) for _, v, _ in problems) else ValueError
            raise exc_type(f"fit: {len(problems)} of {len(items)} items are not usable SMILES:\n" + _format_offenders(problems))
        # Sorted => the same training set always gives the same ids, whatever its order.
        vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
        for tok in sorted(seen - set(SPECIAL_TOKENS)):
            vocab[tok] = len(vocab)
        self._set_vocab(vocab)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "vocabulary_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("SmilesTokenizer has no vocabulary: pass vocab_file or call fit(smiles_list) first")

    def vocabulary_digest(self) -> str:
        """SHA-256 (hex) of the tokens in id order: what identifies the vocabulary in caches and
        training snapshots, which store a path only and must notice the file rewritten."""
        self._check_fitted()
        items = sorted(self.vocabulary_.items(), key=lambda kv: kv[1])
        return hashlib.sha256("\n".join(tok for tok, _ in items).encode()).hexdigest()

    @property
    def vocab_size(self) -> int:
        """Number of embedding rows needed (max id + 1)."""
        self._check_fitted()
        return max(self.vocabulary_.values()) + 1

    # -- encoding --------------------------------------------------------------------------
    def _ids(self, tokens: Sequence[str]) -> list[int]:
        get, unk = self.vocabulary_.get, self.unk_id
        return [self.cls_id, *(get(t, unk) for t in tokens), self.sep_id]

    @staticmethod
    def _check_str(smiles: Any) -> str:
        if not isinstance(smiles, str):
            raise TypeError(f"SMILES must be a str, got {type(smiles).__name__}: {short_repr(smiles)}")
        if not smiles.strip():  # as the batch path: blank is empty
            raise ValueError("empty SMILES string")
        return smiles

    def encode(self, smiles: str) -> list[int]:
        """``[CLS] + tokens + [SEP]`` ids; unseen tokens map to ``[UNK]``.

        Pure tokenisation (no RDKit check), identical to DeepChem's ``encode`` for DeepChem's
        vocabulary as long as the SMILES has at most 510 tokens (DeepChem truncates).
        """
        self._check_fitted()
        return self._ids(tokenize_smiles(self._check_str(smiles)))

    def encode_with_flags(self, smiles: str) -> tuple[np.ndarray, np.ndarray]:
        """``(ids int64, flags int8)``, both ``n_tokens + 2`` long; flags are 0 at CLS/SEP."""
        self._check_fitted()
        tokens = tokenize_smiles(self._check_str(smiles))
        flags = conjugation_flags(smiles, tokens)
        return np.asarray(self._ids(tokens), dtype=np.int64), np.pad(flags, 1)

    def _encode_one(self, smiles: str) -> tuple[np.ndarray, np.ndarray] | str:
        """Encoded arrays, or the reason the SMILES is invalid (no exceptions: batch path)."""
        smiles = smiles.strip()
        if not smiles:
            return "empty string"
        tokens, problem = _tokens_or_problem(smiles)  # (whitespace inside it, characters outside the regex)
        if problem is not None:
            return problem
        mol = _parse(smiles)
        if mol is None:
            return _parse_error(smiles)
        try:
            flags = _flags_from_mol(mol, tokens, smiles)
        except ValueError as exc:
            return str(exc)
        return np.asarray(self._ids(tokens), dtype=np.int64), np.pad(flags, 1)

    def encode_batch(
        self,
        smiles_list: Iterable[Any],
        max_length: int | None = None,
        on_invalid: Literal["raise", "mask"] = "raise",
    ) -> EncodedBatch:
        """Encode many SMILES, each distinct string once.

        Parameters
        ----------
        smiles_list : iterable of str
            The SMILES; repeated strings are tokenised and parsed once.
        max_length : int, optional
            Maximum sequence length *including* ``[CLS]``/``[SEP]``; longer items are invalid.
        on_invalid : {"raise", "mask"}, default="raise"
            ``"raise"``: one error listing every offending item by position (``TypeError`` if any
            item is not a string, else ``ValueError``). ``"mask"``: offenders (non-strings
            included) get ``valid=False``, ids ``[CLS], [SEP]`` and a reason in ``errors``.
        """
        self._check_fitted()
        if on_invalid not in ("raise", "mask"):
            raise ValueError(f"on_invalid must be 'raise' or 'mask', got {on_invalid!r}")
        if max_length is not None:
            if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) or max_length < 2:
                raise ValueError(f"max_length must be an int >= 2 (it counts [CLS] and [SEP]), got {max_length!r}")
            max_length = int(max_length)

        items = _as_items(smiles_list)
        cache: dict[str, tuple[np.ndarray, np.ndarray] | str] = {}
        ids: list[np.ndarray] = []
        flags: list[np.ndarray] = []
        valid = np.ones(len(items), dtype=bool)
        problems: list[tuple[int, Any, str]] = []
        empty_ids = np.array([self.cls_id, self.sep_id], dtype=np.int64)
        empty_flags = np.zeros(2, dtype=np.int8)

        for pos, smi in enumerate(items):
            if isinstance(smi, str):
                res = cache.get(smi)
                if res is None:
                    res = cache[smi] = self._encode_one(smi)
                if not isinstance(res, str) and max_length is not None and len(res[0]) > max_length:
                    res = f"{len(res[0])} tokens incl. [CLS]/[SEP] > max_length={max_length}"
            else:
                res = f"not a string ({type(smi).__name__})"
            if isinstance(res, str):
                problems.append((pos, smi, res))
                valid[pos] = False
                ids.append(empty_ids.copy())
                flags.append(empty_flags.copy())
            else:
                # Copies so that duplicates never share (mutable) arrays.
                ids.append(res[0].copy())
                flags.append(res[1].copy())

        if problems and on_invalid == "raise":
            raise invalid_smiles_error(problems, len(items))
        lengths = np.fromiter((len(a) for a in ids), dtype=np.int64, count=len(ids))
        return EncodedBatch(
            ids=ids,
            flags=flags,
            lengths=lengths,
            valid=valid,
            pad_id=self.pad_id,
            errors={pos: why for pos, _, why in problems},
        )

    # -- decoding --------------------------------------------------------------------------
    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Join the tokens of ``ids``. Drops [PAD]/[CLS]/[SEP]/[MASK]/[unusedN] by default;
        ``[UNK]`` is kept so a lossy round trip stays visible (and fails to parse)."""
        self._check_fitted()
        out: list[str] = []
        for i in ids:
            i = int(i)
            tok = self.ids_to_tokens_.get(i)
            if tok is None:
                raise ValueError(f"id {i} is not in the vocabulary (size {self.vocab_size})")
            if skip_special_tokens and i in self._special_ids and i != self.unk_id:
                continue
            out.append(tok)
        return "".join(out)

    def __repr__(self) -> str:
        size = len(self.vocabulary_) if hasattr(self, "vocabulary_") else "unfitted"
        return f"SmilesTokenizer(vocab_file={self.vocab_file!r}, vocab={size})"
