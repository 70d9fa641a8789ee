"""A one-node SLURM cluster for the tests that need one (scripts/slurm-local.sh: installed when missing, started
once per session on first use, its own daemons stopped at the end)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from slurm_cluster import SlurmCluster, start_cluster, stop_cluster


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The session's cluster, with SLURM_CONF pointing at it (so lmpt's sbatch and the tests' squeue find it)."""
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        stop_cluster(cluster)  # its jobs cancelled first
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
