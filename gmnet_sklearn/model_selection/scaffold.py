"""Bemis-Murcko scaffold splits that reproduce DeepChem 2.8.0's ``ScaffoldSplitter``.

The protocol (docs/protocol.md, "chemberta3-faithful"):

1. drop the SMILES RDKit cannot parse (DeepChem's ``CSVLoader`` drops the rows whose
   featurization failed before the split; ``dataset.ids`` are the SMILES strings);
2. group the remaining molecules by Murcko scaffold (``MurckoScaffoldSmiles(mol=...,
   includeChirality=False)``, exactly DeepChem's ``_generate_scaffold``);
3. sort the groups by ``(size, first index)`` in *descending* order (so among groups of
   equal size the one that appears *later* in the file comes first);
4. each group in that order goes to train if train stays ``<= frac_train * n``, else to valid
   if train + valid stays ``<= (frac_train + frac_valid) * n``, else to test (every group is
   tried: a small one after a refused large one can still go to train);
5. **then** drop the SMILES longer than 200 characters from each of the three parts.

Indices are returned into the *original* input (unparsable rows included), in DeepChem's
order: the scaffold groups in the order they were assigned, indices ascending within a
group. ``DiskDataset.select`` keeps that order, so ``X[train_idx]`` is row for row the
``train`` dataset DeepChem's molnet loaders return.
"""

from __future__ import annotations

import functools
import numbers
import warnings
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
from sklearn.model_selection import BaseCrossValidator
from sklearn.utils import check_random_state
from sklearn.utils.validation import _num_samples
# Requests `groups` when metadata routing is enabled.
from sklearn.model_selection._split import GroupsConsumerMixin as _GroupsConsumer

from ..utils.messages import short_repr, shown_rows
from ..utils.validation import check_smiles_input, is_missing

__all__ = [
    "MAX_SMILES_LENGTH",
    "balanced_scaffold_split",
    "murcko_scaffold",
    "scaffold_groups",
    "scaffold_split",
    "ScaffoldSplit",
    "ScaffoldKFold",
]

#: Default maximum SMILES length kept after the split (the chemberta3 protocol).
MAX_SMILES_LENGTH = 200
#: What the CV splitters do with SMILES RDKit cannot parse.
ON_INVALID = ("raise", "skip")


# ----------------------------------------------------------------------------------------
# Scaffolds
# ----------------------------------------------------------------------------------------
def _rdkit():
    from rdkit import Chem
    from rdkit.Chem.Scaffolds.MurckoScaffold import MurckoScaffoldSmiles

    return Chem, MurckoScaffoldSmiles


class _QuietRDKit:
    """Silence RDKit's parse errors while computing many scaffolds."""

    def __enter__(self):
        try:
            from rdkit.rdBase import BlockLogs

            self._block = BlockLogs()
        except Exception:  # pragma: no cover - very old RDKit
            self._block = None
        return self

    def __exit__(self, *exc):
        self._block = None
        return False


# Marks a SMILES RDKit cannot parse (MurckoScaffoldSmiles itself may return None for a
# parsable molecule in some RDKit versions: DeepChem then keeps the row in the dataset,
# and so in the split's denominators, but in no part).
_UNPARSABLE = object()


@functools.lru_cache(maxsize=1 << 18)
def _scaffold_of_str(smiles: str, include_chirality: bool):
    Chem, MurckoScaffoldSmiles = _rdkit()
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return _UNPARSABLE
    return MurckoScaffoldSmiles(mol=mol, includeChirality=include_chirality)


