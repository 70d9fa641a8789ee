"""Resume in one command: `lmpt trainer.resume=RUN` or `lmpt hydra.run.dir=RUN` composes RUN's own saved
configuration, and the command line may change only the keys in MAY_CHANGE.

A resume continues the same experiment in the same run directory: same model, data, objective, optimizer and
seed, from the newest checkpoint, bit for bit. Starting a new stage from trained weights (fresh optimizer, new
data or objective) is not a resume: it is a new run in its own directory, composed from conf/ as usual.

How: before Hydra starts, the command line is rewritten to select the config-group options RUN was composed
with (RUN/.hydra/hydra.yaml) and to append RUN/config.yaml as the last default, so the saved values win over
conf/'s and only the command line's allowed overrides win over them. A command that retypes the original
overrides (a SLURM requeue of the same script) is accepted: an override equal to the saved value changes
nothing. A sweep (`-m`) is not rewritten: each job resumes its own directory with its own overrides."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from omegaconf import Container, OmegaConf

from lmpt.config.schema import LmptConfig
from lmpt.errors import LmptError
from lmpt.private_api import hydra_args_parser
from lmpt.safe_files import load_yaml

MAY_CHANGE = frozenset(
    {
        "trainer.max_steps",
        "trainer.budget",  # length
        "trainer.log_every",
        "trainer.progress",
        "trainer.tensorboard",
        "trainer.wandb",
        "trainer.wandb_project",
        "trainer.sample_tokens",  # logging
        "trainer.eval_every",
        "trainer.eval_batches",
        "downstream.score_every",  # evaluation
        "trainer.ckpt_every",
        "trainer.ckpt_minutes",
        "trainer.keep_last",
        "trainer.keep_best",  # checkpoints
        "trainer.device",  # device
        "data.num_workers",
        "data.tokenize_workers",
        "data.shard_docs",
        "data.cache_dir",
        "data.verify",  # workers, caches
        "data.allow_changed_text",  # this launch's answer to the run's text having changed
        "trainer.resume",
        "trainer.dry_run",
        "trainer.max_nonfinite_steps",  # how this launch starts and stops
    }
)
"""Keys a resumed run may set differently from the run it continues; every other key is the run's own."""

CONFIG_FILE = "config.yaml"  # written by lmpt.rundir.directory; named here so composing skips torch
HYDRA_RECORD = Path(".hydra") / "hydra.yaml"
GROUPS = tuple(field.name for field in dataclasses.fields(LmptConfig))
SAVED_GROUP = "lmpt_resumed_run"
_UNSET = object()


def resume_command(run_dir: Path, processes: int = 1) -> str:
    """The command that continues `run_dir` (what a graceful stop prints); `processes` > 1: under torchrun."""
    launcher = f"torchrun --nproc_per_node={processes} -m lmpt" if processes > 1 else "lmpt"
    return f"{launcher} trainer.resume={shlex.quote(str(run_dir))}"


def _run_to_resume(overrides: list[Override]) -> Path | None:
    """RUN when the command continues an existing run: trainer.resume=RUN (or a checkpoint in it), or a
    hydra.run.dir that already holds a run's saved config."""
    values = {o.key_or_group: o.value() for o in overrides if o.type == OverrideType.CHANGE}
    target = values.get("trainer.resume")
    if isinstance(target, str) and target not in ("auto", "never"):
        path = Path(target).expanduser().resolve()
        run = path.parent.parent if path.parent.name == "checkpoints" else path
        return run if (run / CONFIG_FILE).is_file() else None  # not a run: locate_run says why
    run_dir = values.get("hydra.run.dir")
    if isinstance(run_dir, str) and (Path(run_dir) / CONFIG_FILE).is_file():
        return Path(run_dir).expanduser().resolve()
    return None


def _refuse(run: Path, what: str, saved: object) -> LmptError:
    return LmptError(
        f"{what}: {run} continues with {saved!r}, and a resume may change only run length, logging, evaluation, "
        "checkpoint intervals, device and workers (`lmpt --help` lists the keys); start a new run (another "
        "hydra.run.dir) to change the rest"
    )


def _kept(override: Override, run: Path, saved: Container, choices: dict) -> bool:
    """Whether the resumed command keeps `override`; raises when it would change what the run is."""
    key = override.key_or_group
    if key == "hydra" or key.startswith(("hydra.", "hydra/")):
        if key == "hydra.run.dir" and Path(str(override.value())).expanduser().resolve() != run:
            raise LmptError(f"hydra.run.dir={override.value()} is not the run trainer.resume continues ({run})")
        return key != "hydra.run.dir"  # added below, resolved
    if override.type == OverrideType.DEL:
        raise _refuse(run, f"~{key}", OmegaConf.select(saved, key, default=None))
    if key in GROUPS:
        if override.value() != choices.get(key):
            raise _refuse(run, f"{key}={override.value()}", choices.get(key))
        return False
    if key in MAY_CHANGE:
        return True
    old = OmegaConf.select(saved, key, default=_UNSET)
    if old is _UNSET:
        return True  # not a key of this run: composing refuses it, naming the key
    old = OmegaConf.to_container(old) if OmegaConf.is_config(old) else old
    if override.is_sweep_override() or not _same_value(override.value(), old):
        raise _refuse(run, f"{key}={override.value()}", old)
    return False  # the saved value already


