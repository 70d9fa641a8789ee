"""model.init_from refuses, in one line, a source it could not continue exactly (issue 27, points 1, 2 and 4):
rotary scaling under either config key, broken safetensors files, configs and shard indexes that are not what
they claim, a shard outside its directory, and a path to a weights file instead of its directory."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from golden import BASE, describe, run
from test_init_from import save_llama

from lmpt.errors import LmptError
from lmpt.train.init_from import read_origin

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny LlamaForCausalLM saved by transformers: each test copies it and breaks the copy."""
    return save_llama(tmp_path_factory.mktemp("source") / "llama", 2)


def _copy(llama: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(llama, tmp_path / "broken"))


def _edit_config(source: Path, edit: Callable[[dict], object]) -> None:
    path = source / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))


# -- point 1: rotary settings read as transformers reads them, any scaling refused by name ----------------

SCALED = {
    "rope_scaling linear beside a default rope_parameters": (
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "rope_parameters": {"rope_type": "default"}},
        "rope_scaling",
        "linear",
    ),
    "legacy type key": ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "rope_scaling", "dynamic"),
    "yarn in rope_parameters": (
        {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
        "rope_parameters",
        "yarn",
    ),
    "llama3 in rope_parameters, rope_scaling null": (
        {"rope_scaling": None, "rope_parameters": {"rope_type": "llama3", "factor": 8.0}},
        "rope_parameters",
        "llama3",
    ),
    "a default rope_scaling cannot hide a scaled rope_parameters": (
        {"rope_scaling": {"rope_type": "default"}, "rope_parameters": {"rope_type": "longrope"}},
        "rope_parameters",
        "longrope",
    ),
}


@pytest.mark.parametrize(("keys", "key", "kind"), SCALED.values(), ids=SCALED.keys())
def test_any_rotary_scaling_is_refused_naming_its_key(llama: Path, tmp_path: Path, keys, key, kind) -> None:
    source = _copy(llama, tmp_path)
    _edit_config(source, lambda c: c.update(keys))
    with pytest.raises(LmptError) as refused:
        read_origin(str(source))
    message = str(refused.value)
    assert f"{key} has rope_type {kind}" in message and "\n" not in message
    assert "start from a model trained with default rotary positions" in message


THETAS = {
    "rope_parameters": {"rope_parameters": {"rope_type": "default", "rope_theta": 250000.0}},
    "top-level rope_theta": {"rope_parameters": None, "rope_theta": 40000.0},
    "rope_scaling wins over rope_parameters": {
        "rope_scaling": {"rope_type": "default", "rope_theta": 1000.0},
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    },
    "rope_scaling without a theta: the top-level one": {
        "rope_scaling": {"rope_type": "default"},
        "rope_parameters": {"rope_theta": 7.0},
        "rope_theta": 20000.0,
    },
}


@pytest.mark.parametrize("keys", THETAS.values(), ids=THETAS.keys())
def test_rope_theta_is_the_one_transformers_reads(llama: Path, tmp_path: Path, keys: dict) -> None:
    source = _copy(llama, tmp_path)
    _edit_config(source, lambda c: (c.pop("rope_theta", None), c.pop("rope_parameters", None), c.update(keys)))
    theirs = transformers.LlamaConfig.from_pretrained(source).rope_parameters
    assert theirs["rope_type"] == "default"
    assert read_origin(str(source)).model_keys["rope_theta"] == theirs["rope_theta"]


# -- points 2 and 4: broken sources -----------------------------------------------------------------------


def _header(weights: Path) -> tuple[int, dict, bytes]:
    raw = weights.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    return length, json.loads(raw[8 : 8 + length]), raw


def _rewrite_header(weights: Path, edit: Callable[[dict], None]) -> None:
    length, header, raw = _header(weights)
    edit(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    weights.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + length :])


def _past_the_end(header: dict) -> None:
    name = next(k for k in header if k != "__metadata__")
    begin, end = header[name]["data_offsets"]
    header[name]["data_offsets"] = [begin + 8, end + 8]


def _claims_2_62(w: Path) -> None:
    w.write_bytes(struct.pack("<Q", 2**62) + w.read_bytes()[8:])


def _cut_in_half(w: Path) -> None:
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])