def murcko_scaffold(smiles, include_chirality: bool = False) -> Optional[str]:
    """Bemis-Murcko scaffold SMILES of one molecule, as DeepChem 2.8.0 computes it.

    Same as ``deepchem.splits.splitters._generate_scaffold``:
    ``MurckoScaffoldSmiles(mol=Chem.MolFromSmiles(smiles), includeChirality=False)``.
    Acyclic molecules have the empty scaffold ``""``.

    Parameters
    ----------
    smiles : str or rdkit.Chem.Mol
        The molecule.
    include_chirality : bool, default False
        Passed to ``MurckoScaffoldSmiles`` (DeepChem uses False).

    Returns
    -------
    str or None
        The scaffold SMILES, or None when RDKit cannot parse ``smiles`` or it is a missing
        value (None, NaN from an empty CSV cell, ``pd.NA``). Results for strings are cached.

    Raises
    ------
    TypeError
        For anything else (a number, bytes, ...): it is no molecule.
    """
    if isinstance(smiles, str):
        with _QuietRDKit():
            sc = _scaffold_of_str(smiles, bool(include_chirality))
        return None if sc is _UNPARSABLE else sc
    if smiles is None or is_missing(smiles):
        return None
    Chem, MurckoScaffoldSmiles = _rdkit()
    if isinstance(smiles, Chem.Mol):
        return MurckoScaffoldSmiles(mol=smiles, includeChirality=bool(include_chirality))
    raise TypeError(f"expected a SMILES string or an RDKit Mol, got {type(smiles).__name__}")


def _scaffolds(smiles: np.ndarray, include_chirality: bool = False, strict: bool = True) -> list:
    """Scaffold per molecule; ``_UNPARSABLE`` where RDKit cannot parse the SMILES (and, unless
    ``strict``, where the item is no molecule at all: a caller whose own check names it later)."""
    with _QuietRDKit():
        out = []
        for i, s in enumerate(smiles):
            if isinstance(s, str):
                out.append(_scaffold_of_str(s, include_chirality))
            else:
                try:
                    sc = murcko_scaffold(s, include_chirality)
                except TypeError as exc:
                    if not strict:
                        out.append(_UNPARSABLE)
                        continue
                    raise TypeError(f"row {i} ({s!r}): {exc}") from None
                out.append(_UNPARSABLE if sc is None else sc)
        return out


def _splitter_scaffolds(smiles: np.ndarray) -> list:
    """:func:`_scaffolds` with the package's own test of a SMILES (``mol_from_smiles``), as the
    estimators, tokenizer and featurisers apply it: a blank SMILES, or one with whitespace inside
    (RDKit's default reads ``"CC O"`` as ethane named "O"), is unparsable here, so a CV splitter
    names it up front instead of each fold's fit failing on it. :func:`scaffold_split` keeps
    RDKit's default reading, as DeepChem's ScaffoldSplitter does."""
    from ..utils.validation import mol_from_smiles

    scaffolds = _scaffolds(smiles)
    with _QuietRDKit():
        for i, s in enumerate(smiles):
            if isinstance(s, str) and (not s.strip() or any(c.isspace() for c in s)):
                scaffolds[i] = _UNPARSABLE if mol_from_smiles(s) is None else _scaffold_of_str(s.strip(), False)
    return scaffolds


# ----------------------------------------------------------------------------------------
# Input handling
# ----------------------------------------------------------------------------------------
def _as_smiles_array(X, smiles_column: str = "smiles", name: str = "smiles") -> np.ndarray:
    """1-D object array of SMILES (the package's one input coercion, empty input allowed)."""
    # (a frame's other columns are the features of the model the folds are for: read, not lost)
    return np.asarray(check_smiles_input(X, name, smiles_column=smiles_column, ensure_min_samples=0,
                                         warn_unread_columns=False), dtype=object)


def _check_fraction(name: str, v) -> None:
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise TypeError(f"{name} must be a real number in [0, 1], got {v!r}")
    # (a rounding error's worth below 0 is 0: 1 - 0.8 - 0.2 is -5.6e-17 in floating point)
    if not (-1e-12 <= float(v) <= 1.0):
        raise ValueError(f"{name} must be in [0, 1], got {v!r}")


