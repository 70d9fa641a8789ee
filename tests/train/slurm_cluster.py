"""A one-node SLURM cluster brought up by scripts/slurm-local.sh (installed when missing), and the client commands
the tests drive it with."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SLURM_LOCAL = Path(__file__).resolve().parents[2] / "scripts" / "slurm-local.sh"


@dataclass(frozen=True)
class SlurmCluster:
    """A running local cluster: its config (exported as SLURM_CONF for the session) and state directory."""

    conf: Path
    directory: Path

    def command(self, *argv: str, check: bool = True) -> str:
        """Run a SLURM client command (squeue, scontrol, scancel, sinfo) against this cluster; its stdout."""
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ})
        if check:
            assert result.returncode == 0, f"{' '.join(argv)}: {result.stderr}"
        return result.stdout

    def job_state(self, job_id: str) -> str:
        """PENDING, RUNNING, COMPLETED, ... as `scontrol show job` reports it."""
        out = self.command("scontrol", "show", "job", job_id)
        return out.split("JobState=")[1].split()[0]

    def restarts(self, job_id: str) -> int:
        """How many times the job has been requeued."""
        return int(self.command("scontrol", "show", "job", job_id).split("Restarts=")[1].split()[0])


def start_cluster(directory: Path) -> SlurmCluster:
    """Bring up a cluster with its state in `directory` (fails the test, with the script's output, if it cannot)."""
    result = subprocess.run([str(SLURM_LOCAL), "start", str(directory)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{SLURM_LOCAL} start failed:\n{result.stdout}\n{result.stderr}"
    (export,) = [line for line in result.stdout.splitlines() if line.startswith("export SLURM_CONF=")]
    return SlurmCluster(Path(export.removeprefix("export SLURM_CONF=")), directory)


def stop_cluster(cluster: SlurmCluster) -> str:
    """Stop the cluster's daemons; the script's report."""
    result = subprocess.run(
        [str(SLURM_LOCAL), "stop", str(cluster.directory)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stderr
