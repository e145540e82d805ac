"""RDKit 2D descriptors: the shared-intermediate loop against RDKit's own functions one by one,
and the worker-process path against the in-process one."""

import math

import numpy as np
import pytest
from rdkit import Chem, rdBase
from rdkit.Chem import Descriptors
from sklearn.base import clone

from gmnet_sklearn import descriptors as D
from gmnet_sklearn.descriptors import RDKitDescriptors, compute_descriptors

from ._smiles import SMILES

# charged, salt, metal, isotope, stereo and a lone atom: molecules where some descriptors fail or
# are not finite
ODD = ["[NH4+].[Cl-]", "[Na+].[O-]C(=O)C", "[Fe]", "[2H]OC", "C[C@H](N)C(=O)O", "[He]", "C", "c1ccccc1O"]


def _reference_row(smiles: str) -> np.ndarray:
    """The plain loop: every function of ``Descriptors._descList`` called as RDKit ships it."""
    mol = Chem.MolFromSmiles(smiles)
    row = []
    for _, f in Descriptors._descList:
        try:
            v = float(f(mol))
        except Exception:
            v = math.nan
        row.append(v if math.isfinite(v) else math.nan)
    return np.array(row)


def test_shared_intermediates_give_rdkits_values_bit_for_bit():
    smiles = list(SMILES) + ODD
    with rdBase.BlockLogs():
        expected = np.stack([_reference_row(s) for s in smiles])
    got = compute_descriptors(smiles)
    assert got.shape == (len(smiles), len(D.descriptor_names()))
    np.testing.assert_array_equal(got, expected)  # NaNs in the same places, every value identical


def test_worker_processes_give_the_same_rows_duplicates_and_invalid_rows_included(monkeypatch):
    smiles = list(SMILES) + ODD + ["C1CC", list(SMILES)[3], None, "CCO", "CCO"]
    serial = compute_descriptors(smiles, on_invalid="nan")
    monkeypatch.setattr(D, "PARALLEL_MIN_SMILES", 4)  # parallel even for this small set
    parallel = compute_descriptors(smiles, on_invalid="nan", n_jobs=2)
    np.testing.assert_array_equal(parallel, serial)
    bad = [len(SMILES) + len(ODD), len(SMILES) + len(ODD) + 2]
    assert np.isnan(parallel[bad]).all() and not np.isnan(parallel[len(SMILES) + len(ODD) + 1]).all()
    with pytest.raises(ValueError, match=rf"2 SMILES, e\.g\. at rows {bad[0]} \('C1CC'\), {bad[1]} \(None\)"):
        compute_descriptors(smiles, n_jobs=2)


def test_transformer_n_jobs_is_a_parameter_and_does_not_change_the_output(monkeypatch):
    monkeypatch.setattr(D, "PARALLEL_MIN_SMILES", 4)
    one = RDKitDescriptors().fit(SMILES)
    two = clone(RDKitDescriptors(n_jobs=2)).fit(SMILES)
    assert two.get_params()["n_jobs"] == 2
    np.testing.assert_array_equal(one.transform(SMILES), two.transform(SMILES))


def test_a_blank_smiles_is_invalid_not_a_molecule_without_atoms():
    """RDKit reads "" as an empty molecule; here it is a SMILES that names no molecule."""
    with pytest.raises(ValueError, match=r"rows 1 \(''\), 2 \(' '\)"):
        compute_descriptors(["CCO", "", " "])
    rows = compute_descriptors(["CCO", ""], on_invalid="nan")
    assert np.isnan(rows[1]).all() and not np.isnan(rows[0]).all()


def test_on_invalid_nan_names_the_rows_and_compute_descriptors_checks_it():
    from gmnet_sklearn.exceptions import InvalidSmilesWarning

    with pytest.warns(InvalidSmilesWarning, match=r"1 of 5 SMILES .* rows 4 \('C1CC'\)") as caught:
        fitted = RDKitDescriptors(on_invalid="nan").fit(SMILES[:4] + ["C1CC"])
    assert caught[0].filename == __file__  # the caller's line (found in review: it was the library's)
    with pytest.warns(InvalidSmilesWarning, match=r"2 of 3 SMILES .* rows 1 \('C1CC'\), 2 \(None\)") as caught:
        z = fitted.transform(["CCO", "C1CC", None])
    assert caught[0].filename == __file__  # through scikit-learn's set_output wrapper too
    assert (z[1:] == 0).all() and (z[0] != 0).any()
    with pytest.raises(ValueError, match="on_invalid must be 'raise' or 'nan', got 'zeros'"):
        compute_descriptors(["CCO"], on_invalid="zeros")


