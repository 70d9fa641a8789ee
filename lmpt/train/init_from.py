"""`model.init_from=PATH`: start a new training stage from existing weights. PATH is an lmpt run directory or
checkpoint, or a local Hugging Face directory holding a LlamaForCausalLM (decoder) or a EuroBertForMaskedLM
(encoder: the family lmpt exports mlm encoders as). The source's architecture keys become the run's (those
not set on the command line), its weights replace the fresh initialisation, and everything else (optimizer,
schedule, data, objective) starts anew."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from lmpt.errors import LmptError
from lmpt.hf.names import fits, from_hf, llama_layout
from lmpt.hf.source import (
    CONFIG_JSON,
    check_function,
    check_sizes,
    read_json_object,
    rope_theta,
    shard_files,
    shard_weights,
)
from lmpt.model.language_model import LanguageModel
from lmpt.model.mtp import without_mtp_modules
from lmpt.rundir.directory import CONFIG_FILE, STATUS_FILE, TOKENIZER_FILE
from lmpt.rundir.trained import load_trained
from lmpt.safe_files import WEIGHTS_SUFFIX
from lmpt.tokenizer.base import Tokenizer

ARCH_KEYS = (
    "d_model",
    "n_layers",
    "n_decoder_layers",
    "n_heads",
    "n_kv_heads",
    "ffn_dim",
    "norm_eps",
    "rope_theta",
    "flavour",
)
"""model.* keys that shape the weights (or their meaning): taken from the source unless given explicitly."""
HF_ARCHITECTURES = {"LlamaForCausalLM": "decoder", "EuroBertForMaskedLM": "encoder"}
VOCAB_TENSORS = frozenset({"body.embed.tokens.weight", "lm_head.weight"})
"""Tensors with a row per token: a tokenizer that extends the source's may add rows."""
IGNORED_HF_TENSORS = re.compile(r".*rotary_emb\.inv_freq$")
"""Buffers some older checkpoints saved: recomputed, never weights."""


@dataclass
class Origin:
    """Where a stage's starting weights come from."""

    path: Path
    kind: str
    """"lmpt" or the Hugging Face class name."""
    arch: str
    model_keys: dict[str, Any]
    """The source's values of ARCH_KEYS."""
    read_weights: Callable[[], dict[str, torch.Tensor]] = field(repr=False)
    """lmpt state dict (lmpt source) or Hugging Face tensors by name; read once, when first needed (a
    resumed stage takes its weights from its checkpoint and never reads them)."""
    stage: int
    """The source's own stage (a released model counts as stage 1)."""
    step: int | None
    """The source's training step, where known."""
    tokenizer_file: Path | None
    """A tokenizer file that belongs to these weights (an lmpt run's, or an lmpt export's)."""
    vocab_extends: bool = False
    """The run's tokenizer was checked to give the source's ids their meaning (`check_tokenizer`): embedding
    rows it adds beyond the source's (tokens lmpt reserves, padding) start fresh."""

    @functools.cached_property
    def state(self) -> dict[str, torch.Tensor]:
        """The source's weights (see `read_weights`)."""
        return self.read_weights()


def _lmpt_step(path: Path) -> int | None:
    match = re.fullmatch(r"step_(\d+)", path.name)
    if match:
        return int(match.group(1))
    status = path / STATUS_FILE
    return json.loads(status.read_text()).get("step") if status.is_file() else None


def _read_lmpt(path: Path) -> Origin:
    trained = load_trained(path)  # the one loader of lmpt weights
    m = trained.config.model
    keys = {k: m.get(k) for k in ARCH_KEYS} | {"flavour": m.get("flavour") or "llama"}
    state = {k: v.detach() for k, v in trained.model.state_dict().items()}
    stage = int(m.get("stage", 1) or 1)
    return Origin(path, "lmpt", trained.arch, keys, lambda: state, stage, _lmpt_step(path), trained.tokenizer.path)


def _read_hf(path: Path) -> Origin:
    c = read_json_object(path / CONFIG_JSON)
    name = next(iter(c.get("architectures") or []), None)
    if name not in HF_ARCHITECTURES:
        raise LmptError(
            f"{path} holds a {name or 'model without architectures'}: model.init_from reads "
            f"{' or '.join(HF_ARCHITECTURES)} directories (or lmpt runs)"
        )
    check_sizes(path, c)
    theta = rope_theta(path, c)
    check_function(path, c)
    keys = {
        "d_model": c["hidden_size"],
        "n_layers": c["num_hidden_layers"],
        "n_decoder_layers": None,
        "n_heads": c["num_attention_heads"],
        "n_kv_heads": c.get("num_key_value_heads", c["num_attention_heads"]),
        "ffn_dim": c["intermediate_size"],
        "norm_eps": float(c.get("rms_norm_eps", 1e-6)),
        "rope_theta": theta,
        "flavour": "llama",
    }
    tokenizer = path / TOKENIZER_FILE
    shards = shard_files(path)
    return Origin(
        path,
        name,
        HF_ARCHITECTURES[name],
        keys,
        lambda: _hf_weights(path, shards),
        1,
        None,
        tokenizer if tokenizer.is_file() else None,
    )


def _hf_weights(path: Path, shards: list[str]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in shard_weights(path, shards).items() if not IGNORED_HF_TENSORS.match(k)}