def _check_fractions(frac_train, frac_valid, frac_test):
    for name, v in (("frac_train", frac_train), ("frac_valid", frac_valid), ("frac_test", frac_test)):
        _check_fraction(name, v)
    # DeepChem: np.testing.assert_almost_equal(frac_train + frac_valid + frac_test, 1.)
    if abs(frac_train + frac_valid + frac_test - 1.0) >= 1.5e-7:
        raise ValueError(
            "frac_train + frac_valid + frac_test must be 1, got "
            f"{frac_train} + {frac_valid} + {frac_test} = {frac_train + frac_valid + frac_test}"
        )


def _sorted_scaffold_sets(scaffolds: Sequence[Optional[str]]) -> List[List[int]]:
    """DeepChem's ``generate_scaffolds``: index lists per scaffold, sorted by
    (size, first index) descending; molecules without a scaffold are left out."""
    groups: dict = {}
    for i, sc in enumerate(scaffolds):
        if sc is not None and sc is not _UNPARSABLE:
            groups.setdefault(sc, []).append(i)
    # indices are appended in increasing order, so every list is already sorted
    return sorted(groups.values(), key=lambda g: (len(g), g[0]), reverse=True)


def scaffold_groups(smiles, include_chirality: bool = False) -> np.ndarray:
    """Integer scaffold label per molecule (``-1`` for unparsable SMILES, or no scaffold; an item
    that is no molecule, e.g. a number, raises ``TypeError`` naming its row).

    Labels number the scaffold groups in DeepChem's order (0 = largest group), so they
    can be passed as ``groups=`` to e.g. :class:`sklearn.model_selection.GroupKFold` (not to
    this module's splitters, whose ``groups=`` are SMILES). Keep the rows with ``labels >= 0``
    first: ``GroupKFold`` would take every ``-1`` row for one scaffold.
    """
    smiles = _as_smiles_array(smiles)
    labels = np.full(len(smiles), -1, dtype=np.int64)
    for k, group in enumerate(_sorted_scaffold_sets(_scaffolds(smiles, include_chirality))):
        labels[group] = k
    return labels


def _check_max_length(max_smiles_length) -> None:
    if max_smiles_length is None:
        return
    if not isinstance(max_smiles_length, numbers.Integral) or isinstance(max_smiles_length, bool):
        raise TypeError(f"max_smiles_length must be an int >= 0 or None, got {max_smiles_length!r}")
    if max_smiles_length < 0:
        raise ValueError(f"max_smiles_length must be >= 0 or None, got {max_smiles_length!r}")


def _within_length(item, max_len: int) -> bool:
    """The protocol's length cut on a SMILES string; an RDKit molecule (the scaffolds accept them
    too) is measured by its canonical SMILES. Anything else has no molecule and is not kept."""
    if isinstance(item, str):
        return len(item) <= max_len
    from rdkit import Chem

    if isinstance(item, Chem.Mol):
        return len(Chem.MolToSmiles(item)) <= max_len
    return False


def _length_filter(idx: Sequence[int], smiles: np.ndarray, max_len: Optional[int]) -> np.ndarray:
    idx = np.asarray(idx, dtype=np.int64)
    if max_len is None or idx.size == 0:
        return idx
    keep = np.fromiter((_within_length(smiles[i], max_len) for i in idx), dtype=bool, count=idx.size)
    return idx[keep]


