"""GMNetEmbedder: a fitted Chem-GMNet's pooled state and multipole moments as features."""

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

from gmnet_sklearn import GMNetRegressor
from gmnet_sklearn.embedder import GMNetEmbedder
from gmnet_sklearn.gm import functional as F

from ._smiles import SMILES, regression_target

TINY = dict(d_model=16, n_layers=2, n_heads=2, k=4, L=2, max_epochs=2, random_state=0)
Y = regression_target(SMILES)


@pytest.fixture(scope="module")
def fused():
    """The default wiring: RDKit descriptors fused into the head; two ensemble members."""
    return GMNetRegressor(**TINY, n_estimators=2).fit(SMILES, Y)


@pytest.fixture(scope="module")
def plain():
    return GMNetRegressor(**TINY, descriptors=False, fingerprint=False).fit(SMILES, Y)


def _head_inputs(est, smiles):
    """What the head's first dense layer receives during est.predict, one SMILES at a time."""
    seen = []
    model = est.net_.module_
    dense = getattr(model, "model", model).dense
    handle = dense.register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach().clone()))
    try:
        for s in smiles:
            est.predict([s])
    finally:
        handle.remove()
    return torch.cat(seen).numpy()


def test_pipeline_with_random_forest(fused):
    from sklearn.frozen import FrozenEstimator

    train, test = SMILES[:40], SMILES[40:]
    for embedder in (GMNetEmbedder(fused, prefit=True), GMNetEmbedder(FrozenEstimator(fused)),
                     GMNetEmbedder(fused, features="moments", prefit=True)):
        pipe = make_pipeline(embedder, RandomForestRegressor(n_estimators=20, random_state=0)).fit(train, Y[:40])
        pred = pipe.predict(test)
        assert pred.shape == (len(test),) and np.isfinite(pred).all()
        assert pipe[-1].n_features_in_ == pipe[0].n_features_out_
    # prefit=False: fit trains a clone of the (unfitted) estimator on the pipeline's data
    pipe = make_pipeline(GMNetEmbedder(GMNetRegressor(**{**TINY, "max_epochs": 1}, descriptors=False, fingerprint=False)), Ridge())
    pipe.fit(train, Y[:40])
    assert np.isfinite(pipe.predict(test)).all()
    assert pipe[0].estimator_.n_train_ > 0 and not hasattr(pipe[0].estimator, "nets_")


