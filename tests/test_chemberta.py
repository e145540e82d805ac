"""Tests for the plain-torch same-shape ChemBERTa-2 baseline."""

import pytest
import torch

from gmnet_sklearn.baselines import ChemBERTa
from gmnet_sklearn.baselines.chemberta import create_position_ids, hf_to_chemberta_key

V = 591
HF_CONFIG = dict(vocab_size=591, hidden_size=384, num_hidden_layers=3, num_attention_heads=12,
                 intermediate_size=464, max_position_embeddings=515, type_vocab_size=2, num_labels=2)


def padded_batch(lengths, pad_id=0, vocab=V, seed=0, total=None):
    """Random token ids (never pad_id) left-aligned, padded with pad_id; first token is 'CLS'-like."""
    g = torch.Generator().manual_seed(seed)
    t = max(lengths) if total is None else total
    ids = torch.full((len(lengths), t), pad_id, dtype=torch.long)
    for i, n in enumerate(lengths):
        tok = torch.randint(0, vocab - 1, (n,), generator=g)
        tok = tok + (tok >= pad_id).long()  # skip pad_id
        ids[i, :n] = tok
    mask = ids.ne(pad_id)
    conj = torch.randint(0, 2, ids.shape, generator=g) * mask
    return ids, conj, mask


def make_hf(dtype=torch.float32, pad_id=0, attn="eager", seed=0):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    cfg = transformers.RobertaConfig(**HF_CONFIG, pad_token_id=pad_id)
    cfg._attn_implementation = attn
    hf = transformers.RobertaForSequenceClassification(cfg)
    assert hf.config._attn_implementation == attn
    return hf.to(dtype).eval()


def test_from_hf_takes_the_heads_own_dropout():
    """Hugging Face's RobertaClassificationHead uses config.classifier_dropout when it is set."""
    hf = make_hf()
    assert ChemBERTa.from_hf(hf).head.dropout.p == hf.config.hidden_dropout_prob
    hf.config.classifier_dropout = 0.3
    net = ChemBERTa.from_hf(hf)
    assert net.head.dropout.p == 0.3 and net.embeddings.dropout.p == hf.config.hidden_dropout_prob


def test_parameter_count():
    net = ChemBERTa(V, 2)
    assert net.n_parameters() == 3_425_138
    assert sum(p.numel() for p in net.parameters()) == 3_425_138
    # Regression heads differ only by out_proj rows.
    assert ChemBERTa(V, 1).n_parameters() == 3_425_138 - 385
    names = dict(net.named_parameters())
    for name in ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                 "embeddings.token_type_embeddings.weight", "embeddings.layer_norm.weight",
                 "layers.0.attention.query.weight", "layers.2.attention.output.bias",
                 "layers.1.attention_norm.weight", "layers.1.intermediate.weight",
                 "layers.1.output.weight", "layers.1.output_norm.bias",
                 "head.dense.weight", "head.out_proj.weight"]:
        assert name in names, name


def test_parameter_count_matches_hf():
    hf = make_hf()
    assert sum(p.numel() for p in hf.parameters()) == 3_425_138


def test_init_statistics():
    torch.manual_seed(0)
    net = ChemBERTa(V, 2)
    for name, m in net.named_modules():
        if isinstance(m, torch.nn.Linear):
            assert abs(m.weight.std().item() - 0.02) < 0.002, name
            assert abs(m.weight.mean().item()) < 0.002, name
            assert torch.all(m.bias == 0), name
        elif isinstance(m, torch.nn.Embedding):
            w = m.weight
            if m.padding_idx is not None:
                assert torch.all(w[m.padding_idx] == 0), name
                w = torch.cat([w[: m.padding_idx], w[m.padding_idx + 1:]])
            assert abs(w.std().item() - 0.02) < 0.002, name
        elif isinstance(m, torch.nn.LayerNorm):
            assert torch.all(m.weight == 1) and torch.all(m.bias == 0), name
            assert m.eps == 1e-12, name
    assert net.embeddings.word_embeddings.padding_idx == 0
    assert net.embeddings.position_embeddings.padding_idx == 0
    assert net.embeddings.token_type_embeddings.padding_idx is None


def test_position_ids_match_roberta():
    ids = torch.tensor([[5, 6, 7, 0, 0], [5, 0, 0, 0, 0]])
    assert create_position_ids(ids, 0).tolist() == [[1, 2, 3, 0, 0], [1, 0, 0, 0, 0]]
    ids = torch.tensor([[5, 6, 1, 1]])
    assert create_position_ids(ids, 1).tolist() == [[2, 3, 1, 1]]