def read_origin(spec: str) -> Origin:
    """The source named by model.init_from: its architecture now, its weights (CPU) when first needed."""
    path = Path(spec).expanduser().resolve()
    if not path.exists():
        raise LmptError(f"model.init_from={spec}: {path} does not exist")
    if path.is_file():
        what = "a weights file" if path.suffix == WEIGHTS_SUFFIX else "a file"
        raise LmptError(
            f"model.init_from={spec}: {path.name} is {what}: point model.init_from at the directory holding it and "
            f"its config.json ({path.parent}), or at an lmpt run directory or checkpoint"
        )
    if (path / CONFIG_JSON).is_file() and not (path / CONFIG_FILE).is_file():
        return _read_hf(path)
    return _read_lmpt(path)


def adopt_origin(composed: DictConfig, origin: Origin, given: set[str]) -> DictConfig:
    """A copy of `composed` with the source's architecture in `model` (keys in `given`, set on the command line,
    stay as the user set them: the weights must then fit them), the stage number, and the source's tokenizer when
    none was chosen."""
    cfg = copy.deepcopy(composed)
    for key, value in origin.model_keys.items():
        if f"model.{key}" not in given and key in cfg.model:
            cfg.model[key] = value
    cfg.model.init_from = str(origin.path)
    cfg.model.stage = origin.stage + 1
    sentencepiece = cfg.tokenizer.get("backend", "sentencepiece") == "sentencepiece"
    own = origin.tokenizer_file is not None and origin.tokenizer_file.suffix == ".model"
    if own and sentencepiece and not cfg.tokenizer.model_file and "tokenizer.model_file" not in given:
        cfg.tokenizer.model_file = str(origin.tokenizer_file)
    return cfg


def check_tokenizer(origin: Origin, tokenizer: Tokenizer) -> None:
    """The run's tokenizer must give every id of the source's vocabulary the piece the source was trained
    with: the source's own tokenizer file, or the same tokens as the source's tokenizer.json (a Hugging Face
    directory) for the ids they share. Sets `origin.vocab_extends` when it does."""
    if origin.tokenizer_file is not None and tokenizer.model_bytes == origin.tokenizer_file.read_bytes():
        origin.vocab_extends = True
        return
    source_json = origin.path / "tokenizer.json"
    if source_json.is_file():
        _check_pieces(source_json, tokenizer, origin.path)
        origin.vocab_extends = True
    elif origin.tokenizer_file is not None:
        raise LmptError(
            f"the run's tokenizer ({tokenizer.path}) is not the one {origin.path} was trained with "
            f"({origin.tokenizer_file}): its embedding rows would mean other pieces; drop tokenizer.model_file"
        )
    # neither: nothing to compare with, the vocabulary must then match in size exactly


def _check_pieces(source_json: Path, tokenizer: Tokenizer, origin: Path) -> None:
    from tokenizers import Tokenizer as FastTokenizer

    source = FastTokenizer.from_file(str(source_json))
    for i in range(min(source.get_vocab_size(with_added_tokens=True), tokenizer.vocab_size)):
        theirs, ours = source.id_to_token(i), tokenizer.id_to_piece(i)
        if theirs is not None and theirs != ours:
            raise LmptError(
                f"the run's tokenizer gives id {i} to {ours!r}, {source_json} to {theirs!r}: the embedding rows "
                f"would mean other pieces; use the model's own tokenizer (tokenizer=hf tokenizer.path={origin})"
            )


def _load_lmpt_state(model: LanguageModel, origin: Origin) -> None:
    ours = model.state_dict()
    growable = VOCAB_TENSORS if origin.vocab_extends else frozenset()
    ours = without_mtp_modules(ours)  # the source is its main model (load_trained): mtp modules start fresh
    for name, tensor in ours.items():
        if name not in origin.state:
            raise LmptError(f"{origin.path} has no tensor {name} ({list(tensor.shape)}) for lmpt's {model.arch}")
        if not fits(tuple(origin.state[name].shape), tuple(tensor.shape), name in growable):
            raise LmptError(
                f"{origin.path}: {name} has shape {list(origin.state[name].shape)}, this run's model needs "
                f"{list(tensor.shape)}: the sizes do not fit"
            )
    extra = [name for name in origin.state if name not in ours]
    if extra:
        raise LmptError(f"{origin.path}: {extra[0]} has no place in this run's {model.arch} model")
    with torch.no_grad():  # the state dict shares the parameters
        for name, tensor in origin.state.items():
            (ours[name] if tensor.shape == ours[name].shape else ours[name][: tensor.shape[0]]).copy_(tensor)


def _load_hf_state(model: LanguageModel, origin: Origin) -> None:
    try:
        layout = llama_layout(model)
    except ValueError:
        first = next(iter(model.state_dict()))
        raise LmptError(f"{origin.path} ({origin.kind}) has no tensor for lmpt's {model.arch} weight {first}") from None
    used = {entry.hf_name for entry in layout}
    extra = [name for name in origin.state if name not in used]
    if extra:
        raise LmptError(f"{origin.path}: {extra[0]} has no place in lmpt's {model.arch} (tied head, no biases)")
    growable = VOCAB_TENSORS if origin.vocab_extends else frozenset()
    from_hf(layout, model.state_dict(), origin.state, str(origin.path), growable)  # shares the parameters


def load_origin(model: LanguageModel, origin: Origin) -> None:
    """Replace `model`'s weights with the source's; the first tensor that does not fit is named (LmptError)."""
    (_load_lmpt_state if origin.kind == "lmpt" else _load_hf_state)(model, origin)


def stage_record(origin: Origin, stage: int) -> dict:
    """The metrics.jsonl line that opens a stage."""
    return {"step": 0, "stage": stage, "init_from": str(origin.path), "origin": origin.kind, "origin_step": origin.step}
