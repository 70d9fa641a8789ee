"""The `lmpt-study` command: a Hydra app over lmpt's conf/ (conf/study.yaml: an lmpt run's groups plus `study.*`)
that compares objectives fairly. It checks the whole study first (bad input: one line, exit 2, nothing written),
then per objective searches the learning rate on a share of the largest budget (lmpt.study.search), then trains every
objective at its chosen recipe at each budget for every seed with the downstream tasks scored
(lmpt.study.finals), each as a subprocess of the real `lmpt`, one at a time, and writes study.json and study.md
(lmpt.study.record). The same command resumes a killed study: finished trials and completed runs are reused."""

from __future__ import annotations

import sys

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from lmpt.app import exit_process, run_hydra_app
from lmpt.console import console
from lmpt.errors import LmptError

# as lmpt-prepare: the study app itself claims no run directory (its runs get their own, under study.dir)
NO_RUN_DIRECTORY = ["hydra.run.dir=.", "hydra.output_subdir=null"]


def study(cfg: DictConfig) -> int:
    """Plan (check) the study, run what it still lacks, and write its record; returns the exit code: 0 when every
    final run completed, 1 otherwise."""
    from lmpt.study.finals import run_final
    from lmpt.study.plan import plan_study
    from lmpt.study.record import refuse_another_study, write_study
    from lmpt.study.search import run_search

    plan = plan_study(cfg, list(HydraConfig.get().overrides.task))  # LmptError here: bad input, exit 2
    refuse_another_study(plan)
    plan.directory.mkdir(parents=True, exist_ok=True)
    searches, finals = {}, {}
    try:
        for name in plan.objectives:
            searches[name] = run_search(plan, name)
            write_study(plan, searches, finals)
        for budget in plan.budgets:  # the smallest first: every objective has figures at it before the next
            for name in plan.objectives:
                recipe = searches[name].chosen().recipe
                finals.setdefault(name, []).extend(run_final(plan, budget, name, seed, recipe) for seed in plan.seeds)
    except LmptError as exc:  # after the checks a failure is no bad input: it is reported, the record kept
        write_study(plan, searches, finals)
        print(f"lmpt-study: error: {exc}", file=sys.stderr)
        return 1
    path = write_study(plan, searches, finals)
    unfinished = [f"{f.objective} seed {f.seed} ({f.status})" for fs in finals.values() for f in fs
                  if f.status != "completed"]  # fmt: skip
    console.print(f"wrote {path} and {path.with_name('study.md').name}")
    if unfinished:
        print(f"lmpt-study: {len(unfinished)} final run(s) did not complete: {', '.join(unfinished)}; run the same "
              "command to resume them", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def main() -> None:
    """Register the study's schema, take the study's own run directory off the table, and run Hydra."""
    from lmpt.study.schema import register_study_schema

    register_study_schema()
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