# ----------------------------------------------------------------------------------------
# The split
# ----------------------------------------------------------------------------------------
def scaffold_split(
    smiles,
    frac_train: float = 0.8,
    frac_valid: float = 0.1,
    frac_test: float = 0.1,
    max_smiles_length: Optional[int] = MAX_SMILES_LENGTH,
    drop_invalid: bool = True,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Deterministic train / valid / test scaffold split, DeepChem 2.8.0 style.

    Parameters
    ----------
    smiles : sequence of str, pandas Series, (n, 1) array or DataFrame with a ``smiles`` column
        The molecules, in file order.
    frac_train, frac_valid, frac_test : float, default 0.8 / 0.1 / 0.1
        Must sum to 1 (as in DeepChem).
    max_smiles_length : int or None, default 200
        After the split, SMILES longer than this many characters are removed from each part
        (the chemberta3 protocol). None keeps everything.
    drop_invalid : bool, default True
        True (the protocol): unparsable SMILES are removed *before* the split, as
        DeepChem's ``CSVLoader`` does when featurization fails, so the 80 / 90 % cutoffs
        count parsable molecules only. False: they stay in the count (as with
        ``ScaffoldSplitter`` on a dataset whose ids include them, e.g. loaded with
        ``DummyFeaturizer``). Either way they appear in no part.

    Returns
    -------
    train_idx, valid_idx, test_idx : np.ndarray of int64
        Positions in the input ``smiles`` (unparsable rows included in the numbering), in
        DeepChem's order (see the module docstring).

    Warns
    -----
    InvalidSmilesWarning
        Naming the rows in no part (unparsable, without a scaffold, or past the length cut):
        the protocol leaves them out, and a caller indexing ``X[train_idx]`` should know.
    """
    _check_fractions(frac_train, frac_valid, frac_test)
    _check_max_length(max_smiles_length)
    smiles = _as_smiles_array(smiles)
    scaffolds = _scaffolds(smiles)
    parts = _deepchem_split(smiles, scaffolds, frac_train, frac_valid, max_smiles_length, drop_invalid)
    _warn_left_out(smiles, scaffolds, parts, max_smiles_length)
    return parts


def _warn_left_out(smiles: np.ndarray, scaffolds: list, parts, max_smiles_length) -> None:
    from ..exceptions import InvalidSmilesWarning

    placed = np.zeros(len(smiles), dtype=bool)
    for idx in parts:
        placed[idx] = True
    if placed.all():
        return
    unparsable = [i for i, sc in enumerate(scaffolds) if sc is _UNPARSABLE]
    no_scaffold = [i for i, sc in enumerate(scaffolds) if sc is None]
    too_long = [i for i in np.flatnonzero(~placed) if scaffolds[i] is not _UNPARSABLE and scaffolds[i] is not None]
    said = [f"{len(rows)} {what} (rows {shown_rows(rows)})" for rows, what in
            ((unparsable, "RDKit cannot parse"), (no_scaffold, "without a Murcko scaffold"),
             (too_long, f"longer than max_smiles_length={max_smiles_length}")) if rows]
    warnings.warn(f"scaffold_split: {int((~placed).sum())} of {len(smiles)} SMILES are in no part, as the "
                  f"protocol leaves them out: {'; '.join(said)}", InvalidSmilesWarning, stacklevel=3)




def _deepchem_split(smiles: np.ndarray, scaffolds: list, frac_train: float, frac_valid: float,
                    max_smiles_length: Optional[int], drop_invalid: bool) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`scaffold_split` on checked input and its scaffolds, without the warning (for the
    callers that report or re-place the rows left out themselves)."""
    n_total = sum(sc is not _UNPARSABLE for sc in scaffolds) if drop_invalid else len(smiles)
    # Positions into the parsable subset map monotonically onto original positions, so
    # sorting by (size, first original index) gives DeepChem's order on the subset.
    scaffold_sets = _sorted_scaffold_sets(scaffolds)

    # --- deepchem.splits.ScaffoldSplitter.split, verbatim arithmetic ---
    train_cutoff = frac_train * n_total
    valid_cutoff = (frac_train + frac_valid) * n_total
    train_inds: List[int] = []
    valid_inds: List[int] = []
    test_inds: List[int] = []
    for scaffold_set in scaffold_sets:
        if len(train_inds) + len(scaffold_set) > train_cutoff:
            if len(train_inds) + len(valid_inds) + len(scaffold_set) > valid_cutoff:
                test_inds += scaffold_set
            else:
                valid_inds += scaffold_set
        else:
            train_inds += scaffold_set

    return (
        _length_filter(train_inds, smiles, max_smiles_length),
        _length_filter(valid_inds, smiles, max_smiles_length),
        _length_filter(test_inds, smiles, max_smiles_length),
    )


def balanced_scaffold_split(smiles, frac_valid: float = 0.1, random_state=0) -> Tuple[np.ndarray, np.ndarray]:
    """Train / valid scaffold split in the manner of Chemprop's ``scaffold_balanced``: scaffold
    sets larger than half the validation size go to train (largest first, where Chemprop shuffles
    them too; while the training part has room: one past it goes to validation where it fits), the
    other sets are shuffled (``random_state``: an int, a ``RandomState`` or None, scikit-learn's
    meaning) and fill the validation part first. DeepChem's order (smallest sets last) can give
    a validation part of rare scaffolds that all share one label; the shuffled small sets rarely
    do. Unparsable SMILES (RDKit's, and a blank SMILES or one with whitespace inside, which the
    estimators refuse) are in neither part, with an ``InvalidSmilesWarning`` naming them.
    Returns sorted positions in ``smiles``."""
    return _balanced_scaffold_split(smiles, frac_valid, random_state, warn=True)


def _balanced_scaffold_split(smiles, frac_valid, random_state, warn: bool) -> Tuple[np.ndarray, np.ndarray]:
    """``balanced_scaffold_split``; ``warn=False``: the estimators' internal split, whose rows are
    checked already and whose own messages say what becomes of them."""
    from ..exceptions import InvalidSmilesWarning

    _check_fraction("frac_valid", frac_valid)
    if not 0.0 < frac_valid < 1.0:
        raise ValueError(f"frac_valid must be in (0, 1), got {frac_valid!r}")
    smiles = _as_smiles_array(smiles)
    # the package's reading of a SMILES (blank or with whitespace inside: unparsable), as the CV
    # splitters': RDKit's default put "" and "CC O" in training as molecules (a review)
    scaffolds = _splitter_scaffolds(smiles) if warn else _scaffolds(smiles)
    left_out = [i for i, sc in enumerate(scaffolds) if sc is _UNPARSABLE or sc is None]
    if left_out and warn:
        from ..utils.stacklevel import _caller_stacklevel

        warnings.warn(f"balanced_scaffold_split: {len(left_out)} of {len(smiles)} SMILES RDKit cannot parse (blank "
                      f"ones and ones with whitespace inside too, or without a Murcko scaffold) are in neither part "
                      f"(rows {shown_rows(left_out)})",
                      InvalidSmilesWarning, stacklevel=_caller_stacklevel())
    sets = _sorted_scaffold_sets(scaffolds)
    n_total = sum(len(s) for s in sets)
    n_valid = int(round(frac_valid * n_total))
    if n_valid == 0:
        raise ValueError(f"frac_valid={frac_valid} of {n_total} parsable SMILES is no molecule: the validation "
                         "part would be empty")
    big = [s for s in sets if len(s) > n_valid / 2]
    small = [s for s in sets if len(s) <= n_valid / 2]
    check_random_state(random_state).shuffle(small)
    train: List[int] = []
    valid: List[int] = []
    for scaffold_set in big:  # (only when the big sets alone overfill training does one go to valid)
        to_valid = len(train) + len(scaffold_set) > n_total - n_valid and len(valid) + len(scaffold_set) <= n_valid
        (valid if to_valid else train).extend(scaffold_set)
    for scaffold_set in small:
        (valid if len(valid) + len(scaffold_set) <= n_valid else train).extend(scaffold_set)
    if not valid:  # every set larger than half the validation part, none fitting it
        raise ValueError(f"no scaffold set fits a validation part of {n_valid} molecules (set sizes "
                         f"{sorted((len(s) for s in sets), reverse=True)[:10]}): the validation part would be empty")
    return np.sort(np.asarray(train, dtype=np.int64)), np.sort(np.asarray(valid, dtype=np.int64))


# ----------------------------------------------------------------------------------------
# scikit-learn cross-validators
# ----------------------------------------------------------------------------------------
class _ParamsMixin:
    """get_params / set_params so the splitters can be cloned and grid-searched."""

    @classmethod
    def _param_names(cls):
        import inspect

        sig = inspect.signature(cls.__init__)
        return sorted(
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        )

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"Invalid parameter {key!r} for {type(self).__name__}")
            setattr(self, key, value)
        return self