def test_fitting_on_copies_of_one_molecule_says_why_it_cannot_scale():
    for smiles in (["CCO"], ["CCO", "CCO", "CCO"]):
        with pytest.raises(ValueError, match="no RDKit descriptor varies across the .* training SMILES"):
            RDKitDescriptors().fit(smiles)
    from gmnet_sklearn.exceptions import InvalidSmilesWarning

    with pytest.warns(InvalidSmilesWarning), pytest.raises(ValueError, match="RDKit could parse none of the 2 training"):
        RDKitDescriptors(on_invalid="nan").fit(["xyz", "C1CC"])


def test_a_descriptor_without_a_value_on_any_training_molecule_is_dropped_without_numpys_warning():
    import warnings

    raw = RDKitDescriptors()._raw(SMILES[:6])
    raw[:, 0] = np.nan  # as if RDKit could not compute the first descriptor for any of them
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = RDKitDescriptors()._fit_raw(raw)
    assert not fitted.kept_[0] and fitted.kept_[1:].any()


def test_parameters_are_checked_in_fit_and_again_in_transform():
    for bad in (0, 1, -5, 2.5, True):
        with pytest.raises(ValueError, match="n_quantiles must be an integer >= 2"):
            RDKitDescriptors(n_quantiles=bad).fit(SMILES)
    fitted = RDKitDescriptors().fit(SMILES)
    with pytest.raises(ValueError, match="on_invalid must be 'raise' or 'nan'"):
        fitted.set_params(on_invalid="bogus").transform(["CCO", "C1CC"])


def test_memory_caches_each_list_of_smiles_and_returns_the_same_rows(tmp_path, monkeypatch):
    """A folder as ``memory``: the second call with the same SMILES reads the cache (no descriptor is
    computed), whatever ``n_jobs``; another list, another ``on_invalid`` or another descriptor set
    (an RDKit upgrade) computes again."""
    smiles = list(SMILES) + ODD
    expected = compute_descriptors(smiles)
    calls = []
    real = D._descriptor_rows
    monkeypatch.setattr(D, "_descriptor_rows", lambda s: calls.append(len(s)) or real(s))
    first = D.cached_descriptors(tmp_path, smiles)
    again = D.cached_descriptors(str(tmp_path), smiles, n_jobs=2)
    np.testing.assert_array_equal(first, expected)
    np.testing.assert_array_equal(again, expected)
    n = len(set(smiles))  # each distinct SMILES is computed once
    assert calls == [n]
    D.cached_descriptors(tmp_path, smiles[1:])
    D.cached_descriptors(tmp_path, smiles, on_invalid="nan")
    monkeypatch.setattr(D, "descriptor_names", lambda: ["another", "list"])
    D.cached_descriptors(tmp_path, smiles)
    assert calls == [n, len(set(smiles[1:])), n, n]
    D.cached_descriptors(None, smiles)  # no cache: computed every time
    D.cached_descriptors(None, smiles)
    assert len(calls) == 6


def test_transformer_memory_is_a_parameter_and_changes_no_output(tmp_path):
    plain = RDKitDescriptors().fit(SMILES)
    cached = clone(RDKitDescriptors(memory=tmp_path)).fit(SMILES)
    assert cached.get_params()["memory"] == tmp_path
    np.testing.assert_array_equal(cached.transform(SMILES), plain.transform(SMILES))
    np.testing.assert_array_equal(cached.transform(SMILES), plain.transform(SMILES))  # from the cache
    assert any(tmp_path.iterdir())


