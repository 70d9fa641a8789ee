"""Running a task as a Hydra app over lmpt's conf/ (the `lmpt`, `lmpt-preview` and `lmpt-prepare` commands):
every user error (a config typo, a bad value, a missing path) ends as one line on stderr and exit 2, and a sweep's
unfinished jobs set its exit code."""

from __future__ import annotations

import functools
import math
import os
import sys
import traceback
from pathlib import Path
from typing import NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from lmpt.config.errors import USER_ERRORS, describe
from lmpt.config.resolvers import register_resolvers
from lmpt.config.store import conf_dir, register_schemas
from lmpt.errors import LmptError
from lmpt.objectives.registry import register_objective_schemas
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


def _continue_runs(argv: list[str]) -> list[str]:
    """`lmpt trainer.resume=RUN` / `lmpt hydra.run.dir=RUN` compose RUN's own configuration (lmpt.config.resume),
    and a run directory that already exists is locked before Hydra writes anything into it."""
    from lmpt.config.resume import resumed_argv, run_dir_given
    from lmpt.rundir.lock import lock_run_dir

    run_dir = run_dir_given(argv)
    one_process = int(os.environ.get("WORLD_SIZE", "1")) <= 1 and int(os.environ.get("SLURM_NTASKS", "1")) <= 1
    if run_dir is not None and run_dir.is_dir() and one_process:  # ranks: rank 0 locks for all, once they know
        lock_run_dir(run_dir)  # a process training there is named before anything else is said
    return resumed_argv(argv)


def sweep_value(result: object) -> float | None:
    """What a sweep job reports to the sweeper: a finite float, else None, as for a failed job. None, not NaN:
    hydra-optuna-sweeper (1.3, on optuna 2.10, the pairing it pins) records a None as a failed trial and the
    study goes on, while a NaN makes its own failure handling raise and ends the whole study."""
    return float(result) if isinstance(result, (int, float)) and math.isfinite(result) else None


def run_hydra_app(task, config_name: str = "config", continue_runs: bool = False) -> None:
    """Run `task` as a Hydra app over lmpt's conf/, reporting user errors as one line with exit 2.
    `continue_runs`: the command line may name a run to resume (`lmpt` itself)."""
    register_schemas()
    register_objective_schemas()  # the objective group's schemas live beside the objectives
    register_resolvers()
    wants_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let exceptions reach us instead of Hydra's multi-line report

    def report(exc: BaseException) -> NoReturn:
        if wants_traceback:
            raise exc
        print(f"lmpt: error: {describe(exc)}", file=sys.stderr)
        sys.exit(2)

    @functools.wraps(task)
    def guarded_task(cfg: DictConfig):
        sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
        try:
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
        sys.exit(130)
    _exit_for_unfinished_jobs()


def _exit_for_unfinished_jobs() -> None:
    """After a sweep, counted from its jobs' status.json (a launcher may run them in other processes or machines):
    exit 2 when every unfinished job failed on bad input, 75 when every one was stopped and not requeued (the same
    command resumes them), else 1."""
    from lmpt.report.sweep import unfinished_jobs  # filled by the sweep-summary callback; empty otherwise
    from lmpt.train.preemption import EXIT_PREEMPTED

    stopped = unfinished_jobs.count("stopped")
    failed = len(unfinished_jobs) - stopped
    if failed:
        print(f"lmpt: {failed} sweep job(s) failed; the others ran", file=sys.stderr)
    if stopped:
        print(f"lmpt: {stopped} sweep job(s) stopped with a checkpoint and were not requeued: run the same command "
              "to resume them", file=sys.stderr)  # fmt: skip
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