_FEATURIZED_HINT = "For featurized X, pass the SMILES as `groups=` to split()."


def _smiles_from(X, groups, smiles_column, y=None):
    """SMILES come from ``groups`` when given (useful when X is a feature matrix),
    else from X; ``y``, when given, must have one row per SMILES (scikit-learn's splitters
    check it too: folds of X would index past a shorter y, or leave a longer one's tail out)."""
    smiles = _smiles_of(X, groups, smiles_column)
    if y is not None and _num_samples(y) != len(smiles):
        raise ValueError(f"y has {_num_samples(y)} rows for {len(smiles)} SMILES: one label row per SMILES")
    return smiles


def _smiles_of(X, groups, smiles_column):
    if groups is not None:
        smiles = _as_smiles_array(groups, smiles_column, name="groups")
        if X is not None and _num_samples(X) != len(smiles):  # GroupKFold's check: no row left in no fold
            raise ValueError(f"groups holds {len(smiles)} SMILES for {_num_samples(X)} rows of X: one per row")
        _refuse_numbers(smiles, "groups", "(integer group labels, such as scaffold_groups', are for "
                                          "GroupKFold; the scaffold splitters read SMILES)")
        return smiles
    try:
        smiles = _as_smiles_array(X, smiles_column, name="X")
    except ValueError as exc:
        raise ValueError(f"{exc}. {_FEATURIZED_HINT}") from None
    _refuse_numbers(smiles, "X", _FEATURIZED_HINT)
    return smiles