def _cut_in_header(w: Path) -> None:
    w.write_bytes(w.read_bytes()[: 8 + _header(w)[0] // 2])


def _outside(source: Path) -> None:
    """An index naming a real safetensors file in a sibling directory."""
    (source.parent / "other").mkdir()
    shutil.copy(source / "model.safetensors", source.parent / "other" / "model.safetensors")
    _sharded(source, {"model.norm.weight": "../other/model.safetensors"})


def _sharded(source: Path, weight_map: object) -> None:
    (source / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


BROKEN = {
    "header claims 2^62 bytes": (lambda s: _claims_2_62(s / "model.safetensors"), "model.safetensors is not"),
    "cut in half": (lambda s: _cut_in_half(s / "model.safetensors"), "model.safetensors is not"),
    "cut inside the header": (lambda s: _cut_in_header(s / "model.safetensors"), "model.safetensors is not"),
    "offsets past the end": (
        lambda s: _rewrite_header(s / "model.safetensors", _past_the_end),
        "model.safetensors is not",
    ),
    "tensor of 2^62 bytes": (
        lambda s: _rewrite_header(
            s / "model.safetensors", lambda h: h["model.norm.weight"].update(data_offsets=[0, 2**62])
        ),
        "model.safetensors is not",
    ),
    "config.json not JSON": (lambda s: (s / "config.json").write_text("{'hidden_size': 64"), "config.json is not"),
    "config.json a list": (lambda s: (s / "config.json").write_text("[1, 2]"), "config.json is not"),
    "index not JSON": (lambda s: (s / "model.safetensors.index.json").write_text("{"), "index.json is not"),
    "index a list": (lambda s: (s / "model.safetensors.index.json").write_text("[]"), "index.json is not"),
    "weight_map a list": (lambda s: _sharded(s, ["model.safetensors"]), "index.json is not"),
    "num_attention_heads 0": (
        lambda s: _edit_config(s, lambda c: c.update(num_attention_heads=0)),
        "num_attention_heads=0",
    ),
    "hidden_size a string": (lambda s: _edit_config(s, lambda c: c.update(hidden_size="64")), "hidden_size='64'"),
    "no intermediate_size": (lambda s: _edit_config(s, lambda c: c.pop("intermediate_size")), "intermediate_size=None"),
    "a shard outside its directory": (_outside, "names ../other/model.safetensors, outside"),
    "an absolute shard path": (
        lambda s: _sharded(s, {"model.norm.weight": "/etc/passwd"}),
        "names /etc/passwd, outside",
    ),
}


@pytest.mark.parametrize(("break_it", "named"), BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_source_is_refused_in_one_line_before_any_weights_are_read(
    llama: Path, tmp_path: Path, break_it: Callable[[Path], object], named: str
) -> None:
    source = _copy(llama, tmp_path)
    break_it(source)
    with pytest.raises(LmptError) as refused:
        read_origin(str(source))
    message = str(refused.value)
    assert named in message and str(source) in message and "\n" not in message, message


def test_a_weights_file_is_refused_saying_what_to_point_at(llama: Path) -> None:
    with pytest.raises(
        LmptError,
        match=r"model.safetensors is a weights file: point model.init_from at the "
        r"directory holding it and its config.json \(" + str(llama),
    ):
        read_origin(str(llama / "model.safetensors"))


CLI_CASES = [  # the in-process cases above cover every kind; CI runs one through the real CLI (~15 s each)
    pytest.param(BROKEN["cut inside the header"][0], "model.safetensors is not a readable safetensors", id="header"),
    pytest.param(BROKEN["num_attention_heads 0"][0], "num_attention_heads=0", id="heads-0", marks=pytest.mark.soak),
    pytest.param(_outside, "outside", id="shard-outside", marks=pytest.mark.soak),
]


@pytest.mark.parametrize(("break_it", "named"), CLI_CASES)
def test_the_cli_says_one_line_exit_2_and_writes_nothing(llama: Path, tmp_path: Path, break_it, named) -> None:
    source = _copy(llama, tmp_path)
    break_it(source)
    before = {p: p.read_bytes() for p in source.rglob("*") if p.is_file()}
    done = run(tmp_path / "run", [*BASE, f"model.init_from={source}", "objective=clm"])
    assert done.returncode == 2, describe(done)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("lmpt: error: ") and named in done.stderr
    assert not (tmp_path / "run").exists()
    assert {p: p.read_bytes() for p in source.rglob("*") if p.is_file()} == before
