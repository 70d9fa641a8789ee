"""The `lmpt-study` command: a Hydra app over lmpt's conf/ (conf/study.yaml: an lmpt run's groups plus `study.*`)
that compares objectives fairly. It checks the whole study and its slots first (bad input: one line, exit 2, nothing
written), then per objective searches the learning rate on a share of the largest budget (lmpt.study.runs), then
trains every objective at its chosen recipe at each budget for every seed with the downstream tasks scored
(lmpt.study.runs), each as a subprocess of the real `lmpt` (or a SLURM job), one at a time or side by side over its
slots (lmpt.study.pool, lmpt.study.runs), and writes study.json and study.md (lmpt.study.record). The same
command resumes a killed study: finished trials and completed runs are reused, an interrupted one continues from its
checkpoint. The study directory is held by one study at a time (lmpt.study.pool), and a stop signal stops the runs
in flight with a checkpoint, then the study, in one line."""

from __future__ import annotations

import sys

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from lmpt.app import exit_process, run_hydra_app
from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.stopping import exit_code, stop_on, stopped_by

# as lmpt-prepare: the study app itself claims no run directory (its runs get their own, under study.dir)
NO_RUN_DIRECTORY = ["hydra.run.dir=.", "hydra.output_subdir=null"]


def refuse_hydra_keys(argv: list[str]) -> str | None:
    """Why the command line may not carry `argv`'s Hydra settings (a run or sweep directory, a launcher, -m), or
    None: the study launches its runs itself, into study.dir."""
    for arg in argv:
        key = arg.split("=", 1)[0].lstrip("+~")
        if key in ("-m", "--multirun"):
            return f"{arg}: lmpt-study runs its trials and final runs itself; drop {arg}"
        if key.startswith(("hydra.", "hydra/")):
            return (
                f"{arg}: lmpt-study launches its runs itself, each into its own directory under study.dir; "
                "drop it (give study.dir=DIR for where the study writes)"
            )
    return None


def study(cfg: DictConfig) -> int:
    """Plan (check) the study and its slots, run what it still lacks over the slots, and write its record; returns
    the exit code: 0 when every final run completed, 1 otherwise."""
    from lmpt.study.plan import plan_study, record_recipes
    from lmpt.study.pool import (
        LocalPool,
        SlurmPool,
        lock_study,
        plan_slots,
        stop_left_run,
    )
    from lmpt.study.record import refuse_another_study, write_study
    from lmpt.study.runs import StudyRuns, refuse_sweep_layout

    stop_on()
    try:  # LmptError here: bad input, exit 2
        slots = plan_slots(cfg.study)  # the slots first: a bad one is refused before the plan sizes any run
        jobs = None
        if cfg.study.launcher == "slurm":
            from lmpt.study.pool import job_parameters

            jobs = job_parameters(cfg.study.slurm, str(cfg.study.slot_device) == "gpu")
        plan = plan_study(cfg, list(HydraConfig.get().overrides.task))
    except BaseException:
        if (stop := stopped_by()) is None:  # whatever exception the stop became on the way out (lmpt.stopping)
            raise
        print(f"lmpt-study: stopped by {stop.name} while planning; nothing was written", file=sys.stderr)
        return exit_code(stop)
    if cfg.trainer.dry_run:  # the plan alone: nothing run, nothing written
        from lmpt.study.dry_run import print_study_plan

        print_study_plan(plan, slots)
        return 0
    refuse_sweep_layout(plan)
    refuse_another_study(plan)
    plan.directory.mkdir(parents=True, exist_ok=True)
    lock_study(plan.directory)
    record_recipes(plan)  # before any run: every later launch reads them back
    pool = LocalPool(plan.directory, slots) if jobs is None else SlurmPool(plan.directory, len(slots), jobs)
    runs = StudyRuns(plan, pool, lambda searches, finals: write_study(plan, searches, finals))
    if jobs is not None:
        console.print(f"SLURM jobs, up to {len(slots)} at once: {', '.join(f'{k}={v}' for k, v in jobs.items())}")
    elif pool.side_by_side:
        console.print(f"{len(slots)} slots: {', '.join(s.name for s in slots)}")
    try:
        stop_left_run(plan.directory)
        if len(slots) > 1:  # runs side by side would each tokenise the same text: once, before them
            prepare_data(plan)
        runs.run()
    except LmptError as exc:  # after the checks a failure is no bad input: it is reported, the record kept
        runs.write()
        print(f"lmpt-study: error: {exc}", file=sys.stderr)
        return 1
    except BaseException:
        if (stop := stopped_by()) is None:  # whatever exception the stop became on the way out (lmpt.stopping)
            raise
        runs.write()  # the runs in flight saved a checkpoint and ended first (lmpt.study.pool)
        print(
            f"lmpt-study: stopped by {stop.name}; run the same command to resume the study (finished runs "
            "are kept, the stopped ones continue from their checkpoints)",
            file=sys.stderr,
        )
        return exit_code(stop)
    finals = runs.finals()
    path = write_study(plan, runs.searches, finals)
    unfinished = [
        f"{f.objective} seed {f.seed} ({f.status})" for fs in finals.values() for f in fs if f.status != "completed"
    ]
    console.print(f"wrote {path} and {path.with_name('study.md').name}")
    if unfinished:
        print(
            f"lmpt-study: {len(unfinished)} final run(s) did not complete: {', '.join(unfinished)}; run the same "
            "command to resume them",
            file=sys.stderr,
        )
        return 1
    return 0


def prepare_data(plan) -> None:
    """`lmpt-prepare` with each objective's run keys (its tokenizer and token cache, the quality stage, a Hub corpus),
    one after another (lmpt.prepare.step); a cache already built is reused at once."""
    from lmpt.prepare.step import prepare

    for objective in plan.objectives:
        prepare([*plan.run_overrides, f"objective={objective}"], said=f"preparing the data of {objective}'s runs")


def main() -> None:
    """Register the study's schema, take the study's own run directory off the table, and run Hydra."""
    from lmpt.study.schema import register_study_schema

    register_study_schema()
    refusal = refuse_hydra_keys(sys.argv[1:])
    if refusal is not None:  # before Hydra, which would make the directory it names
        print(f"lmpt: error: {refusal}", file=sys.stderr)
        exit_process(2)
    sys.argv[1:1] = NO_RUN_DIRECTORY
    code = 0

    def task(cfg: DictConfig) -> None:
        nonlocal code
        code = study(cfg)

    try:
        run_hydra_app(task, config_name="study")
    except SystemExit as exc:
        exit_process(exc.code)
    exit_process(code)


if __name__ == "__main__":
    main()
