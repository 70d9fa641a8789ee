"""The `lmpt-prepare` command: lmpt's config groups and overrides; trains (or reuses) the tokenizer and builds
(or reuses) the token cache exactly as `lmpt` would, then stops. A later `lmpt` with the same data and tokenizer
settings reuses both and starts training at once. Writes nothing but lmpt's shared caches: no run directory."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lmpt.cli import run_hydra_app
from lmpt.console import console

# as lmpt-preview: command-line overrides, so no run directory is claimed; the user's overrides still come later
NO_RUN_DIRECTORY = ["hydra.run.dir=.", "hydra.output_subdir=null"]


def prepare(cfg: DictConfig) -> None:
    """Build the configured data's tokenizer and token cache; print where they are and what they hold."""
    from lmpt.config.validate import validate_config  # heavy imports only once the config is composed
    from lmpt.data.cache import default_cache_root, prepare_corpora

    validate_config(cfg)
    data_cfg, tokenizer_cfg = OmegaConf.to_object(cfg.data), OmegaConf.to_object(cfg.tokenizer)
    data = prepare_corpora(data_cfg, tokenizer_cfg, Path.cwd(), default_cache_root(cfg.data.cache_dir))
    console.print(f"tokenizer: {data.tokenizer.path}")
    console.print(f"token cache: {data.cache_dir}")
    for source in data.sources:
        label = f"source {source.name}: " if source.name else ""
        train, val = source.train[1] - source.train[0], source.val[1] - source.val[0]
        console.print(f"{label}{train:,} train / {val:,} val tokens")


def main() -> None:
    sys.argv[1:1] = NO_RUN_DIRECTORY
    run_hydra_app(prepare)


if __name__ == "__main__":
    main()
