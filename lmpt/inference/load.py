"""`load_trained`: a run directory (its final model.pt, else its newest valid checkpoint) or one checkpoint
directory -> the model in eval mode, its tokenizer and the config it was trained with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from lmpt.errors import LmptError
from lmpt.model import LanguageModel, build_model
from lmpt.objectives.registry import OBJECTIVES, resolve_arch
from lmpt.tokenizer.tokenizer import Tokenizer
from lmpt.train.checkpoint import MANIFEST, CheckpointStore, manifest_problem
from lmpt.train.rundir import CONFIG_FILE, FINAL_MODEL, TOKENIZER_FILE


@dataclass
class Trained:
    """A trained model ready for inference."""

    model: LanguageModel
    tokenizer: Tokenizer
    config: DictConfig
    """The run's composed config (config.yaml, or the checkpoint's own copy)."""
    arch: str
    """decoder, encoder or encoder-decoder."""
    objective_name: str
    weights: Path
    """The file the weights came from."""


def pick_device(name: str) -> torch.device:
    """cpu, cuda, or auto (cuda when available); cuda without a GPU is refused."""
    if name not in ("cpu", "cuda", "auto"):
        raise LmptError(f"device={name} is unknown: use cpu, cuda or auto")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise LmptError("device=cuda but no CUDA GPU is available: use device=cpu")
    return torch.device(name)


def _load(path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise LmptError(f"{path} could not be read ({type(exc).__name__}): it is not a model saved by lmpt") from None


def _locate(path: Path) -> tuple[Path, Path, DictConfig | None]:
    """(weights file, run directory, config from a checkpoint or None to read config.yaml)."""
    if (path / MANIFEST).exists():
        problem = manifest_problem(path)
        if problem is not None:
            raise LmptError(f"checkpoint {path} is not usable: {problem}")
        trainer = _load(path / "trainer.pt")
        return path / FINAL_MODEL, path.parent.parent, OmegaConf.create(trainer["config"])
    if not (path / CONFIG_FILE).is_file():
        raise LmptError(
            f"{path} is not a run directory or checkpoint (expected {path / CONFIG_FILE} or {path / MANIFEST})"
        )
    if (path / FINAL_MODEL).is_file():
        return path / FINAL_MODEL, path, None
    checkpoint = CheckpointStore(path / "checkpoints", keep_last=1).latest_valid()
    if checkpoint is None:
        raise LmptError(f"run {path} has neither a final {FINAL_MODEL} nor a valid checkpoint: train it first")
    return checkpoint / FINAL_MODEL, path, OmegaConf.create(_load(checkpoint / "trainer.pt")["config"])


def load_trained(path: str | Path, device: str = "cpu") -> Trained:
    """The model saved in a run directory or checkpoint directory `path`, on `device`, in eval mode."""
    path = Path(path).expanduser()
    if not path.exists():
        raise LmptError(f"{path} does not exist: give a run directory (outputs/...) or one of its checkpoints")
    weights, run_dir, config = _locate(path.resolve())
    if config is None:
        config = OmegaConf.load(run_dir / CONFIG_FILE)
    tokenizer = Tokenizer.load(run_dir / TOKENIZER_FILE)
    name = str(config.objective.name)
    if name not in OBJECTIVES:
        raise LmptError(f"{weights} was trained with objective {name}, which this lmpt does not know")
    cls = OBJECTIVES[name]
    saved = _load(weights)
    state = saved["model"] if isinstance(saved, dict) and "model" in saved else saved
    arch = saved.get("arch") if isinstance(saved, dict) and "arch" in saved else resolve_arch(cls, config.model.arch)
    vocab_size = state["body.embed.tokens.weight"].shape[0]
    model = build_model(config.model, arch, vocab_size, tokenizer.special.pad, cls.n_segments, cls.n_sequence_classes)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        detail = str(exc).splitlines()[1].strip() if len(str(exc).splitlines()) > 1 else str(exc)
        raise LmptError(f"the weights in {weights} do not fit this lmpt's {arch} model ({detail})") from None
    model = model.to(pick_device(device)).eval()
    return Trained(model, tokenizer, config, arch, name, weights)
