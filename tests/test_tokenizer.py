"""Tests for gmnet_sklearn.tokenizer (regex split, DeepChem-compatible ids, conjugation flags)."""

from __future__ import annotations

import csv
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from rdkit import Chem

from gmnet_sklearn.tokenizer import (
    SMILES_PATTERN,
    SMILES_REGEX,
    EncodedBatch,
    SmilesTokenizer,
    conjugation_flags,
    is_atom_token,
    tokenize_smiles,
)

REPO = Path(__file__).resolve().parents[1]
N_REAL = 250  # SMILES taken from each MoleculeNet file


@pytest.fixture(scope="module")
def vocab_file() -> Path:
    from .conftest import vocab_file as find_vocab_file  # the suite's one lookup

    path = find_vocab_file()
    if path is None:
        pytest.skip("DeepChem vocab file not found (set GMNET_TOKENIZER_VOCAB)")
    return path


@pytest.fixture(scope="module")
def tok(vocab_file: Path) -> SmilesTokenizer:
    return SmilesTokenizer(vocab_file)


@pytest.fixture(scope="module")
def real_smiles() -> list[str]:
    """Leading rows of ESOL and BBBP (stripped; DeepChem's loaders strip as well)."""
    from .conftest import moleculenet_dir

    out: list[str] = []
    for name in ("delaney-processed.csv", "BBBP.csv"):
        path = (moleculenet_dir() or Path("/nonexistent")) / name
        if not path.is_file():
            pytest.skip(f"{path} not found (set GMNET_DATA)")
        with open(path, newline="") as fh:
            rows = [r["smiles"].strip() for r in csv.DictReader(fh)]
        out += rows[:N_REAL]
    return out


@pytest.fixture(scope="module")
def valid_real_smiles(real_smiles: list[str]) -> list[str]:
    params = Chem.SmilesParserParams()
    params.removeHs = False
    return [s for s in real_smiles if Chem.MolFromSmiles(s, params) is not None]


@pytest.fixture(scope="module")
def deepchem_tok(vocab_file: Path):
    # slow import (~10 s): once per module; the tokenizer needs transformers too, which may be absent
    pytest.importorskip("deepchem.feat.smiles_tokenizer")
    from deepchem.feat.smiles_tokenizer import SmilesTokenizer as DCSmilesTokenizer

    return DCSmilesTokenizer(str(vocab_file))


def _rdkit_rule(smiles: str) -> list[int]:
    """Per-atom flag straight from RDKit: aromatic or in a conjugated bond."""
    params = Chem.SmilesParserParams()
    params.removeHs = False
    mol = Chem.MolFromSmiles(smiles, params)
    return [int(a.GetIsAromatic() or any(b.GetIsConjugated() for b in a.GetBonds())) for a in mol.GetAtoms()]


# ---------------------------------------------------------------------------------------------
# Regex split
# ---------------------------------------------------------------------------------------------
def test_regex_is_deepchems() -> None:
    assert SMILES_PATTERN.pattern == SMILES_REGEX
    assert SMILES_REGEX == (
        r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>>?|\*|\$|\%[0-9]{2}|[0-9])"
    )
    # and DeepChem's own constant, read from its source (importing DeepChem takes ~10 s)
    import ast
    import importlib.util

    spec = importlib.util.find_spec("deepchem")
    if spec is None:
        pytest.skip("DeepChem not installed: checked against the copied pattern only")
    source = Path(spec.origin).parent / "feat" / "smiles_tokenizer.py"
    found = [ast.literal_eval(node.value) for node in ast.walk(ast.parse(source.read_text()))
             if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SMI_REGEX_PATTERN" for t in node.targets)]
    assert found == [SMILES_REGEX]


@pytest.mark.parametrize(
    "smiles, tokens",
    [
        ("Clc1ccccc1Br", ["Cl", "c", "1", "c", "c", "c", "c", "c", "1", "Br"]),
        ("C%10CCCCC%10", ["C", "%10", "C", "C", "C", "C", "C", "%10"]),
        ("[NH4+].[Cl-]", ["[NH4+]", ".", "[Cl-]"]),
        ("F/C=C\\F", ["F", "/", "C", "=", "C", "\\", "F"]),
        ("N[C@@H](C)C(=O)O", ["N", "[C@@H]", "(", "C", ")", "C", "(", "=", "O", ")", "O"]),
        ("CB", ["C", "B"]),
    ],
)
def test_tokenize_examples(smiles: str, tokens: list[str]) -> None:
    assert tokenize_smiles(smiles) == tokens
    assert "".join(tokens) == smiles


@pytest.mark.parametrize("smiles, bad", [("CC O", "' ' at 2"), ("C|C", "'|' at 1"), ("C[C", "'[' at 1")])
def test_tokenize_rejects_unmatched_characters(smiles: str, bad: str) -> None:
    with pytest.raises(ValueError) as err:
        tokenize_smiles(smiles)
    assert repr(smiles) in str(err.value) and bad in str(err.value)


def test_is_atom_token() -> None:
    for t in ["C", "Cl", "Br", "B", "c", "n", "o", "s", "p", "b", "N", "O", "S", "P", "F", "I", "*", "[nH]", "[C@@H]", "[H]", "[O-]"]:
        assert is_atom_token(t), t
    for t in ["(", ")", "=", "#", "1", "%10", ".", "/", "\\", "@", "+", "-", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "[unused3]"]:
        assert not is_atom_token(t), t


# ---------------------------------------------------------------------------------------------
# Ids: DeepChem compatibility
# ---------------------------------------------------------------------------------------------
def test_manifest_reference_ids(tok: SmilesTokenizer) -> None:
    assert tok.encode("c1ccc(O)cc1") == [12, 15, 20, 15, 15, 15, 17, 19, 18, 15, 15, 20, 13]
    assert tok.encode("CC(=O)Nc1ccc(O)cc1") == [12, 16, 16, 17, 22, 19, 18, 23, 15, 20, 15, 15, 15, 17, 19, 18, 15, 15, 20, 13]
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 11, 12, 13, 14)
    assert tok.vocab_size == 591 == len(tok.vocabulary_)


