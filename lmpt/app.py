"""Running a task as a Hydra app over lmpt's conf/ (the `lmpt`, `lmpt-preview` and `lmpt-prepare` commands):
every user error (a config typo, a bad value, a missing path) ends as one line on stderr and exit 2, and a sweep's
unfinished jobs set its exit code."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn, cast

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from rich.markup import escape

from lmpt.config.errors import USER_ERRORS, describe
from lmpt.config.resolvers import register_resolvers
from lmpt.config.store import conf_dir, register_schemas
from lmpt.console import info
from lmpt.errors import LmptError
from lmpt.objectives.registry import register_objective_schemas
from lmpt.private_api import BASIC_SWEEPER, basic_sweep_jobs, hydra_args_parser
from lmpt.stopping import EXIT_INTERRUPTED, EXIT_PREEMPTED
from lmpt.train.slurm import sbatch_refusal, without_sbatch_echo

register_resolvers()  # also in launcher worker processes, which import this module to run the task


def _failed_job(exc: BaseException, user_error: bool) -> None:
    """In a sweep a job that did not complete is reported and recorded in its status.json, for the sweep's exit
    code: failed (on bad input or not), or preempted (stopped with a checkpoint and not requeued). The remaining
    jobs still run."""
    from lmpt.rundir.directory import write_status
    from lmpt.train.preemption import NotRequeued

    hydra = HydraConfig.get()
    line = describe(exc) if user_error else f"{type(exc).__name__}: {exc}"
    if not user_error:
        traceback.print_exception(exc)
    print(f"lmpt: error: job {hydra.job.num} ({' '.join(hydra.overrides.task)}): {line}", file=sys.stderr)
    status = "preempted" if isinstance(exc, NotRequeued) else "failed"
    write_status(Path(hydra.runtime.output_dir), status, error=line, user_error=user_error)


def _parsed(overrides: list[str]) -> list[Override] | None:
    """`overrides` as Hydra's override parser reads them (with the config loader, for glob sweeps), or None."""
    loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
    try:
        return OverridesParser.create(config_loader=loader).parse_overrides(overrides)
    except HydraException:
        return None


def sweep_overrides(hydra_cfg: DictConfig) -> list[Override] | None:
    """The sweep's own overrides (the sweeper's `params`, then its command line), from the multirun.yaml the sweeper
    wrote into the sweep directory before launching (a launcher may run this job in another process or on another
    machine, which shares that directory); None where there is none to read."""
    from lmpt.safe_files import load_yaml

    try:
        multirun = load_yaml(Path(hydra_cfg.sweep.dir) / "multirun.yaml")
        params = multirun.hydra.sweeper.get("params")
        params = OmegaConf.to_container(params, resolve=False) if params else {}
        arguments = OmegaConf.to_container(multirun.hydra.overrides.task, resolve=False)
        assert isinstance(params, dict) and isinstance(arguments, list)
    except (OSError, LmptError, OmegaConfBaseException):
        return None
    return _parsed([*(f"{k!s}={v}" for k, v in params.items()), *arguments])


def sweep_size(hydra_cfg: DictConfig, overrides: list[Override] | None) -> int | None:
    """How many jobs the sweep runs: under Hydra's basic sweeper the product of its sweep overrides' values, counted
    as the sweeper counts them (BasicSweeper.split_arguments); None for other sweepers (optuna decides as it goes) or
    when the sweep's overrides cannot be read."""
    if overrides is None or hydra_cfg.sweeper.get("_target_") != BASIC_SWEEPER:
        return None
    try:
        return basic_sweep_jobs(overrides)
    except HydraException:
        return None


def job_header(hydra_cfg: DictConfig) -> str:
    """`job 2/3: objective=mlm objective.mask_prob=0.15`: a sweep job's place in the sweep (1-based; its directory is
    named by the 0-based hydra.job.num) and its values of the keys the sweep varies (all its overrides where the
    sweep's cannot be read). `job 2` alone where the sweep's size is unknown."""
    overrides = sweep_overrides(hydra_cfg)
    size = sweep_size(hydra_cfg, overrides)
    own = list(hydra_cfg.overrides.task)
    if overrides is not None:
        swept = {o.get_key_element() for o in overrides if o.is_sweep_override()}
        keys = [o.get_key_element() for o in _parsed(own) or ()]
        own = [text for text, key in zip(own, keys, strict=True) if key in swept] if len(keys) == len(own) else own
    place = f"{hydra_cfg.job.num + 1}" + (f"/{size}" if size else "")
    return f"job {place}: {' '.join(own)}" if own else f"job {place}"


def _continue_runs(argv: list[str]) -> list[str]:
    """`lmpt trainer.resume=RUN` / `lmpt hydra.run.dir=RUN` compose RUN's own configuration (lmpt.config.resume),
    and a run directory that already exists is locked before Hydra writes anything into it."""
    from lmpt.config.resume import resumed_argv, run_dir_given
    from lmpt.rundir.directory import lock_run_dir

    run_dir = run_dir_given(argv)
    one_process = int(os.environ.get("WORLD_SIZE", "1")) <= 1 and int(os.environ.get("SLURM_NTASKS", "1")) <= 1
    if run_dir is not None and run_dir.is_dir() and one_process:  # ranks: rank 0 locks for all, once they know
        lock_run_dir(run_dir)  # a process training there is named before anything else is said
    return resumed_argv(argv)