def test_shapes_names_and_members(fused):
    attn = fused.net_.module_.model.encoder.layers[0].attn
    n_moments = TINY["n_layers"] * TINY["n_heads"] * F.harmonic_dim(TINY["k"], TINY["L"]) * TINY["k"]
    for kwargs, width in [({}, 16), ({"features": "head"}, 16), ({"features": "moments"}, n_moments),
                          ({"features": "moments", "layers": [-1]}, n_moments // 2),
                          ({"member": "all"}, 32)]:
        emb = GMNetEmbedder(fused, prefit=True, **kwargs).fit(SMILES)
        Z = emb.transform(SMILES[:7])
        names = emb.get_feature_names_out()
        assert Z.shape == (7, width) and Z.dtype == np.float32 and np.isfinite(Z).all()
        assert len(names) == width == emb.n_features_out_ and len(set(names)) == width
    names = GMNetEmbedder(fused, features="moments", prefit=True).fit(SMILES).get_feature_names_out()
    assert names[0] == "moments_mean_layer0_head0_deg0_0_ch0"
    assert names[attn.k * attn.dim] == "moments_mean_layer0_head1_deg0_0_ch0"
    both = GMNetEmbedder(fused, member="all", prefit=True).fit(SMILES).transform(SMILES)
    second = GMNetEmbedder(fused, member=1, prefit=True).fit(SMILES).transform(SMILES)
    np.testing.assert_array_equal(both[:, 16:], second)
    assert not np.allclose(both[:, :16], second)  # the members are different models
    # prefit=True copies the estimator (a refit of the user's must not change the features) but
    # shares its forest, which nothing changes in place (a refit makes a new one)
    copied = GMNetEmbedder(fused, prefit=True).fit(SMILES).estimator_
    assert fused.forest_ is not None and copied.forest_ is fused.forest_
    assert copied.nets_[0] is not fused.nets_[0] and copied.descriptor_scaler_ is not fused.descriptor_scaler_
    np.testing.assert_array_equal(copied.predict(SMILES[:5]), fused.predict(SMILES[:5]))


def test_pooled_features_are_what_the_head_sees(plain, fused):
    smiles = SMILES[:9]
    pooled = GMNetEmbedder(plain, prefit=True, batch_size=4).fit(SMILES).transform(smiles)
    np.testing.assert_allclose(pooled, _head_inputs(plain, smiles), rtol=1e-5, atol=1e-5)
    # fused: "head" adds the projected descriptors to the encoder's pooled state
    head = GMNetEmbedder(fused, features="head", prefit=True).fit(SMILES).transform(smiles)
    np.testing.assert_allclose(head, _head_inputs(fused, smiles), rtol=1e-5, atol=1e-5)
    pooled = GMNetEmbedder(fused, prefit=True).fit(SMILES).transform(smiles)
    desc = torch.as_tensor(fused._molecule_features(smiles), dtype=torch.float32)
    with torch.inference_mode():
        shift = fused.net_.module_.descriptor_proj(desc).numpy()
    np.testing.assert_allclose(pooled + shift, head, rtol=1e-5, atol=1e-5)
    assert not np.allclose(pooled, head)


def test_moments_equal_multipole_moments(fused):
    smiles = SMILES[:9]
    emb = GMNetEmbedder(fused, features="moments", moments="backward", prefit=True, batch_size=4).fit(SMILES)
    Z = emb.transform(smiles)  # padded batches of mixed lengths, in length order
    for i, s in enumerate(smiles):
        np.testing.assert_allclose(Z[i], _moments(fused, s)["backward"].reshape(-1).numpy(), rtol=1e-5, atol=1e-6)
    last = GMNetEmbedder(fused, features="moments", layers=1, prefit=True).fit(SMILES).transform(smiles[:1])
    np.testing.assert_allclose(last[0], _moments(fused, smiles[0])["mean"][:, 1].reshape(-1).numpy(),
                               rtol=1e-5, atol=1e-6)


def _moments(est, s):
    ids, flags, _ = est._encode([s]).padded()
    ids = torch.as_tensor(ids)
    return est.net_.module_.model.multipole_moments(ids, torch.as_tensor(flags.astype(np.int64)),
                                                     ids != est.tokenizer_.pad_id)


def test_invalid_smiles_name_their_rows(plain):
    emb = GMNetEmbedder(plain, prefit=True).fit(SMILES)
    with pytest.raises(ValueError, match=r"2 of 4 SMILES are invalid:\n  \[1\] 'C1CC'.*\n  \[3\] 'xyz'"):
        emb.transform(["CCO", "C1CC", "CCN", "xyz"])


def test_params_clone_tags_and_errors(plain):
    from sklearn.exceptions import NotFittedError
    from sklearn.frozen import FrozenEstimator

    emb = GMNetEmbedder(plain, features="moments", layers=[0], member=0, prefit=True)
    copy = clone(emb)
    assert copy.get_params()["features"] == "moments" and not hasattr(copy, "estimator_")
    # clone un-fits the estimator parameter, as with SelectFromModel: the error says what to do
    with pytest.raises(NotFittedError, match=r"prefit=True\) needs a fitted estimator.*FrozenEstimator\(est\)"):
        copy.fit(SMILES)
    frozen = clone(GMNetEmbedder(FrozenEstimator(plain)))
    np.testing.assert_array_equal(frozen.fit(SMILES).transform(SMILES[:3]),
                                  GMNetEmbedder(plain, prefit=True).fit(SMILES).transform(SMILES[:3]))
    tags = emb.__sklearn_tags__()
    assert tags.input_tags.string and not tags.input_tags.two_d_array
    with pytest.raises(ValueError, match="fit needs y"):
        GMNetEmbedder(GMNetRegressor()).fit(SMILES)
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.pipeline import make_pipeline

    with pytest.raises(TypeError, match=r"not of a Pipeline \(pass the pipeline's last step\)"):
        GMNetEmbedder(make_pipeline(plain), prefit=True).fit(SMILES)
    with pytest.raises(TypeError, match="not of a RandomForestRegressor$"):
        GMNetEmbedder(RandomForestRegressor()).fit(SMILES, Y)
    for bad, match in [({"features": "atoms"}, "features must be"), ({"member": 3}, "member must be"),
                       ({"layers": [5]}, "layers must be"), ({"moments": "sum"}, "moments must be")]:
        with pytest.raises(ValueError, match=match):
            GMNetEmbedder(plain, prefit=True, **{"features": "moments", **bad}).fit(SMILES)
    ska = GMNetRegressor(**{**TINY, "max_epochs": 1}, attention="ska", descriptors=False, fingerprint=False).fit(SMILES[:20], Y[:20])
    with pytest.raises(ValueError, match="Gated-SFA"):
        GMNetEmbedder(ska, features="moments", prefit=True).fit(SMILES)


@pytest.mark.parametrize("kwargs", [{"features": "pooled"}, {"features": "head", "member": "all"},
                                    {"features": "moments", "layers": 1}])
def test_embedding_in_chunks_gives_the_whole_inputs_features(fused, kwargs, monkeypatch):
    from gmnet_sklearn.estimators import _base

    emb = GMNetEmbedder(fused, prefit=True, batch_size=4, **kwargs).fit(SMILES)
    whole = emb.transform(SMILES[:30])
    monkeypatch.setattr(_base, "PREDICT_CHUNK", 7)
    pieces = []
    real = GMNetEmbedder._transform_into
    monkeypatch.setattr(GMNetEmbedder, "_transform_into", lambda self, s, rows, *a: pieces.append(len(rows)) or real(self, s, rows, *a))
    np.testing.assert_allclose(emb.transform(SMILES[:30]), whole, rtol=1e-5, atol=1e-6)
    assert pieces == [7, 7, 7, 7, 2]
    with pytest.raises(ValueError, match=r"1 of 30 SMILES are invalid:\n  \[20\] 'C1CC\('"):
        emb.transform(SMILES[:20] + ["C1CC("] + SMILES[21:30])


def test_column_transformer_and_pandas_output(plain):
    from sklearn.frozen import FrozenEstimator

    frame = pd.DataFrame({"smiles": SMILES[:10], "weight": np.arange(10.0)})
    ct = ColumnTransformer([("gmnet", GMNetEmbedder(FrozenEstimator(plain)), ["smiles"]),
                            ("num", "passthrough", ["weight"])]).set_output(transform="pandas")
    out = ct.fit_transform(frame)
    assert out.shape == (10, 17)
    assert list(out.columns[:2]) == ["gmnet__pooled0", "gmnet__pooled1"] and out.columns[-1] == "num__weight"
    np.testing.assert_allclose(out.iloc[:, :16].to_numpy(),
                               GMNetEmbedder(plain, prefit=True).fit(SMILES).transform(SMILES[:10]), rtol=1e-6)


def test_chemberta_pooled_state_and_no_moments():
    from gmnet_sklearn import ChemBERTaRegressor

    est = ChemBERTaRegressor(d_model=16, n_layers=1, n_heads=2, intermediate_size=32, max_epochs=1, random_state=0,
                             descriptors=False, fingerprint=False).fit(SMILES, Y)
    seen = []
    handle = est.net_.module_.head.register_forward_pre_hook(lambda mod, args: seen.append(args[0][:, 0].clone()))
    try:
        for s in SMILES[:5]:
            est.predict([s])
    finally:
        handle.remove()
    pooled = GMNetEmbedder(est, prefit=True).fit(SMILES).transform(SMILES[:5])
    np.testing.assert_allclose(pooled, torch.cat(seen).numpy(), rtol=1e-5, atol=1e-5)  # the [CLS] state
    with pytest.raises(ValueError, match="needs a Chem-GMNet model"):
        GMNetEmbedder(est, features="moments", prefit=True).fit(SMILES)


def test_width_is_the_fitted_models_after_set_params():
    est = GMNetRegressor(**TINY, descriptors=False, fingerprint=False).fit(SMILES, Y)
    expected = GMNetEmbedder(est, prefit=True).fit(SMILES).transform(SMILES[:5])
    est.set_params(d_model=32)  # not refitted: the encoder is still 16 wide
    emb = GMNetEmbedder(est, prefit=True).fit(SMILES)
    assert emb.n_features_out_ == 16
    np.testing.assert_array_equal(emb.transform(SMILES[:5]), expected)
    # the embedder holds a copy: refitting the user's estimator (here at another width) changes
    # neither its width nor its features
    est.fit(SMILES, Y)
    assert GMNetEmbedder(est, prefit=True).fit(SMILES).n_features_out_ == 32  # refitted at 32
    assert emb.n_features_out_ == 16
    np.testing.assert_array_equal(emb.transform(SMILES[:5]), expected)


def test_features_stay_as_fitted_after_set_params(fused):
    """A review: features, moments or layers changed by set_params after fit made transform fail
    (numpy's shape error) or give forward moments under the mean's column names. They stay as
    fitted, as the width does; a refit takes the new ones."""
    X = SMILES[:6]
    emb = GMNetEmbedder(fused, features="moments", layers=[0], prefit=True).fit(SMILES)
    expected, names = emb.transform(X), emb.get_feature_names_out()
    for change in ({"layers": None}, {"features": "pooled"}, {"moments": "forward"}):
        emb.set_params(**change)
        np.testing.assert_array_equal(emb.transform(X), expected)
        np.testing.assert_array_equal(emb.get_feature_names_out(), names)
    emb.fit(SMILES)  # (now features="pooled", moments="forward", layers=None)
    assert emb.n_features_out_ == 16 and emb.get_feature_names_out()[0] == "pooled0"
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        emb.set_params(batch_size=0).transform(X)


def test_fit_transform_keeps_a_dataframes_index(plain):
    """A review: fit_transform went through set_output's wrapper of transform, which gave the rows
    a fresh index (MorganFingerprint's, tests/test_descriptors.py)."""
    import pandas as pd

    df = pd.DataFrame({"smiles": SMILES[:4]}, index=[7, 8, 9, 10])
    emb = GMNetEmbedder(plain, prefit=True).set_output(transform="pandas")
    assert list(emb.fit_transform(df).index) == [7, 8, 9, 10] == list(emb.transform(df).index)


def test_transform_runs_with_the_estimators_threads(plain):
    seen = []
    emb = GMNetEmbedder(clone(plain).set_params(n_jobs=1), prefit=False).fit(SMILES, Y)
    handle = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda mod, args: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        emb.transform(SMILES[:3])
    finally:
        torch.set_num_threads(before)
        handle.remove()
    assert seen and set(seen) == {1}


def test_review_findings_on_invalid_rows_failed_fits_early_checks_and_repeated_layers(plain):
    """Found in review: transform raised on an invalid SMILES whatever the estimator's on_invalid;
    a failed fit left a half-fitted embedder; a member or features the parameters already rule out
    were found only after training; layers=[0, 0] gave duplicate columns."""
    from sklearn.base import clone as sk_clone
    from sklearn.exceptions import NotFittedError

    nan_est = sk_clone(plain).set_params(on_invalid="nan").fit(SMILES, Y)
    out = GMNetEmbedder(nan_est, prefit=True).fit(SMILES).transform(["CCO", "xyz", "CCN"])
    assert np.isnan(out[1]).all() and np.isfinite(out[[0, 2]]).all()
    np.testing.assert_allclose(out[[0, 2]], GMNetEmbedder(plain, prefit=True).fit(SMILES).transform(["CCO", "CCN"]),
                               rtol=1e-5, atol=1e-6)
    emb = GMNetEmbedder(plain, prefit=True, member=5)
    with pytest.raises(ValueError, match="member must be"):
        emb.fit(SMILES)
    with pytest.raises(NotFittedError):
        emb.transform(SMILES[:2])
    untrained = GMNetRegressor(**TINY, descriptors=False, fingerprint=False, forest=False)
    with pytest.raises(ValueError, match="member must be"):  # one member: found before training it
        GMNetEmbedder(untrained, member=3).fit(SMILES, Y)
    with pytest.raises(ValueError, match="attention='ska' has none"):
        GMNetEmbedder(sk_clone(untrained).set_params(attention="ska"), features="moments").fit(SMILES, Y)
    with pytest.raises(ValueError, match="layers names a layer twice"):
        GMNetEmbedder(plain, prefit=True, features="moments", layers=[0, -2]).fit(SMILES)


def test_fit_transform_reads_a_generator_once(plain):
    """fit consumed a generator and TransformerMixin's transform then found it empty (a review)."""
    emb = GMNetEmbedder(plain, prefit=True)
    np.testing.assert_array_equal(emb.fit_transform(s for s in SMILES[:5]), emb.transform(SMILES[:5]))
