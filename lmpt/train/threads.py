"""How many intra-op threads a run takes: the count its slot gives it, else the cores free of other work, so that
runs side by side (a study's slots, a test suite beside a run, two users on one machine) do not oversubscribe the
cores (two runs each taking every core of 2 crawl 10-25 times slower than one alone).

In order, the first that is set wins:
- `LMPT_THREADS`: the count a slot (lmpt-study, a launcher, a script) or the user forces;
- `OMP_NUM_THREADS`: the user's usual knob, which torch has already obeyed;
- the cores this process may run on (its CPU affinity: a slot's group of cores) less those other processes keep
  busy now (lmpt.cores.busy_cores), at least one."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from lmpt.cores import busy_cores, usable_cores
from lmpt.errors import LmptError

FORCE_VAR = "LMPT_THREADS"
"""The environment variable that sets a run's thread count outright (a slot's, or the user's)."""

BUSY_ROUNDING = 0.35
"""Other work counts as a busy core from this share of one up: a core's idle fraction is noisy over a short sample."""


@dataclass(frozen=True)
class Threads:
    """The intra-op threads a run takes and why, in words for its start line."""

    count: int
    why: str

    def describe(self) -> str:
        """E.g. "1 thread (2 cores, 1 busy with other work)"."""
        return f"{self.count} thread{'s' * (self.count != 1)} ({self.why})"


def _forced(env: Mapping[str, str], name: str) -> int | None:
    """The positive count `name` holds in `env`, None when it is unset or empty; anything else refused in one line."""
    value = env.get(name, "").strip()
    if not value:
        return None
    if not value.isdecimal() or int(value) < 1:
        raise LmptError(f"{name}={value!r} is not a thread count: give a whole number of at least 1, or unset it")
    return int(value)


def _cores(n: int) -> str:
    return f"{n} core{'s' * (n != 1)}"


def choose_threads(
    env: Mapping[str, str],
    cores: Callable[[], int] = usable_cores,
    busy: Callable[[], float | None] = busy_cores,
) -> Threads:
    """The threads a run takes (see the module's docstring), from `env` and the cores' state now."""
    for name in (FORCE_VAR, "OMP_NUM_THREADS"):
        forced = _forced(env, name)
        if forced is not None:
            return Threads(forced, f"{name}={forced}")
    usable = cores()
    machine = os.cpu_count() or usable
    where = f"{_cores(usable)} of this process's affinity" if usable < machine else _cores(usable)
    load = busy()
    if load is None:
        return Threads(usable, f"{where}, their load unknown")
    taken = min(usable, math.floor(load + 1 - BUSY_ROUNDING))
    count = max(1, usable - taken)
    return Threads(count, f"{where}, {taken} busy with other work" if taken else f"{where}, all free")


def take_threads(env: Mapping[str, str] | None = None) -> Threads:
    """Choose the run's threads from `env` (default: this process's environment) and set them in torch."""
    threads = choose_threads(os.environ if env is None else env)
    if torch.get_num_threads() != threads.count:
        torch.set_num_threads(threads.count)
    return threads