def test_a_pickled_scaling_refuses_an_rdkit_that_lists_other_descriptors(monkeypatch):
    """A pickle carries no RDKit: one listing its descriptors otherwise would read every column as
    its neighbour (or fail on their number); transform names the first difference instead."""
    import pickle

    fitted = pickle.loads(pickle.dumps(RDKitDescriptors().fit(SMILES)))
    here = D.descriptor_names()
    expected = fitted.transform(SMILES[:3])
    monkeypatch.setattr(D, "descriptor_names", lambda: ["NewDescriptor", *here])
    import rdkit

    with pytest.raises(ValueError, match=rf"this RDKitDescriptors was fitted on the descriptors of RDKit {rdkit.__version__}, "
                                         rf"which RDKit .* lists otherwise \(column 0: '{here[0]}' there, 'NewDescriptor' here\)"):
        fitted.transform(SMILES[:3])
    monkeypatch.setattr(D, "descriptor_names", lambda: here)
    np.testing.assert_array_equal(fitted.transform(SMILES[:3]), expected)


def test_fit_transform_computes_the_descriptors_once_and_equals_fit_then_transform(monkeypatch):
    calls = []
    real = D._descriptor_rows
    monkeypatch.setattr(D, "_descriptor_rows", lambda s: calls.append(len(s)) or real(s))
    once = RDKitDescriptors().fit_transform(SMILES)
    assert len(calls) == 1
    np.testing.assert_array_equal(once, RDKitDescriptors().fit(SMILES).transform(SMILES))
    df = RDKitDescriptors().set_output(transform="pandas").fit_transform(SMILES)
    assert list(df.columns) == list(RDKitDescriptors().fit(SMILES).get_feature_names_out())


def test_the_quantile_map_equals_scikit_learns_transform_on_ties_bounds_and_nan():
    """The fast path (normal quantile function once on the matrix) against scikit-learn's
    QuantileTransformer.transform, its reference: bit for bit."""
    from sklearn.preprocessing import QuantileTransformer

    from gmnet_sklearn.descriptors import _quantile_normal_transform as quantile_normal_transform

    rng = np.random.default_rng(0)
    train = np.c_[rng.normal(size=300), rng.integers(0, 4, 300).astype(float),  # ties: repeated quantiles
                  np.exp(rng.normal(size=300) * 5), np.full(300, 2.0)]  # heavy tail; a constant
    train[::7, 0] = np.nan
    for n_quantiles in (1000, 17):
        qt = QuantileTransformer(n_quantiles=n_quantiles, output_distribution="normal", subsample=None).fit(train)
        test = np.r_[train[:50], rng.normal(size=(40, 4)) * 10, [[np.nan] * 4], qt.quantiles_[[0, -1]],
                     qt.quantiles_[[0, -1]] + [[-1e-8], [1e-8]]]  # past the bounds, at them, within 1e-7
        np.testing.assert_array_equal(quantile_normal_transform(qt, test), qt.transform(test))
    descriptors = RDKitDescriptors().fit(SMILES[:40])  # and on the descriptors themselves
    raw = compute_descriptors(SMILES[40:] + ODD, on_invalid="nan")[:, descriptors.kept_]
    np.testing.assert_array_equal(quantile_normal_transform(descriptors.quantiles_, raw),
                                  descriptors.quantiles_.transform(raw))


def test_the_molecule_transformers_keep_a_dataframes_index_in_fit_transform():
    """A review: MorganFingerprint's fit_transform went through set_output's wrapper of transform,
    which gave the rows a fresh index the outer wrapper kept; a FeatureUnion's pandas output then
    doubled its rows (NaN in each half). Every SMILES transformer keeps the input's index."""
    import pandas as pd
    from sklearn.pipeline import make_union

    from gmnet_sklearn.fingerprints import MorganFingerprint

    df = pd.DataFrame({"smiles": SMILES[:6]}, index=[15, 16, 17, 25, 26, 27])
    for transformer in (MorganFingerprint(n_bits=8), RDKitDescriptors()):
        out = transformer.set_output(transform="pandas").fit_transform(df)
        assert list(out.index) == list(df.index), type(transformer).__name__
        assert list(transformer.transform(df).index) == list(df.index)
    union = make_union(MorganFingerprint(n_bits=8), RDKitDescriptors()).set_output(transform="pandas")
    out = union.fit_transform(df)
    assert out.shape[0] == 6 and not out.isna().any().any()
    pd.testing.assert_frame_equal(out, union.transform(df))