def _same_value(given: object, saved: object) -> bool:
    """`given` on the command line means `saved`: equal, or a path lmpt saved resolved (model.init_from=../a)."""
    if given == saved:
        return True
    if isinstance(given, str) and isinstance(saved, str) and Path(saved).is_absolute():
        return Path(given).expanduser().resolve() == Path(saved)
    return False


def _quoted(key: str, value: str) -> str:
    """`key=value` in Hydra's override grammar, quoting the value when it has to be."""
    plain = f"{key}={value}"
    try:
        if OverridesParser.create().parse_override(plain).value() == value:
            return plain
    except Exception:
        pass
    return f"{key}='{value.replace(chr(92), chr(92) * 2).replace(chr(39), chr(92) + chr(39))}'"


def _require_retyped(overrides: list[Override], run: Path) -> None:
    """A run without Hydra's record of its config groups resumes only from a command that retypes its
    configuration (a SLURM requeue of the original script); `lmpt trainer.resume=RUN` alone is refused."""
    retyped = [
        o for o in overrides if o.key_or_group not in MAY_CHANGE and not o.key_or_group.startswith(("hydra.", "hydra/"))
    ]
    if not retyped:
        raise LmptError(
            f"cannot resume {run} from its own configuration: {run / HYDRA_RECORD} (Hydra's record of the config "
            f"groups it was composed with) is missing; restore {run / HYDRA_RECORD.parent} from a copy of the run, "
            f"or retype the run's original overrides with trainer.resume={run}"
        )


def _last_of_each_key(overrides: list[Override]) -> list[Override]:
    """`overrides` with every key given more than once kept at its last setting, where it stood: Hydra composes
    `a=1 a=2` as `a=2`, and the resume check judges what the run composes (a study repeats its downstream keys)."""
    last = {(o.key_or_group, o.package): i for i, o in enumerate(overrides)}
    return [o for i, o in enumerate(overrides) if last[(o.key_or_group, o.package)] == i]


def resumed_overrides(overrides: list[str]) -> list[str]:
    """The overrides that compose the run `overrides` continue, or `overrides` unchanged for a new run."""
    parsed = _last_of_each_key(OverridesParser.create().parse_overrides(overrides))
    run = _run_to_resume(parsed)
    if run is None:
        return overrides  # a new run
    if not (run / HYDRA_RECORD).is_file():
        _require_retyped(parsed, run)
        return overrides  # the command retypes the run's configuration: the drift check guards it
    saved = load_yaml(run / CONFIG_FILE)
    choices = load_yaml(run / HYDRA_RECORD).hydra.runtime.choices
    kept = [o.input_line for o in parsed if o.input_line is not None and _kept(o, run, saved, choices)]
    ConfigStore.instance().store(group=SAVED_GROUP, name="config", node=saved, package="_global_")
    groups = [f"{group}={choices[group]}" for group in GROUPS if choices.get(group)]
    # hydra.output_subdir=null: RUN/.hydra keeps the record of the launch that started the run
    return [*groups, f"+{SAVED_GROUP}=config", *kept, _quoted("hydra.run.dir", str(run)), "hydra.output_subdir=null"]


def _single_run(argv: list[str]):
    """The parsed command line of a single training run, or None (a sweep, help, --info, no overrides)."""
    args = hydra_args_parser().parse_args(argv[1:])
    if args.multirun or args.help or args.hydra_help or args.info or args.shell_completion or not args.overrides:
        return None
    return args


def run_dir_given(argv: list[str]) -> Path | None:
    """The run directory a single training run names (trainer.resume=RUN or hydra.run.dir), or None (a sweep,
    --cfg, or Hydra picks a new one)."""
    args = _single_run(argv)
    if args is None or args.cfg:
        return None
    overrides = OverridesParser.create().parse_overrides(args.overrides)
    run = _run_to_resume(overrides)
    for override in overrides:
        value = override.value()
        if run is None and override.key_or_group == "hydra.run.dir" and isinstance(value, str) and "${" not in value:
            run = Path(value).expanduser().resolve()
    return run


def resumed_argv(argv: list[str]) -> list[str]:
    """`argv` (program name first) with its overrides replaced by `resumed_overrides`, for a single run."""
    args = _single_run(argv)
    if args is None:
        return argv
    rest, pending = [], list(args.overrides)
    for token in argv[1:]:  # overrides are positional: drop them wherever they stand, keep the flags
        if pending and token == pending[0]:
            pending.pop(0)
        else:
            rest.append(token)
    return [argv[0], *rest, *resumed_overrides(args.overrides)]