@pytest.mark.parametrize(
    "dtype,attn,pad_id,atol",
    [(torch.float32, "eager", 0, 1e-5), (torch.float32, "sdpa", 0, 1e-5),
     (torch.float64, "eager", 0, 1e-12), (torch.float64, "eager", 1, 1e-12)],
)
def test_matches_hugging_face(dtype, attn, pad_id, atol):
    transformers = pytest.importorskip("transformers")
    hf = make_hf(dtype, pad_id=pad_id, attn=attn)
    # Perturb LayerNorm and bias values so the comparison exercises them too.
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    net = ChemBERTa.from_hf(hf).to(dtype).eval()
    assert net.pad_id == pad_id and net.n_outputs == 2
    ids, conj, mask = padded_batch([17, 5, 40, 1, 33], pad_id=pad_id, seed=1)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask.long()).logits
        out = net(ids, conj, mask)
        out_int = net(ids, conj, mask.long())
        out_none = net(ids, conj, None)
    assert out.shape == (5, 2) and out.dtype == dtype
    torch.testing.assert_close(out, ref, atol=atol, rtol=0)
    torch.testing.assert_close(out_int, out, atol=0, rtol=0)
    torch.testing.assert_close(out_none, out, atol=0, rtol=0)
    # Hidden states too (every position, padding included).
    with torch.no_grad():
        ref_h = hf.roberta(input_ids=ids, attention_mask=mask.long()).last_hidden_state
        ours_h = net.encode(ids, mask)
    torch.testing.assert_close(ours_h, ref_h, atol=atol * 10, rtol=0)


def test_load_masked_lm_state_dict():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    mlm = transformers.RobertaForMaskedLM(transformers.RobertaConfig(**HF_CONFIG, pad_token_id=0))
    net = ChemBERTa(V, 3)
    with pytest.raises(KeyError):
        net.load_hf_state_dict(mlm.state_dict())  # no classifier in an MLM checkpoint
    head_before = net.head.out_proj.weight.clone()
    missing, unexpected = net.load_hf_state_dict(mlm.state_dict(), strict=False)
    assert sorted(missing) == ["head.dense.bias", "head.dense.weight",
                               "head.out_proj.bias", "head.out_proj.weight"]
    assert sorted(unexpected) == sorted(k for k in mlm.state_dict() if k.startswith("lm_head."))
    # a deeper encoder's extra layers are an error under strict, not dropped
    deeper = ChemBERTa(V, 0, n_layers=2)
    with pytest.raises(KeyError, match=r"2-layer ChemBERTa has no place for: \['roberta\.encoder\.layer\.2\."):
        deeper.load_hf_state_dict(mlm.state_dict())
    _, unexpected = deeper.load_hf_state_dict(mlm.state_dict(), strict=False)
    assert sorted(k for k in unexpected if not k.startswith("lm_head.")) == \
        sorted(k for k in mlm.state_dict() if ".layer.2." in k)
    # the encoder alone (no head) takes an MLM checkpoint strictly; a head's absence is named
    ChemBERTa(V, 0).load_hf_state_dict(mlm.state_dict())
    with pytest.raises(KeyError, match="pass n_outputs=0"):
        ChemBERTa(V, 3).load_hf_state_dict(mlm.state_dict())
    assert torch.equal(net.head.out_proj.weight, head_before)
    torch.testing.assert_close(net.layers[2].output.weight,
                               mlm.roberta.encoder.layer[2].output.dense.weight)
    mlm.eval()
    net.eval()
    ids, _, mask = padded_batch([9, 4])
    with torch.no_grad():
        ref = mlm.roberta(input_ids=ids, attention_mask=mask.long()).last_hidden_state
        torch.testing.assert_close(net.encode(ids, mask), ref, atol=1e-4, rtol=0)


def test_key_mapping():
    assert hf_to_chemberta_key("roberta.encoder.layer.1.attention.self.query.weight") == \
        "layers.1.attention.query.weight"
    assert hf_to_chemberta_key("encoder.layer.0.output.LayerNorm.bias") == "layers.0.output_norm.bias"
    assert hf_to_chemberta_key("classifier.out_proj.bias") == "head.out_proj.bias"
    assert hf_to_chemberta_key("roberta.embeddings.position_ids") is None
    assert hf_to_chemberta_key("lm_head.dense.weight") is None


def test_padding_invariance():
    torch.manual_seed(0)
    net = ChemBERTa(V, 3).eval()
    ids, conj, mask = padded_batch([12, 7, 20], seed=3)
    ids_long, conj_long, mask_long = padded_batch([12, 7, 20], seed=3, total=45)
    assert torch.equal(ids_long[:, :20], ids)
    with torch.no_grad():
        a = net(ids, conj, mask)
        b = net(ids_long, conj_long, mask_long)
        # Each sequence alone, unpadded.
        c = torch.cat([net(ids[i:i + 1, :n], None, None) for i, n in enumerate([12, 7, 20])])
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    torch.testing.assert_close(a, c, atol=1e-5, rtol=0)


def test_conj_flags_ignored():
    torch.manual_seed(0)
    net = ChemBERTa(V, 2).eval()
    ids, conj, mask = padded_batch([10, 6])
    with torch.no_grad():
        a = net(ids, conj, mask)
        b = net(ids, 1 - conj, mask)
        c = net(ids, None, mask)
    assert torch.equal(a, b) and torch.equal(a, c)


