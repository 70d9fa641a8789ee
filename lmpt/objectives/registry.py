"""Objective name -> class, the architecture it trains, and its start-up checks.

The registry finds the objectives by itself: every module of lmpt.objectives is imported and each Objective
subclass that sets `name` is one (listed by `listing_order`). An objective defined elsewhere (a plug-in, a test)
joins with `register_objective`. Its schema reaches Hydra through `register_objective_schemas`."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass

import torch
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, open_dict

import lmpt.objectives
from lmpt.config.schema import ARCHITECTURES, TokenizerConfig
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.load import load_tokenizer
from lmpt.tokenizer.special import SpecialTokens


def _subclasses(cls: type) -> list[type]:
    subclasses: list[type] = cls.__subclasses__()
    return [c for sub in subclasses for c in (sub, *_subclasses(sub))]


def discover_objectives() -> dict[str, type[Objective]]:
    """name -> class of every objective in a module of lmpt.objectives, in listing order."""
    package = lmpt.objectives.__name__
    for module in pkgutil.iter_modules(lmpt.objectives.__path__):
        importlib.import_module(f"{package}.{module.name}")
    found: list[type[Objective]] = [
        c for c in _subclasses(Objective) if "name" in vars(c) and c.__module__.startswith(f"{package}.")
    ]
    return {c.name: c for c in sorted(found, key=lambda c: c.listing_order)}


OBJECTIVES: dict[str, type[Objective]] = {}
"""name -> class, in listing order: filled at the end of this module (objective modules may import this one)."""


def register_objective(cls: type[Objective]) -> type[Objective]:
    """Add an objective defined outside lmpt.objectives (usable as a class decorator); lmpt's own are found."""
    OBJECTIVES[cls.name] = cls
    ordered = sorted(OBJECTIVES.values(), key=lambda c: c.listing_order)
    OBJECTIVES.clear()
    OBJECTIVES.update((c.name, c) for c in ordered)
    return cls


def unregister_objective(name: str) -> None:
    """Remove an objective added by register_objective (a test's toy one)."""
    OBJECTIVES.pop(name, None)
    ConfigStore.instance().repo.get("schema", {}).get("objective", {}).pop(f"{name}.yaml", None)


def objective_class(name: str) -> type[Objective] | None:
    """The class of objective `name` (a run on disk knows its objective by name), None when lmpt knows no such."""
    return OBJECTIVES.get(str(name))


def register_objective_schemas() -> None:
    """Each objective's config_class in Hydra's ConfigStore as schema/objective/NAME (in reference order)."""
    cs = ConfigStore.instance()
    for cls in sorted(OBJECTIVES.values(), key=lambda c: c.reference_order):
        cs.store(group="schema/objective", name=cls.name, node=cls.config_class)


def _article(arch: str) -> str:
    return f"an {arch}" if arch[0] in "aeiou" else f"a {arch}"


def resolve_arch(cls: type[Objective], requested_arch: str) -> str:
    """`auto` -> the objective's natural architecture; an explicit one must be supported."""
    if requested_arch == "auto":
        return cls.natural_arch
    if requested_arch not in ARCHITECTURES:
        raise LmptError(f"model.arch={requested_arch} is unknown: use auto, {', '.join(ARCHITECTURES)}")
    if requested_arch not in cls.supported_archs:
        raise LmptError(
            f"objective {cls.name} cannot train {_article(requested_arch)} (model.arch={requested_arch}): "
            f"use model.arch=auto or {' or '.join(cls.supported_archs)}"
        )
    return requested_arch


def with_new_keys(cfg: DictConfig) -> DictConfig:
    """A stored run's objective section with the keys its objective gained since the run was made, at their defaults
    (a run saved by an older lmpt still evaluates, scores and generates); the stored keys are kept as they are."""
    cls = OBJECTIVES.get(str(cfg.get("name")))
    if cls is None:
        return cfg
    missing = {f.name: f for f in dataclasses.fields(cls.config_class) if f.name not in cfg}
    if not missing:
        return cfg
    completed = copy.deepcopy(cfg)
    with open_dict(completed):
        for name, f in missing.items():
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            completed[name] = default
    return completed


def build_objective(cfg: ObjectiveConfig, tokenizer: Tokenizer, seq_len: int, requested_arch: str) -> Objective:
    """The objective `cfg.name` for this tokenizer and model input length; refuses bad settings (LmptError)."""
    cls = OBJECTIVES.get(str(cfg.name))
    if cls is None:
        raise LmptError(f"objective={cfg.name} is unknown: choose one of {', '.join(OBJECTIVES)}")
    if seq_len < 2:
        raise LmptError(f"data.seq_len={seq_len} is too short: use at least 2")
    return cls(cfg, tokenizer, seq_len, resolve_arch(cls, requested_arch))


@dataclass(frozen=True)
class PlannedTokenizer:
    """The tokenizer a config asks for, before it is trained: enough to check objective settings up front."""

    special: SpecialTokens
    vocab_size: int

    def word_starts(self) -> torch.Tensor:
        return torch.ones(self.vocab_size, dtype=torch.bool)


def preflight_objective(
    cfg: ObjectiveConfig, tokenizer_cfg: TokenizerConfig, seq_len: int, requested_arch: str
) -> None:
    """Refuse bad objective settings before any data work. A user-supplied tokenizer file is only known once
    loaded, so then only the architecture is checked here; build_objective checks the rest."""
    if tokenizer_cfg.backend == "hf":  # the pretrained file is known: check against its real roles now
        assert tokenizer_cfg.path is not None, "validation asks tokenizer=hf for its path"
        pretrained = load_tokenizer(tokenizer_cfg.path, "tokenizer.path", tokenizer_cfg.num_sentinels)
        build_objective(cfg, pretrained, seq_len, requested_arch)
        return
    if tokenizer_cfg.model_file:
        cls = OBJECTIVES.get(str(cfg.name))
        if cls is not None:
            resolve_arch(cls, requested_arch)
        return
    assert tokenizer_cfg.vocab_size is not None, "a tokenizer lmpt trains has a configured size"
    planned = PlannedTokenizer(SpecialTokens(num_sentinels=tokenizer_cfg.num_sentinels), tokenizer_cfg.vocab_size)
    build_objective(cfg, planned, seq_len, requested_arch)  # type: ignore[arg-type]


OBJECTIVES.update(discover_objectives())