def _refuse_numbers(smiles: np.ndarray, name: str, hint: str) -> None:
    """A number is no molecule; reading it as an unparsable SMILES would suggest
    ``on_invalid="skip"``, which drops every row. Missing values (NaN) stay unparsable rows."""
    for i, s in enumerate(smiles):
        if isinstance(s, (numbers.Number, np.bool_)) and not is_missing(s):
            raise TypeError(f"{name} must hold SMILES strings; row {i} is {s!r}. {hint}")


def _check_parsable(splitter, smiles: np.ndarray, scaffolds: list) -> None:
    """The splitters' ``on_invalid``: "raise" names the rows RDKit cannot parse; "skip" leaves
    them in no fold, with an ``InvalidSmilesWarning`` naming them."""
    from ..exceptions import InvalidSmilesWarning

    if splitter.on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {ON_INVALID}, got {splitter.on_invalid!r}")
    name = type(splitter).__name__
    no_scaffold = [i for i, sc in enumerate(scaffolds) if sc is None]
    if no_scaffold:  # parsable, but RDKit made no scaffold (some versions): DeepChem leaves them out
        warnings.warn(f"{name}: {len(no_scaffold)} of {len(smiles)} SMILES have no Murcko scaffold and are in no "
                      f"fold (rows {shown_rows(no_scaffold)})", InvalidSmilesWarning, stacklevel=3)
    bad = [i for i, sc in enumerate(scaffolds) if sc is _UNPARSABLE]
    if not bad:
        return
    shown = shown_rows(bad, lambda i: f"({short_repr(smiles[i])})")
    if splitter.on_invalid == "raise":
        raise ValueError(f"{name}: RDKit cannot parse {len(bad)} of {len(smiles)} SMILES, at rows {shown}; "
                         "pass on_invalid='skip' to leave them out of every fold")
    warnings.warn(f"{name}(on_invalid='skip'): {len(bad)} of {len(smiles)} SMILES RDKit cannot parse are in "
                  f"no fold (rows {shown})", InvalidSmilesWarning, stacklevel=3)