def test_too_long_raises():
    net = ChemBERTa(V, 2).eval()
    assert net.max_length == 514
    ok, _, _ = padded_batch([514])
    with torch.no_grad():
        assert net(ok).shape == (1, 2)
        # Long padded tensors are fine as long as the real tokens fit.
        padded, _, _ = padded_batch([30], total=600)
        assert torch.isfinite(net(padded)).all()
    too_long, _, _ = padded_batch([515])
    with pytest.raises(ValueError, match="non-padding tokens"):
        net(too_long)
    net1 = ChemBERTa(V, 2, pad_id=1)
    assert net1.max_length == 513
    with pytest.raises(ValueError, match="514 non-padding tokens, more than the 513"):
        net1(padded_batch([514], pad_id=1)[0])


def test_gradients_and_all_padding_row():
    torch.manual_seed(0)
    net = ChemBERTa(V, 2).train()
    ids, conj, mask = padded_batch([8, 15, 3, 0], seed=5)  # last row is all padding
    out = net(ids, conj, mask)
    assert out.shape == (4, 2)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name
    for emb in (net.embeddings.word_embeddings, net.embeddings.position_embeddings):
        assert torch.all(emb.weight.grad[0] == 0)
    net.eval()
    with torch.no_grad():
        out = net(ids, conj, mask)
    assert torch.isfinite(out).all()


def test_dropout_train_vs_eval():
    torch.manual_seed(0)
    net = ChemBERTa(V, 2)
    ids, conj, mask = padded_batch([10, 6])
    net.train()
    a, b = net(ids, conj, mask), net(ids, conj, mask)
    assert not torch.equal(a, b)
    net.eval()
    with torch.no_grad():
        assert torch.equal(net(ids, conj, mask), net(ids, conj, mask))


def test_estimator_length_limit_follows_the_vocabularys_pad_id(tmp_path, deepchem_vocab):
    """RoBERTa positions start after [PAD]'s id: with [PAD] at id 3 a 515-position model takes 511
    tokens, and a longer SMILES is an invalid row (NaN with on_invalid='nan'), not an error inside
    the model."""
    import numpy as np

    from gmnet_sklearn import ChemBERTaRegressor

    tokens = [t for t in open(deepchem_vocab).read().splitlines() if t]
    tokens.remove("[PAD]")
    vocab = tmp_path / "vocab_pad3.txt"
    vocab.write_text("\n".join(tokens[:3] + ["[PAD]"] + tokens[3:]) + "\n")
    X = ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCC", "CCOC", "c1ccncc1", "CC(C)O"] * 2
    est = ChemBERTaRegressor(vocab_file=str(vocab), d_model=16, n_layers=1, n_heads=2, intermediate_size=16,
                             max_epochs=1, valid_split=None, descriptors=False, fingerprint=False, forest=False,
                             random_state=0, on_invalid="nan").fit(X, np.arange(16.0))
    assert est.tokenizer_.pad_id == 3 and est.max_length_ == 515 - 3 - 1
    pred = est.predict(["C" * 509, "C" * 510])  # 511 and 512 tokens with [CLS] and [SEP]
    assert np.isfinite(pred[0]) and np.isnan(pred[1])
    # a max_length the user set past that limit is an error naming both, not silently cut to 511
    with pytest.raises(ValueError, match=r"max_length=514 .*\(511"):
        est.set_params(max_length=514).fit(X, np.arange(16.0))
    assert est.set_params(max_length=511).fit(X, np.arange(16.0)).max_length_ == 511


def test_skip_leaves_out_rows_past_the_vocabularys_length_limit(tmp_path, deepchem_vocab):
    """on_invalid='skip' skips with the limit the model will have ([PAD] at id 3: 511 tokens), so
    a SMILES of 512 tokens is a skipped row, named in the warning, not an error in the fit."""
    import numpy as np

    from gmnet_sklearn import ChemBERTaRegressor
    from gmnet_sklearn.exceptions import InvalidSmilesWarning

    tokens = [t for t in open(deepchem_vocab).read().splitlines() if t]
    tokens.remove("[PAD]")
    vocab = tmp_path / "vocab_pad3.txt"
    vocab.write_text("\n".join(tokens[:3] + ["[PAD]"] + tokens[3:]) + "\n")
    X = ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCC", "CCOC", "c1ccncc1", "CC(C)O"] * 2 + ["C" * 510]
    est = ChemBERTaRegressor(vocab_file=str(vocab), d_model=16, n_layers=1, n_heads=2, intermediate_size=16,
                             max_epochs=1, valid_split=None, descriptors=False, fingerprint=False, forest=False,
                             random_state=0, on_invalid="skip")
    with pytest.warns(InvalidSmilesWarning, match=r"\[16\]"):
        est.fit(X, np.arange(17.0))
    assert est.invalid_rows_.tolist() == [16] and est.max_length_ == 511
