"""The prepare step a command of many runs takes first (lmpt-study, lmpt-reproduce): `lmpt-prepare` with the runs'
keys, once, so that runs side by side do not each tokenise the text, and what it built read back from the token cache's
own record (each source's training tokens), never from its console."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from lmpt.config.resolvers import register_resolvers
from lmpt.config.schema import DataConfig, TokenizerConfig, settings
from lmpt.config.store import conf_dir, register_schemas
from lmpt.console import console
from lmpt.data.cache import cached_train_tokens, default_cache_root
from lmpt.errors import LmptError
from lmpt.objectives.registry import register_objective_schemas


def composed_run(keys: Sequence[str]) -> DictConfig:
    """The config `lmpt KEYS` composes (schemas and resolvers registered, as the command registers them), outside a
    Hydra app."""
    register_schemas()
    register_objective_schemas()
    register_resolvers()
    with initialize_config_dir(str(conf_dir()), version_base=None):
        return compose("config", overrides=list(keys))


def prepare(keys: Sequence[str], said: str | None = None) -> None:
    """`lmpt-prepare KEYS` as a process of its own (Hydra's state stays its own): its console shown under `said` (a
    line saying what it prepares), else kept; its error ends this command in one line."""
    command = [sys.executable, "-m", "lmpt.prepare", *keys]
    if said is not None:
        console.print(f"{said}: lmpt-prepare {' '.join(keys)}", markup=False)
    done = subprocess.run(command, capture_output=said is None, text=True)
    if done.returncode != 0:
        error = (done.stderr or "").strip().splitlines()
        said = error[-1].removeprefix("lmpt: error: ") if error else "its error is above"
        raise LmptError(f"preparing the text of {' '.join(keys)} failed: {said}")


def training_tokens(keys: Sequence[str]) -> int:
    """The training tokens of the token cache `lmpt KEYS` reads (a mixture: its sources' together), from the cache's
    own record; LmptError where it is not built yet (`prepare` builds it)."""
    cfg = composed_run(keys)
    data_cfg, tokenizer_cfg = settings(cfg.data, DataConfig), settings(cfg.tokenizer, TokenizerConfig)
    counts = cached_train_tokens(data_cfg, tokenizer_cfg, Path.cwd(), default_cache_root(data_cfg.cache_dir))
    if counts is None:
        raise LmptError(f"no token cache for {' '.join(keys)}: lmpt-prepare with the same keys builds it")
    return sum(tokens for *_, tokens in counts)