def _warn_length_cut(splitter, smiles: np.ndarray, scaffolds: list) -> None:
    """The length cut is DeepChem's and deliberate, but rows it leaves out of every fold are
    named (an ``InvalidSmilesWarning``), as unparsable ones are."""
    from ..exceptions import InvalidSmilesWarning

    if splitter.max_smiles_length is None:
        return
    cut = [i for i, (s, sc) in enumerate(zip(smiles, scaffolds))
           if sc is not _UNPARSABLE and not _within_length(s, splitter.max_smiles_length)]
    if cut:
        warnings.warn(f"{type(splitter).__name__}: {len(cut)} of {len(smiles)} SMILES are longer than "
                      f"max_smiles_length={splitter.max_smiles_length} and in no fold (rows {shown_rows(cut)}; "
                      "max_smiles_length=None keeps them)", InvalidSmilesWarning, stacklevel=3)


class ScaffoldSplit(_ParamsMixin, _GroupsConsumer, BaseCrossValidator):
    """One deterministic scaffold fold, usable as ``cv=`` anywhere in scikit-learn.

    Yields a single ``(train, eval)`` pair from :func:`scaffold_split`: ``part="test"``
    gives (train, test), ``part="valid"`` gives (train, valid).

    The SMILES are read from ``X`` (a sequence of SMILES, an (n, 1) array, or a DataFrame
    with a ``smiles`` column). If ``X`` is already featurized, pass the SMILES as
    ``groups`` (e.g. ``cross_val_score(est, X_fp, y, groups=smiles, cv=ScaffoldSplit())``).

    Parameters
    ----------
    part : {"test", "valid"}, default "test"
        Which held-out part to evaluate on.
    frac_train, frac_valid : float, default 0.8 / 0.1
        ``frac_test = 1 - frac_train - frac_valid``.
    max_smiles_length : int or None, default 200
        SMILES longer than this are dropped from both sides after the split.
    drop_invalid : bool, default True
        See :func:`scaffold_split` (with ``on_invalid="skip"``).
    smiles_column : str, default "smiles"
        Column read when X is a DataFrame.
    on_invalid : {"raise", "skip"}, default "raise"
        SMILES RDKit cannot parse: "raise" names their rows; "skip" leaves them in neither part
        (DeepChem's protocol, as :func:`scaffold_split`), with a warning naming them.
    """

    def __init__(
        self,
        part: str = "test",
        frac_train: float = 0.8,
        frac_valid: float = 0.1,
        max_smiles_length: Optional[int] = MAX_SMILES_LENGTH,
        drop_invalid: bool = True,
        smiles_column: str = "smiles",
        on_invalid: str = "raise",
    ):
        self.part = part
        self.frac_train = frac_train
        self.frac_valid = frac_valid
        self.max_smiles_length = max_smiles_length
        self.drop_invalid = drop_invalid
        self.smiles_column = smiles_column
        self.on_invalid = on_invalid

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        return 1

    def split(self, X, y=None, groups=None) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        if self.part not in ("test", "valid"):
            raise ValueError(f"part must be 'test' or 'valid', got {self.part!r}")
        _check_fraction("frac_train", self.frac_train)
        _check_fraction("frac_valid", self.frac_valid)
        if self.frac_train + self.frac_valid > 1.0 + 1.5e-7:
            raise ValueError(f"frac_train + frac_valid must be at most 1, got {self.frac_train} + "
                             f"{self.frac_valid} = {self.frac_train + self.frac_valid}")
        _check_max_length(self.max_smiles_length)
        smiles = _smiles_from(X, groups, self.smiles_column, y)
        scaffolds = _splitter_scaffolds(smiles)
        _check_parsable(self, smiles, scaffolds)
        _warn_length_cut(self, smiles, scaffolds)
        train, valid, test = _deepchem_split(smiles, scaffolds, self.frac_train, self.frac_valid,
                                             self.max_smiles_length, self.drop_invalid)
        held_out = test if self.part == "test" else valid
        for part, rows in (("train", train), (self.part, held_out)):
            if len(rows) == 0:  # scikit-learn's splitters refuse an empty side too
                raise ValueError(
                    f"the {part} part of the scaffold split is empty ({len(smiles)} molecules, "
                    f"frac_train={self.frac_train}, frac_valid={self.frac_valid}): use more "
                    "molecules or other fractions"
                )
        yield train, held_out