def test_matches_deepchem_on_real_smiles(tok: SmilesTokenizer, deepchem_tok, real_smiles: list[str]) -> None:
    assert len(real_smiles) >= 2 * N_REAL - 10
    for smi in real_smiles:
        if len(tokenize_smiles(smi)) > 510:  # DeepChem truncates there; we do not
            continue
        assert tok.encode(smi) == deepchem_tok.encode(smi), smi
    # unknown bracket atom -> [UNK] in both
    assert tok.encode("[Xe]C[U]") == deepchem_tok.encode("[Xe]C[U]")


def test_encode_with_flags_shapes(tok: SmilesTokenizer) -> None:
    ids, flags = tok.encode_with_flags("c1ccc(O)cc1")
    assert ids.dtype == np.int64 and flags.dtype == np.int8
    assert ids.tolist() == tok.encode("c1ccc(O)cc1")
    assert len(flags) == len(ids) and flags[0] == flags[-1] == 0
    assert flags[1:-1].tolist() == conjugation_flags("c1ccc(O)cc1").tolist()


def test_decode_roundtrip(tok: SmilesTokenizer) -> None:
    smi = "CC(=O)Nc1ccc(O)cc1"
    assert tok.decode(tok.encode(smi)) == smi
    assert tok.decode([tok.pad_id, *tok.encode("CCO"), tok.pad_id]) == "CCO"