def _check_launcher_overrides(argv: list[str]) -> None:
    """The command line's launcher settings Hydra hands on unread, checked before the sweeper writes anything:
    hydra/launcher=parallel's n_jobs is a whole number of at least 1, or joblib's -1 (every core; joblib reads -5 as
    every core but 4, which on a small machine is none)."""
    args, _ = hydra_args_parser().parse_known_args(argv[1:])
    for override in _parsed(args.overrides or []) or ():
        if override.key_or_group == "hydra.launcher.n_jobs" and not override.is_sweep_override():
            jobs = override.value()
            if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs == 0 or jobs < -1:
                raise LmptError(
                    f"hydra.launcher.n_jobs={override.get_value_element_as_str()} is no number of jobs to run at "
                    "once: give a whole number of at least 1 (or -1: as many as there are cores)"
                )


def sweep_value(result: object) -> float | None:
    """What a sweep job reports to the sweeper: a finite float, else None, as for a failed job. None, not NaN:
    hydra-optuna-sweeper (1.3, on optuna 2.10, the pairing it pins) records a None as a failed trial and the
    study goes on, while a NaN makes its own failure handling raise and ends the whole study."""
    return float(result) if isinstance(result, (int, float)) and math.isfinite(result) else None


@contextlib.contextmanager
def _environment_value(name: str, value: str | None) -> Iterator[None]:
    """`name` set to `value` (unset for None) in this process's environment for the body, then as it was. The
    task runs with the user's own HYDRA_FULL_ERROR: the runs a study launches report their errors in one line, as
    they do alone, while Hydra around the task still hands every exception to run_hydra_app."""
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def run_hydra_app(task, config_name: str = "config", continue_runs: bool = False) -> None:
    """Run `task` as a Hydra app over lmpt's conf/, reporting user errors as one line with exit 2.
    `continue_runs`: the command line may name a run to resume (`lmpt` itself)."""
    register_schemas()
    register_objective_schemas()  # the objective group's schemas live beside the objectives
    register_resolvers()
    users_setting = os.environ.get("HYDRA_FULL_ERROR")
    wants_traceback = users_setting == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let exceptions reach us instead of Hydra's multi-line report

    def report(exc: BaseException) -> NoReturn:
        if wants_traceback:
            raise exc
        print(f"lmpt: error: {describe(exc)}", file=sys.stderr)
        sys.exit(2)

    @functools.wraps(task)
    def guarded_task(cfg: DictConfig):
        sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
        if sweeping:
            info(f"[bold]{escape(job_header(cast(DictConfig, HydraConfig.get())))}[/]")  # a DictConfig at run time
        try:
            with _environment_value("HYDRA_FULL_ERROR", users_setting):  # what the task's own child processes see
                return sweep_value(task(cfg)) if sweeping else task(cfg)
        except USER_ERRORS as exc:  # reported here: a failed Hydra job would add its own stderr lines
            if not sweeping:
                report(exc)
            _failed_job(exc, user_error=True)
        except Exception as exc:
            if not sweeping:
                raise
            _failed_job(exc, user_error=False)
        return None

    app = hydra.main(config_path=str(conf_dir()), config_name=config_name, version_base=None)(guarded_task)
    try:
        _check_launcher_overrides(sys.argv)
        if continue_runs:
            sys.argv = _continue_runs(sys.argv)
        with without_sbatch_echo():
            app()
    except USER_ERRORS as exc:  # composition: unknown keys and options, wrong types
        report(exc)
    except Exception as exc:  # a launcher's failure: sbatch refusing the jobs is the user's to fix
        refusal = sbatch_refusal(exc)
        if refusal is None:
            raise
        report(LmptError(refusal))
    except KeyboardInterrupt as exc:  # the second Ctrl-C: no traceback, the conventional exit status
        print(f"lmpt: aborted{f': {exc}' if str(exc) else ''}", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    _exit_for_unfinished_jobs()


def _exit_for_unfinished_jobs() -> None:
    """After a sweep, counted from its jobs' status.json (a launcher may run them in other processes or machines):
    exit 2 when every unfinished job failed on bad input, 75 when every one was stopped and not requeued (the same
    command resumes them), else 1."""
    from lmpt.report.sweep import unfinished_jobs  # filled by the sweep-summary callback; empty otherwise

    stopped = unfinished_jobs.count("stopped")
    failed = len(unfinished_jobs) - stopped
    if failed:
        print(f"lmpt: {failed} sweep job(s) failed; the others ran", file=sys.stderr)
    if stopped:
        print(
            f"lmpt: {stopped} sweep job(s) stopped with a checkpoint and were not requeued: run the same command "
            "to resume them",
            file=sys.stderr,
        )
    if unfinished_jobs:
        every = set(unfinished_jobs)
        sys.exit(2 if every == {"bad input"} else EXIT_PREEMPTED if every == {"stopped"} else 1)


def exit_process(code: int | str | None) -> NoReturn:
    """Leave with `code`. A torchrun worker skips the interpreter's teardown, where gloo's worker threads can
    abort the process (pytorch/pytorch#190489) and turn a clean exit, or the requeue code 75, into SIGABRT;
    everything lmpt writes is flushed and committed before this point."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))
    sys.exit(code)
