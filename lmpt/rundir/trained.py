"""`load_trained`: a run directory (its final model.safetensors, else its newest valid checkpoint) or one
checkpoint directory -> the model in eval mode, its tokenizer and the config it was trained with.
`locate_weights` and `read_weights` are the steps before building a model (what `model.init_from` needs).
Every file is read as data (lmpt.safe_files): a planted pickle or YAML tag is refused, naming the file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from lmpt.errors import LmptError
from lmpt.model import LanguageModel, build_model
from lmpt.model.mtp import without_mtp_modules
from lmpt.objectives.base import Objective
from lmpt.objectives.registry import objective_class, resolve_arch, with_new_keys
from lmpt.rundir.best import BEST_DIR, BEST_MODEL, no_best
from lmpt.rundir.checkpoint import MANIFEST, CheckpointStore, load_part
from lmpt.rundir.directory import CONFIG_FILE, FINAL_MODEL, LEGACY_FINAL_MODEL, TOKENIZER_FILES, run_tokenizer_path
from lmpt.safe_files import WEIGHTS_SUFFIX, load_torch, load_weights, load_yaml, weights_metadata
from lmpt.tokenizer.base import RUN_FILE, Tokenizer
from lmpt.tokenizer.load import load_tokenizer

RUN_ARGUMENT = (
    "RUN",
    "a run directory (its model.safetensors, else its newest valid checkpoint), RUN/best (the weights of its lowest "
    "val_loss) or a checkpoint directory",
)
"""The positional argument of lmpt-generate, -fill, -eval and -export, with its --help text."""


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
    run_dir: Path | None = None
    """The run directory the weights belong to (None: a model not loaded from one)."""

    @property
    def max_seq_len(self) -> int:
        """The longest input the model takes."""
        return self.model.max_seq_len

    @property
    def objective(self) -> type[Objective]:
        """The class of the objective the run trained with: ask it, never compare `objective_name`."""
        cls = objective_class(self.objective_name)
        if cls is None:
            raise LmptError(
                f"{self.weights} was trained with objective {self.objective_name}, which lmpt does not know"
            )
        return cls


def pick_device(name: str) -> torch.device:
    """cpu, cuda, or auto (cuda when available); cuda without a GPU is refused."""
    if name not in ("cpu", "cuda", "auto"):
        raise LmptError(f"device={name} is unknown: use cpu, cuda or auto")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise LmptError("device=cuda but no CUDA GPU is available: use device=cpu")
    return torch.device(name)


@dataclass
class LocatedWeights:
    """Where a run directory's or checkpoint's model lives, and the config it was trained with."""

    weights: Path
    """model.safetensors (a legacy model.pt is read as data only)."""
    run_dir: Path
    config: DictConfig


def _final_model(directory: Path) -> Path | None:
    for name in (FINAL_MODEL, LEGACY_FINAL_MODEL):
        if (directory / name).is_file():
            return directory / name
    return None


def locate_weights(path: str | Path) -> LocatedWeights:
    """The weights file of a run directory (its final model, else its newest valid checkpoint), of RUN/best or of
    one checkpoint directory, with the run's config (config.yaml, or the checkpoint's own copy)."""
    path = Path(path).expanduser()
    if path.name == BEST_DIR and (path.parent / CONFIG_FILE).is_file():
        return _best_of(path.parent.resolve())
    if not path.exists():
        raise LmptError(f"{path} does not exist: give a run directory (outputs/...) or one of its checkpoints")
    path = path.resolve()
    if (path / MANIFEST).exists():
        return _in_checkpoint(path, path.parent.parent)
    if not (path / CONFIG_FILE).is_file():
        raise LmptError(
            f"{path} is not a run directory or checkpoint (expected {path / CONFIG_FILE} or {path / MANIFEST})"
        )
    final = _final_model(path)
    if final is not None:
        return LocatedWeights(final, path, _run_config(path / CONFIG_FILE))
    checkpoint = CheckpointStore(path / "checkpoints", keep_last=1).latest_valid(using="loading")
    if checkpoint is None:
        raise LmptError(f"run {path} has neither a final {FINAL_MODEL} nor a valid checkpoint: train it first")
    return _in_checkpoint(checkpoint, path)


def _best_of(run_dir: Path) -> LocatedWeights:
    """RUN/best: the weights of the run's lowest val_loss, with the run's config; a run without them is refused."""
    config = _run_config(run_dir / CONFIG_FILE)
    weights = run_dir / BEST_DIR / BEST_MODEL
    if not weights.is_file():
        raise no_best(run_dir, config)
    return LocatedWeights(weights, run_dir, config)


def _run_config(path: Path) -> DictConfig:
    config = load_yaml(path)
    if not isinstance(config, DictConfig) or not {"objective", "model"} <= set(config.keys()):
        raise LmptError(f"{path} is not the config of an lmpt run (no objective and model sections)")
    return _with_new_keys(config)


def _with_new_keys(config: DictConfig) -> DictConfig:
    """The run's config with the objective keys added since it was made, at their defaults (an older run still
    loads)."""
    config = config.copy()
    config.objective = with_new_keys(config.objective)
    return config


def _in_checkpoint(checkpoint: Path, run_dir: Path) -> LocatedWeights:
    trainer = load_part(checkpoint, "trainer")  # verifies the manifest first
    weights = _final_model(checkpoint)
    if weights is None or not isinstance(trainer, dict) or not isinstance(trainer.get("config"), dict):
        raise LmptError(f"checkpoint {checkpoint} has no model weights or no config: it was not written by lmpt")
    config = OmegaConf.create(trainer["config"])
    assert isinstance(config, DictConfig)  # made from a dict
    return LocatedWeights(weights, run_dir, _with_new_keys(config))


def read_weights(weights: Path) -> tuple[dict[str, torch.Tensor], str | None]:
    """(state dict, architecture if the file names it) of a final model or checkpoint weights file."""
    if weights.suffix == WEIGHTS_SUFFIX:
        return load_weights(weights), weights_metadata(weights).get("arch")
    saved = load_torch(weights)  # a legacy model.pt: {"model": state dict, "arch": ...} or a bare state dict
    if not isinstance(saved, dict):
        raise LmptError(f"{weights} holds no state dict: it is not a model saved by lmpt")
    if "model" in saved:
        return saved["model"], saved.get("arch")
    return saved, None


def require_token_head(trained: Trained, command: str) -> None:
    """Refuse to score or fill tokens with a model whose token head was never trained: electra's discriminator
    (its generator, the network that predicts tokens, is not kept as the run's model)."""
    if trained.objective.token_head_missing:
        raise LmptError(
            f"{command} predicts tokens, and {trained.objective.token_head_missing}: fine-tune it downstream or "
            "export it with lmpt-export"
        )


def load_trained(path: str | Path, device: str = "cpu") -> Trained:
    """The model saved in a run directory or checkpoint directory `path`, on `device`, in eval mode."""
    located = locate_weights(path)
    weights, config = located.weights, located.config
    tokenizer_path = run_tokenizer_path(located.run_dir)
    if tokenizer_path is None:
        raise LmptError(
            f"run {located.run_dir} has no tokenizer file ({' or '.join(TOKENIZER_FILES)}): it was not trained"
        )
    tokenizer = load_tokenizer(tokenizer_path, RUN_FILE)
    name = str(config.objective.name)
    cls = objective_class(name)
    if cls is None:
        raise LmptError(f"{weights} was trained with objective {name}, which this lmpt does not know")
    state, arch = read_weights(weights)
    state = cls.inference_state(state)  # electra: the discriminator is the trained encoder, the generator stays
    state = without_mtp_modules(state)  # inference runs the main model only: multi-token modules stay behind
    arch = arch or resolve_arch(cls, config.model.arch)
    if "body.embed.tokens.weight" not in state:
        raise LmptError(f"{weights} holds no lmpt model (no body.embed.tokens.weight): it was not saved by lmpt")
    vocab_size = state["body.embed.tokens.weight"].shape[0]
    model = build_model(config.model, arch, vocab_size, tokenizer.special.pad, cls.n_segments, cls.n_sequence_classes)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        detail = str(exc).splitlines()[1].strip() if len(str(exc).splitlines()) > 1 else str(exc)
        raise LmptError(f"the weights in {weights} do not fit this lmpt's {arch} model ({detail})") from None
    model = model.to(pick_device(device)).eval()
    return Trained(model, tokenizer, config, arch, name, weights, located.run_dir)