# ---------------------------------------------------------------------------------------------
# Fitted vocabulary (no file)
# ---------------------------------------------------------------------------------------------
def test_fitted_vocabulary_is_deterministic() -> None:
    train = ["CCO", "c1ccccc1Cl", "C[N+](=O)[O-]"]
    a = SmilesTokenizer().fit(train)
    b = SmilesTokenizer().fit(list(reversed(train)) + ["CCO"])
    assert a.vocabulary_ == b.vocabulary_
    assert list(a.vocabulary_)[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert (a.pad_id, a.unk_id, a.cls_id, a.sep_id, a.mask_id) == (0, 1, 2, 3, 4)
    learnt = list(a.vocabulary_)[5:]
    assert learnt == sorted(learnt) == sorted({t for s in train for t in tokenize_smiles(s)})
    assert a.vocab_size == 5 + len(learnt)
    # unseen tokens (Br, #) -> [UNK]
    ids = a.encode("CC#CBr")
    v = a.vocabulary_
    assert ids == [a.cls_id, v["C"], v["C"], a.unk_id, v["C"], a.unk_id, a.sep_id]


def test_unfitted_tokenizer_raises() -> None:
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        SmilesTokenizer().encode("CCO")


def test_fit_with_file_is_idempotent(vocab_file: Path) -> None:
    t = SmilesTokenizer(vocab_file)
    before = dict(t.vocabulary_)
    assert t.fit(["[Xe]"]) is t and t.fit(["CCO"]).vocabulary_ == before


def test_vocabulary_digest_identifies_the_vocabulary(vocab_file: Path, tmp_path: Path) -> None:
    from gmnet_sklearn.pretrain.cache import vocab_digest

    t = SmilesTokenizer(vocab_file)
    # The value caches, training snapshots and the shipped encoders' configs already hold: a
    # change of formula would make every one of them unusable.
    assert t.vocabulary_digest() == "717741d490ecdab63a0bd06ea51458ef0db5c4ae0a37d4abc4fc6437d0945d74"
    assert vocab_digest(t) == t.vocabulary_digest()[:16]
    lines = vocab_file.read_text(encoding="utf-8").splitlines()
    swapped = tmp_path / "vocab.txt"  # the same tokens, two ids exchanged
    swapped.write_text("\n".join(lines[:5] + [lines[6], lines[5]] + lines[7:]) + "\n", encoding="utf-8")
    assert SmilesTokenizer(swapped).vocabulary_digest() != t.vocabulary_digest()
    assert SmilesTokenizer().fit(["CCO"]).vocabulary_digest() == SmilesTokenizer().fit(["OCC"]).vocabulary_digest()


def test_fit_reports_bad_items() -> None:
    with pytest.raises(TypeError, match=r"\[1\] 3"):
        SmilesTokenizer().fit(["CCO", 3])
    with pytest.raises(ValueError, match=r"\[0\] 'C C'"):
        SmilesTokenizer().fit(["C C", "CCO"])


# ---------------------------------------------------------------------------------------------
# Conjugation flags
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "smiles, expected",
    [
        ("c1ccccc1", [1, 0, 1, 1, 1, 1, 1, 0]),
        ("CCO", [0, 0, 0]),
        ("C=CC=C", [1, 0, 1, 1, 0, 1]),  # butadiene: all four carbons conjugated
        ("C=CCC=C", [0, 0, 0, 0, 0, 0, 0]),  # isolated double bonds (sp3 in between)
        ("c1cc[nH]c1", [1, 0, 1, 1, 1, 1, 0]),  # pyrrole, bracket N with H
        ("[NH4+].[Cl-]", [0, 0, 0]),
        ("C%10CCCCC%10", [0, 0, 0, 0, 0, 0, 0, 0]),
        ("c1ccccc1%12.C%12", [1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]),  # %nn bond across a "." (toluene)
        ("Clc1ccccc1Br", [0, 1, 0, 1, 1, 1, 1, 1, 0, 0]),  # RDKit: C-halogen bonds not conjugated
        ("[H]C([H])([H])[H]", [0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ("F/C=C/F", [0, 0, 0, 0, 0, 0, 0]),
        ("C[N+](=O)[O-]", [0, 1, 0, 0, 1, 0, 1]),  # nitro N, O, O- conjugated, methyl not
        ("C=CC(=O)O", [1, 0, 1, 1, 0, 0, 1, 0, 1]),  # acrylic acid
        ("N[C@@H](C)C(=O)O", [0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1]),  # carboxyl conjugated only
    ],
)
def test_conjugation_flags_cases(smiles: str, expected: list[int]) -> None:
    tokens = tokenize_smiles(smiles)
    flags = conjugation_flags(smiles)
    assert flags.dtype == np.int8 and len(flags) == len(tokens)
    assert all(f == 0 for t, f in zip(tokens, flags) if not is_atom_token(t))
    assert [int(f) for t, f in zip(tokens, flags) if is_atom_token(t)] == _rdkit_rule(smiles)
    assert flags.tolist() == expected


def test_rdkit_conjugation_rule_assumptions() -> None:
    # The hand-written expectations above rest on these RDKit facts; fail loudly if RDKit changes.
    def conj(smi: str) -> list[bool]:
        return [b.GetIsConjugated() for b in Chem.MolFromSmiles(smi).GetBonds()]

    assert all(conj("C=CC=C")) and not any(conj("C=CCC=C"))
    assert not any(conj("C=C"))  # a lone double bond is not "conjugated"


def test_flags_given_tokens_and_errors() -> None:
    assert conjugation_flags("CC=O", tokenize_smiles("CC=O")).tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="C1CC"):
        conjugation_flags("C1CC")
    with pytest.raises(ValueError, match="atom tokens"):  # misaligned tokens supplied by caller
        conjugation_flags("CCO", ["C", "C"])


def test_conjugation_flags_of_blank_or_non_string_input_are_errors() -> None:
    # RDKit reads "" as a molecule without atoms: the tokenizer's errors, not empty flags
    for blank in ("", "   "):
        with pytest.raises(ValueError, match="empty SMILES string"):
            conjugation_flags(blank)
    with pytest.raises(TypeError, match="SMILES must be a str, got NoneType"):
        conjugation_flags(None)


def test_flags_match_rdkit_on_real_smiles(valid_real_smiles: list[str]) -> None:
    params = Chem.SmilesParserParams()
    params.removeHs = False
    assert len(valid_real_smiles) > 400
    for smi in valid_real_smiles:
        tokens = tokenize_smiles(smi)
        mol = Chem.MolFromSmiles(smi, params)
        atom_tokens = [t for t in tokens if is_atom_token(t)]
        assert len(atom_tokens) == mol.GetNumAtoms(), smi
        # Symbols agree position by position (alignment check, beyond the count).
        for t, atom in zip(atom_tokens, mol.GetAtoms()):
            sym = t.strip("[]").lstrip("0123456789")
            assert sym.lower().startswith(atom.GetSymbol().lower()) or t == "*", (smi, t, atom.GetSymbol())
        flags = conjugation_flags(smi, tokens)
        assert len(flags) == len(tokens)
        assert [int(f) for t, f in zip(tokens, flags) if is_atom_token(t)] == _rdkit_rule(smi), smi
        assert not any(f for t, f in zip(tokens, flags) if not is_atom_token(t))


# ---------------------------------------------------------------------------------------------
# Batch encoding and its errors
# ---------------------------------------------------------------------------------------------
def test_encode_batch_matches_single(tok: SmilesTokenizer, valid_real_smiles: list[str]) -> None:
    smiles = valid_real_smiles[:100] + valid_real_smiles[:20]  # duplicates hit the cache
    batch = tok.encode_batch(smiles)
    assert isinstance(batch, EncodedBatch) and len(batch) == len(smiles)
    assert batch.valid.all() and batch.valid.dtype == bool
    for smi, ids, flags, n in zip(smiles, batch.ids, batch.flags, batch.lengths):
        ref_ids, ref_flags = tok.encode_with_flags(smi)
        assert ids.dtype == np.int64 and flags.dtype == np.int8
        np.testing.assert_array_equal(ids, ref_ids)
        np.testing.assert_array_equal(flags, ref_flags)
        assert n == len(ids)
    assert batch.ids[100] is not batch.ids[0]  # duplicates do not share arrays
    ids2d, flags2d, mask = batch.padded()
    assert ids2d.shape == (len(smiles), batch.lengths.max())
    assert (ids2d[~mask] == tok.pad_id).all() and mask.sum() == batch.lengths.sum()


def test_encode_batch_errors_name_items(tok: SmilesTokenizer) -> None:
    with pytest.raises(ValueError) as err:
        tok.encode_batch(["CCO", "C1CC", "", "CCO", "c1ccccc1"], max_length=7)
    msg = str(err.value)
    assert "3 of 5" in msg
    assert "[1] 'C1CC'" in msg and "[2] ''" in msg and "empty" in msg
    assert "[4] 'c1ccccc1'" in msg and "max_length=7" in msg
    assert "[0]" not in msg and "[3]" not in msg

    with pytest.raises(TypeError, match=r"\[1\] None"):
        tok.encode_batch(["CCO", None, "C1CC"])
    with pytest.raises(ValueError, match=r"\[0\] 'C\(C\)\(C\)\(C\)\(C\)C'.*valence"):
        tok.encode_batch(["C(C)(C)(C)(C)C"])
    with pytest.raises(ValueError, match="and 5 more"):
        tok.encode_batch(["C1CC"] * 15)
    with pytest.raises(ValueError, match="on_invalid"):
        tok.encode_batch(["CCO"], on_invalid="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_length"):
        tok.encode_batch(["CCO"], max_length=1)
    with pytest.raises(TypeError, match="single string"):
        tok.encode_batch("CCO")


def test_encoded_batch_subset_keeps_each_rows_error(tok: SmilesTokenizer) -> None:
    batch = tok.encode_batch(["CCO", "C1CC", "c1ccccc1"], on_invalid="mask")
    sub = batch.subset([1, 1, -2, 0])  # repeated and negative positions
    assert sub.valid.tolist() == [False, False, False, True]
    assert set(sub.errors) == {0, 1, 2} and sub.errors[0] == batch.errors[1]
    assert list(sub.ids[3]) == list(batch.ids[0])
    with pytest.raises(TypeError, match="boolean mask"):
        batch.subset([True, False, True])
    for out_of_range in ([3], [-4]):
        with pytest.raises(IndexError, match="out of range for 3 items"):
            batch.subset(out_of_range)


def test_resolve_endpoints_takes_one_name_as_a_string() -> None:
    from gmnet_sklearn.datasets.endpoints import resolve_endpoints

    assert resolve_endpoints("bbbp") == resolve_endpoints(["bbbp"])


def test_encode_batch_mask(tok: SmilesTokenizer) -> None:
    items = ["CCO", "C1CC", "", 3.5, "c1ccccc1", "CC O"]
    batch = tok.encode_batch(items, max_length=8, on_invalid="mask")
    assert batch.valid.tolist() == [True, False, False, False, False, False]
    assert batch.lengths.tolist() == [5, 2, 2, 2, 2, 2]
    for i in range(1, len(items)):
        assert batch.ids[i].tolist() == [tok.cls_id, tok.sep_id]
        assert batch.flags[i].tolist() == [0, 0]
    assert set(batch.errors) == {1, 2, 3, 4, 5}
    assert "max_length" in batch.errors[4] and "' ' at 2" in batch.errors[5]


def test_single_encode_errors(tok: SmilesTokenizer) -> None:
    with pytest.raises(TypeError, match="must be a str, got NoneType"):
        tok.encode(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        tok.encode("")
    with pytest.raises(ValueError, match="not-a-smiles"):
        tok.encode("not-a-smiles")  # 't', 'a', 'm', 'i', 'e' are outside the regex
    with pytest.raises(ValueError, match="'C1CC'"):
        tok.encode_with_flags("C1CC")


def test_pickle_roundtrip(tok: SmilesTokenizer) -> None:
    fitted = SmilesTokenizer().fit(["CCO", "c1ccccc1"])
    for t in (tok, fitted):
        clone = pickle.loads(pickle.dumps(t))
        assert clone.vocabulary_ == t.vocabulary_ and clone.vocab_size == t.vocab_size
        assert clone.encode("CCOc1ccccc1") == t.encode("CCOc1ccccc1")
        a, b = clone.encode_with_flags("CCOc1ccccc1"), t.encode_with_flags("CCOc1ccccc1")
        np.testing.assert_array_equal(a[1], b[1])
    assert pickle.loads(pickle.dumps(SmilesTokenizer())).vocab_file is None


def test_surrounding_whitespace_is_ignored_inner_whitespace_is_an_error():
    from gmnet_sklearn.tokenizer import SmilesTokenizer, tokenize_smiles

    assert tokenize_smiles(" CCO  ") == ["C", "C", "O"]
    tok = SmilesTokenizer().fit(["CCO"])
    batch = tok.encode_batch(["CCO ", "\tCCO"])
    assert [list(a) for a in batch.ids] == [tok.encode("CCO")] * 2
    with pytest.raises(ValueError, match=r"whitespace ' ' at 2 inside it"):
        tokenize_smiles("CC O")
    with pytest.raises(ValueError, match=r"whitespace ' ' at 3 inside it"):  # (bracket atoms took it whole)
        tokenize_smiles("C[N H4+]")
    with pytest.raises(ValueError, match="inside it"):
        SmilesTokenizer().fit(["C[N\nH4+]"])
    with pytest.raises(ValueError, match="empty"):
        tok.encode_batch(["  "])


def test_blank_smiles_are_empty_on_every_path(tok: SmilesTokenizer) -> None:
    for call in (tok.encode, tok.encode_with_flags):
        with pytest.raises(ValueError, match="empty SMILES"):
            call("  ")
    assert tok.encode_batch(["  "], on_invalid="mask").errors == {0: "empty string"}


def test_the_batch_path_says_why_whitespace_is_no_smiles():
    """encode_batch gave "unmatched characters " (nothing listed) for "[N H4+]": the regex's
    bracket atom takes it whole; the single path's reason now reaches the batch's (a review)."""
    from gmnet_sklearn.tokenizer import SmilesTokenizer

    errors = SmilesTokenizer().fit(["CC"]).encode_batch(["[N H4+]", "C C", "CC"], on_invalid="mask").errors
    assert errors == {0: "whitespace ' ' at 2 inside it (a name or a CXSMILES extension after the SMILES?)",
                      1: "whitespace ' ' at 1 inside it (a name or a CXSMILES extension after the SMILES?)"}
