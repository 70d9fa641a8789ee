"""The `lmpt-preview` command: lmpt's config groups and overrides, plus `preview.*` options; shows what the
objective makes of real text. Writes nothing: no run directory, no .hydra/ (only lmpt's shared caches)."""

from __future__ import annotations

import json
import sys

from omegaconf import DictConfig

from lmpt.app import run_hydra_app
from lmpt.console import console
from lmpt.preview.config import PRIMARY_CONFIG, register_preview_config

# Command-line overrides, not config values: merging over conf/config.yaml's hydra.run.dir would resolve its
# run-directory claim (lmpt.unique_dir creates the directory). The user's own overrides still come later.
NO_RUN_DIRECTORY = ["hydra.run.dir=.", "hydra.output_subdir=null"]


def preview(cfg: DictConfig) -> None:
    from lmpt.preview.examples import build_preview  # heavy imports only once the config is valid
    from lmpt.preview.render import render_preview

    if not cfg.preview.json:
        render_preview(build_preview(cfg), console, cfg.preview.width)
        return
    on_stderr = console.stderr
    console.stderr = True  # status lines (tokenizer, token cache) must not mix with the JSON document
    try:
        document = build_preview(cfg).to_json()
    finally:
        console.stderr = on_stderr
    sys.stdout.write(json.dumps(document) + "\n")


def main() -> None:
    register_preview_config()
    sys.argv[1:1] = NO_RUN_DIRECTORY
    run_hydra_app(preview, config_name=PRIMARY_CONFIG)


if __name__ == "__main__":
    main()