class ScaffoldKFold(_ParamsMixin, _GroupsConsumer, BaseCrossValidator):
    """K-fold cross-validation with whole scaffold groups per fold (GroupKFold on scaffolds).

    Scaffold groups are taken largest first (DeepChem's order) and each is put into the
    fold that currently holds the fewest molecules (lowest fold number on ties), so folds
    are balanced in size and deterministic. Unparsable SMILES raise (``on_invalid="skip"``:
    in no fold); with ``max_smiles_length`` set, SMILES longer than it are dropped from both
    sides of every fold.

    Parameters
    ----------
    n_splits : int, default 5
        Number of folds.
    max_smiles_length : int or None, default None
        SMILES longer than this (characters) are in no fold, with a warning naming them (200 is
        DeepChem's cut, as :func:`scaffold_split` and :class:`ScaffoldSplit` apply it). None, the
        default, keeps every row: the folds are a partition, as ``cross_val_predict`` needs.
    smiles_column : str, default "smiles"
        The SMILES column when X (or ``groups``) is a DataFrame.
    on_invalid : {"raise", "skip"}, default "raise"
        SMILES RDKit cannot parse: "raise" names their rows; "skip" leaves them in no fold, with
        a warning naming them.
    """

    def __init__(
        self,
        n_splits: int = 5,
        max_smiles_length: Optional[int] = None,
        smiles_column: str = "smiles",
        on_invalid: str = "raise",
    ):
        self.n_splits = n_splits
        self.max_smiles_length = max_smiles_length
        self.smiles_column = smiles_column
        self.on_invalid = on_invalid

    def _checked_n_splits(self) -> int:
        # as KFold: an integer of at least 2 (a float would fold one way and count another)
        if not isinstance(self.n_splits, numbers.Integral) or isinstance(self.n_splits, bool) \
                or self.n_splits < 2:
            raise ValueError(f"n_splits must be an integer >= 2, got {self.n_splits!r}")
        return int(self.n_splits)

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        return self._checked_n_splits()

    def split(self, X, y=None, groups=None) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        n_splits = self._checked_n_splits()
        _check_max_length(self.max_smiles_length)
        smiles = _smiles_from(X, groups, self.smiles_column, y)
        scaffolds = _splitter_scaffolds(smiles)
        _check_parsable(self, smiles, scaffolds)
        _warn_length_cut(self, smiles, scaffolds)
        scaffold_sets = _sorted_scaffold_sets(scaffolds)
        if len(scaffold_sets) < n_splits:
            acyclic = " (acyclic molecules all share the empty scaffold '')" if "" in scaffolds else ""
            raise ValueError(f"cannot make {n_splits} folds from {len(scaffold_sets)} scaffold groups{acyclic}")
        fold_of = np.full(len(smiles), -1, dtype=np.int64)
        sizes = np.zeros(n_splits, dtype=np.int64)
        for group in scaffold_sets:
            k = int(np.argmin(sizes))
            fold_of[group] = k
            sizes[k] += len(group)
        if self.max_smiles_length is not None:
            too_long = np.fromiter(
                (not _within_length(s, self.max_smiles_length) for s in smiles),
                dtype=bool,
                count=len(smiles),
            )
            fold_of[too_long] = -1
        usable = fold_of >= 0
        emptied = [k for k in range(n_splits) if not (fold_of == k).any()]
        if emptied:  # every molecule of those folds is past the length cut
            raise ValueError(f"fold(s) {emptied} of {n_splits} have no molecule within max_smiles_length="
                             f"{self.max_smiles_length}: use fewer folds or a larger max_smiles_length")
        for k in range(n_splits):
            test = np.flatnonzero(fold_of == k)
            train = np.flatnonzero(usable & (fold_of != k))
            yield train.astype(np.int64), test.astype(np.int64)
