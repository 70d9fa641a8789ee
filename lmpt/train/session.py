"""One training launch's hold on its process group, run directory and GPU: `with training_session(strategy)`
opens the process group, and however the launch ends it closes the run log and releases the run directory's lock
and any claimed GPU; a launch that fails before its run started (bad input, a missing module, Ctrl-C) leaves no run
directory behind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from lmpt.rundir.directory import discard_if_fresh, release_run_dirs
from lmpt.rundir.log import close_run_log
from lmpt.train.distributed import Distributed, init_distributed
from lmpt.train.placement import release_claims


@dataclass(frozen=True)
class Session:
    ctx: Distributed
    """The process group (a single process when not under torchrun)."""
    hydra_dir: Path
    """The directory Hydra made for this launch (a resumed run may continue in another)."""

    @property
    def is_main(self) -> bool:
        return self.ctx.is_main


@contextmanager
def training_session(strategy: str) -> Iterator[Session]:
    hydra_dir = Path(HydraConfig.get().runtime.output_dir)
    ctx = init_distributed(strategy)
    try:
        yield Session(ctx, hydra_dir)
    except (Exception, KeyboardInterrupt) as exc:
        close_run_log(exc)
        if ctx.is_main and HydraConfig.get().mode != RunMode.MULTIRUN:
            discard_if_fresh(hydra_dir)  # a sweep keeps the failed job's folder
        raise
    finally:
        close_run_log()
        release_claims()
        release_run_dirs()
    ctx.close()
