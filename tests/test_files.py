"""Files written whole or not at all, with the mode the umask gives (utils/files.py)."""

import os

import numpy as np
import pytest
import torch

from gmnet_sklearn.utils.files import read_safetensors, write_atomic, write_safetensors


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_write_safetensors_round_trips_with_metadata_and_the_umask_mode(tmp_path, umask_027, kind):
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2], dtype=np.int16)}
    tensors = {k: torch.from_numpy(v) for k, v in arrays.items()} if kind == "torch" else arrays
    path = tmp_path / "x.safetensors"
    path.write_bytes(b"an older file")
    write_safetensors(path, tensors, metadata={"names": "[1]"})
    assert oct(path.stat().st_mode & 0o777) == "0o640"  # safetensors' save_file would make it 0o600
    back = read_safetensors(path)
    assert {k: v.numpy().tolist() for k, v in back.items()} == {k: v.tolist() for k, v in arrays.items()}
    from safetensors import safe_open

    with safe_open(str(path), "np") as fh:
        assert fh.metadata() == {"names": "[1]"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.safetensors"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "x.safetensors"
    write_safetensors(path, {"a": np.zeros(2, np.float32)})
    before = path.read_bytes()
    with pytest.raises(Exception):
        write_safetensors(path, {"a": np.zeros(2, dtype=object)})  # safetensors has no object dtype
    with pytest.raises(TypeError):
        write_atomic(path, "not bytes")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.safetensors"]


def test_check_weights_fit_compares_names_shapes_and_dtypes_from_the_header(tmp_path):
    import torch
    from safetensors.torch import save_file

    from gmnet_sklearn.utils.files import check_weights_fit

    def make():
        return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))

    state = {k: v.detach().clone() for k, v in make().state_dict().items()}
    save_file(state, str(tmp_path / "ok.safetensors"))
    check_weights_fit(tmp_path / "ok.safetensors", make, n_layers=2)
    save_file({k: v.to(torch.int8) for k, v in state.items()}, str(tmp_path / "int8.safetensors"))
    with pytest.raises(ValueError, match=r"dtypes: 0.bias holds torch.int8 where the model has torch.float32"):
        check_weights_fit(tmp_path / "int8.safetensors", make)
    # another precision of floating point loads (load_state_dict casts): a model saved under
    # torch.set_default_dtype(torch.float64), or a float64 default while loading a float32 file
    save_file({k: v.double() for k, v in state.items()}, str(tmp_path / "f64.safetensors"))
    check_weights_fit(tmp_path / "f64.safetensors", make)
    save_file({**state, "0.weight": torch.zeros(5, 3)}, str(tmp_path / "shape.safetensors"))
    with pytest.raises(ValueError, match=r"shapes: 0.weight is \(5, 3\) where the model has \(4, 3\)"):
        check_weights_fit(tmp_path / "shape.safetensors", make)
    save_file({k: v for k, v in state.items() if k != "1.bias"} | {"2.bias": torch.zeros(2)},
              str(tmp_path / "names.safetensors"))
    with pytest.raises(ValueError, match=r"missing: 1.bias; unexpected: 2.bias"):
        check_weights_fit(tmp_path / "names.safetensors", make)
    with pytest.raises(ValueError, match=r"5 layers, more than the file's 4 tensors"):
        check_weights_fit(tmp_path / "ok.safetensors", make, n_layers=5)
