"""The `lmpt-prepare` command: lmpt's config groups and overrides; trains (or reuses) the tokenizer and builds
(or reuses) the token cache exactly as `lmpt` would, then stops. With `prepare.shard=i/N` it tokenises only the
cache shards j with j % N == i into the shared cache directory (N processes, on N machines or as a SLURM array,
build the cache between them; whichever seals the last shard completes it; a quality stage runs once between
them, docs/data_quality.md). `lmpt-prepare -m hydra/launcher=slurm_cpu ...` runs it as a SLURM job. A later `lmpt`
with the same data and tokenizer settings reuses both and starts training at once. Writes nothing but lmpt's shared
caches: no run directory."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from omegaconf import DictConfig

from lmpt.app import run_hydra_app
from lmpt.config.schema import DataConfig, TokenizerConfig, settings
from lmpt.console import console
from lmpt.errors import LmptError, SmallTextError
from lmpt.stopping import exit_code, stop_on, stopped_by

SHARD_KEY = "prepare.shard"
_part: tuple[int, int] | str = (0, 1)  # prepare.shard=i/N from the command line (the text when malformed)

# as lmpt-preview: command-line overrides, so no run directory is claimed; the user's overrides still come later
NO_RUN_DIRECTORY = ["hydra.run.dir=.", "hydra.output_subdir=null"]
MULTIRUN_FLAGS = ("-m", "--multirun")  # `lmpt-prepare -m hydra/launcher=slurm_cpu ...`: the prepare as a SLURM job


def prepare(cfg: DictConfig) -> None:
    """Build the configured data's tokenizer and token cache; print where they are and what they hold."""
    from lmpt.config.validate import validate_config  # heavy imports only once the config is composed
    from lmpt.data.cache import default_cache_root, prepare_part
    from lmpt.data.small_text import say_all
    from lmpt.downstream.run_tasks import quality_stage_for

    if isinstance(_part, str):
        raise LmptError(f"{SHARD_KEY}={_part} must be i/N with 0 <= i < N (for example {SHARD_KEY}=2/8)")
    validate_config(cfg)
    data_cfg, tokenizer_cfg = settings(cfg.data, DataConfig), settings(cfg.tokenizer, TokenizerConfig)
    quality = quality_stage_for(cfg.quality, cfg.downstream)
    cache_root = default_cache_root(cfg.data.cache_dir)
    try:
        data = prepare_part(data_cfg, tokenizer_cfg, Path.cwd(), cache_root, _part, quality=quality)
    except SmallTextError as first:  # every problem of a small text at once (lmpt.data.small_text)
        raise say_all(data_cfg, tokenizer_cfg, Path.cwd(), first) from None
    if data is None:
        console.print(f"part {_part[0]}/{_part[1]} sealed: the cache is complete once every part has run")
        return
    console.print(f"tokenizer: {data.tokenizer.path}")
    console.print(f"token cache: {data.cache_dir}")
    for source in data.sources:
        label = f"source {source.name}: " if source.name else ""
        train, val = source.train[1] - source.train[0], source.val[1] - source.val[0]
        console.print(f"{label}{train:,} train / {val:,} val tokens")


def parse_part(text: str) -> tuple[int, int] | str:
    """(i, N) from "i/N"; the text itself when it is not a valid part."""
    index, _, count = text.partition("/")
    if not (index.isdecimal() and count.isdecimal() and int(index) < int(count)):
        return text
    return int(index), int(count)


def main() -> None:
    """Take prepare.shard=i/N off the command line (it is no setting of the run), then run Hydra; SIGTERM ends it in
    one line (what it finished is kept: the same command resumes)."""
    global _part
    _part = (0, 1)  # this command's own, even where main runs twice in one process (as tests do)
    for arg in [a for a in sys.argv[1:] if a.startswith(f"{SHARD_KEY}=")]:
        sys.argv.remove(arg)
        _part = parse_part(arg.split("=", 1)[1])
    multirun = [a for a in sys.argv[1:] if a in MULTIRUN_FLAGS]  # before the overrides: argparse wants them together
    sys.argv[1:] = [*multirun, *NO_RUN_DIRECTORY, *[a for a in sys.argv[1:] if a not in MULTIRUN_FLAGS]]
    stop_on([signal.SIGTERM])
    try:
        run_hydra_app(prepare)
    except BaseException:
        if (stop := stopped_by()) is None:  # whatever exception the stop became on the way out (lmpt.stopping)
            raise
        print(
            f"lmpt-prepare: stopped by {stop.name}; run the same command to resume (what it finished is kept)",
            file=sys.stderr,
        )
        sys.exit(exit_code(stop))  # 75, as every lmpt command a scheduler may requeue


if __name__ == "__main__":
    main()
