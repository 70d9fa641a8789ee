"""`python tests/train/fault_runner.py <lmpt args>`: the real `lmpt` command with faults injected at
deterministic points, chosen by environment variables (all optional; none set = plain `lmpt`):

LMPT_TEST_KILL_AFTER_BACKWARD=N   SIGKILL this process right after its N-th `Tensor.backward` (with
                                  trainer.grad_accum=A and N % A != 0 the kill lands between micro-steps)
LMPT_TEST_KILL_AT_FAULT=K         SIGKILL at the K-th fault point inside `CheckpointStore.save` (counted
                                  over the whole process): before/after each torch.save, safetensors write,
                                  fsync, json.dump,
                                  rename and rmtree, and in the middle of a file or of a directory removal
LMPT_TEST_FAULT_TRACE=path        append the label of every fault point passed to `path` (one per line)
LMPT_TEST_DROP_STATE=piece        on resume, leave one piece of the checkpoint unrestored: model, optimizer,
                                  scheduler, scaler, rng or data_position
LMPT_TEST_NAN_AT_STEPS=3,4        make the training loss NaN at these (1-based) optimizer steps
LMPT_TEST_FULL_DISK_AT_SAVE=N     the N-th checkpoint's optimizer.pt is written to /dev/full: a real ENOSPC
                                  from the kernel, inside torch.save
LMPT_TEST_SIGINT_IN_SAVE=N        two real SIGINTs (Ctrl-C twice) while torch.save writes the N-th checkpoint
LMPT_TEST_TRACE_WINDOWS=path      append "step micro_step" to `path` for every training batch the sampler makes
LMPT_TEST_CPU_FLAGS=avx2,fma        the CPU feature flags lmpt sees instead of /proc/cpuinfo's (another kind of CPU)
LMPT_TEST_FAST_PEAK=1             skip the CPU matmul peak measurement behind MFU (a constant instead): it
                                  takes ~15 s in fp16 on one CPU thread and feeds no loss or weight
"""

from __future__ import annotations

import copy
import io
import os
import signal
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import lmpt from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_after_backward(n: int) -> None:
    import torch

    real_backward = torch.Tensor.backward
    calls = 0

    def backward(self, *args, **kwargs):
        nonlocal calls
        real_backward(self, *args, **kwargs)
        calls += 1
        if calls == n:
            _die()

    torch.Tensor.backward = backward


class _FaultPoints:
    """Counts fault points while a checkpoint is being saved; dies at the chosen one."""

    def __init__(self, kill_at: int | None, trace: str | None) -> None:
        self.kill_at, self.trace = kill_at, trace
        self.count, self.active = 0, False

    def point(self, label: str) -> bool:
        """Pass a fault point; True when this is the one to die at (the caller dies its own way)."""
        if not self.active:
            return False
        self.count += 1
        if self.trace:
            with open(self.trace, "a") as f:
                f.write(f"{self.count} {label}\n")
        return self.count == self.kill_at

    def install(self) -> None:
        import json
        import shutil

        import safetensors.torch
        import torch

        import lmpt.rundir.checkpoint as ckpt

        faults = self
        real_save, real_fsync, real_dump = torch.save, os.fsync, json.dump
        real_rename, real_rmtree, real_store_save = os.rename, shutil.rmtree, ckpt.CheckpointStore.save
        real_save_file = safetensors.torch.save_file

        def store_save(store, *args, **kwargs):
            faults.active = True
            try:
                return real_store_save(store, *args, **kwargs)
            finally:
                faults.active = False

        def save(obj, f, *args, **kwargs):
            if faults.point("before torch.save"):
                _die()
            if faults.active and faults.kill_at == faults.count + 1:  # mid-file: half the bytes, then die
                faults.point("mid torch.save")
                buffer = io.BytesIO()
                real_save(obj, buffer, *args, **kwargs)
                data = buffer.getvalue()
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
                _die()
            faults.point("mid torch.save")
            real_save(obj, f, *args, **kwargs)
            if faults.point("after torch.save"):
                _die()

        def save_file(tensors, filename, metadata=None):
            if faults.point("before safetensors write"):
                _die()
            if faults.point("mid safetensors write"):  # half the bytes, then die
                data = safetensors.torch.save(tensors, metadata)
                with open(filename, "wb") as f:
                    f.write(data[: len(data) // 2])
                    f.flush()
                    real_fsync(f.fileno())
                _die()
            real_save_file(tensors, filename, metadata=metadata)
            if faults.point("after safetensors write"):
                _die()

        def fsync(fd):
            if faults.point("before fsync"):
                _die()
            real_fsync(fd)
            if faults.point("after fsync"):
                _die()

        def dump(obj, f, *args, **kwargs):
            if faults.point("before json.dump"):
                _die()
            if faults.point("mid json.dump"):
                text = json.dumps(obj, *args, **kwargs)
                f.write(text[: len(text) // 2])
                f.flush()
                _die()
            real_dump(obj, f, *args, **kwargs)
            if faults.point("after json.dump"):
                _die()

        def rename(src, dst, *args, **kwargs):
            if faults.point(f"before rename {Path(src).name} -> {Path(dst).name}"):
                _die()
            real_rename(src, dst, *args, **kwargs)
            if faults.point(f"after rename {Path(src).name} -> {Path(dst).name}"):
                _die()

        def rmtree(path, *args, **kwargs):
            if faults.point(f"before rmtree {Path(path).name}"):
                _die()
            if faults.point(f"mid rmtree {Path(path).name}"):
                if Path(path).is_dir():  # half the files gone, then death
                    files = sorted(p for p in Path(path).iterdir() if p.is_file())
                    for p in files[: max(1, len(files) // 2)]:
                        p.unlink()
                _die()
            real_rmtree(path, *args, **kwargs)
            if faults.point(f"after rmtree {Path(path).name}"):
                _die()

        ckpt.CheckpointStore.save = store_save
        torch.save = save
        safetensors.torch.save_file = save_file
        os.fsync = fsync
        json.dump = dump
        os.rename = rename
        shutil.rmtree = rmtree


def _drop_state(piece: str) -> None:
    """Resume as if `piece` had been left out of the checkpoint: whatever the fresh process had stays."""
    import torch

    import lmpt.train.batches as batches_module
    from lmpt.train.batches import StepBatches
    from lmpt.train.loop import TrainLoop

    pieces = ("model", "optimizer", "scheduler", "scaler", "rng", "data_position")
    if piece not in pieces:
        raise SystemExit(f"LMPT_TEST_DROP_STATE={piece}: expected one of {pieces}")
    if piece == "data_position":

        class FromTheStart(StepBatches):
            def __init__(self, sampler, objective, start_step, max_steps):
                super().__init__(sampler, objective, 0, max_steps - start_step)

        batches_module.StepBatches = FromTheStart  # what lmpt.train.run builds its step loader from
        return

    real_restore = TrainLoop.restore

    def restore(loop, checkpoint):
        fresh = {
            "model": lambda: copy.deepcopy(loop.model.state_dict()),
            "optimizer": lambda: copy.deepcopy(loop.optimizer.state_dict()),
            "scheduler": lambda: copy.deepcopy(loop.scheduler.state_dict()),
            "scaler": lambda: copy.deepcopy(loop.scaler.state_dict()),
            "rng": torch.get_rng_state,
        }[piece]()
        real_restore(loop, checkpoint)
        if piece == "model":
            loop.model.load_state_dict(fresh)
        elif piece == "optimizer":
            loop.optimizer.load_state_dict(fresh)
        elif piece == "scheduler":
            loop.scheduler.load_state_dict(fresh)
        elif piece == "scaler":
            loop.scaler = loop.precision.grad_scaler()
        else:
            torch.set_rng_state(fresh)

    TrainLoop.restore = restore


def _nan_at_steps(steps: set[int]) -> None:
    from lmpt.train.loop import TrainLoop

    real_step = TrainLoop.train_step

    def train_step(loop, micro_batches):
        if loop.state.step + 1 not in steps:
            return real_step(loop, micro_batches)
        objective = loop.objective
        real_loss = objective.loss

        def nan_loss(out, batch):
            loss, stats = real_loss(out, batch)
            return loss * float("nan"), stats

        objective.loss = nan_loss
        try:
            return real_step(loop, micro_batches)
        finally:
            del objective.loss  # back to the class's method

    TrainLoop.train_step = train_step


def _in_nth_save(n: int, staged) -> None:
    """Call `staged(staging_directory)` once the N-th checkpoint's staging directory exists."""
    import lmpt.rundir.checkpoint as ckpt

    real_begin = ckpt.CheckpointStore.begin
    saves = 0

    def begin(store, step):
        nonlocal saves
        tmp = real_begin(store, step)
        saves += 1
        if saves == n:
            staged(tmp)
        return tmp

    ckpt.CheckpointStore.begin = begin


def _full_disk_at_save(n: int) -> None:
    _in_nth_save(n, lambda tmp: (tmp / "optimizer.pt").symlink_to("/dev/full"))


def _sigint_in_save(n: int) -> None:
    import time

    import torch

    real_save, armed = torch.save, []

    class CtrlCTwice:
        """The file torch.save writes to; its first write is where both Ctrl-C's land."""

        def __init__(self, f) -> None:
            self.f = f

        def write(self, data):
            if armed:
                armed.clear()
                for _ in range(2):  # the second one, while the first's checkpoint is being written
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.05)  # the handler runs here
            return self.f.write(data)

        def flush(self):
            return self.f.flush()

    def save(obj, f, *args, **kwargs):
        return real_save(obj, CtrlCTwice(f) if armed else f, *args, **kwargs)

    torch.save = save
    _in_nth_save(n, lambda tmp: armed.append(True))


def _trace_windows(path: str) -> None:
    from lmpt.data.sampler import WindowSampler

    real_windows = WindowSampler.windows

    def windows(sampler, step, micro_step=0):
        with open(path, "a") as f:
            f.write(f"{step} {micro_step}\n")
        return real_windows(sampler, step, micro_step)

    WindowSampler.windows = windows


def _fast_peak() -> None:
    import lmpt.train.metrics as efficiency

    efficiency.measured_matmul_peak = lambda device_type, dtype: 1e11


def _cpu_flags(flags: str) -> None:
    import lmpt.train.precision as precision

    precision.cpu_flags = lambda: frozenset(flags.split(","))


def install_from_environment() -> None:
    env = os.environ
    if env.get("LMPT_TEST_CPU_FLAGS"):
        _cpu_flags(env["LMPT_TEST_CPU_FLAGS"])
    if env.get("LMPT_TEST_FAST_PEAK"):
        _fast_peak()
    if env.get("LMPT_TEST_KILL_AFTER_BACKWARD"):
        _kill_after_backward(int(env["LMPT_TEST_KILL_AFTER_BACKWARD"]))
    if env.get("LMPT_TEST_KILL_AT_FAULT") or env.get("LMPT_TEST_FAULT_TRACE"):
        kill_at = int(env["LMPT_TEST_KILL_AT_FAULT"]) if env.get("LMPT_TEST_KILL_AT_FAULT") else None
        _FaultPoints(kill_at, env.get("LMPT_TEST_FAULT_TRACE")).install()
    if env.get("LMPT_TEST_DROP_STATE"):
        _drop_state(env["LMPT_TEST_DROP_STATE"])
    if env.get("LMPT_TEST_NAN_AT_STEPS"):
        _nan_at_steps({int(s) for s in env["LMPT_TEST_NAN_AT_STEPS"].split(",")})
    if env.get("LMPT_TEST_FULL_DISK_AT_SAVE"):
        _full_disk_at_save(int(env["LMPT_TEST_FULL_DISK_AT_SAVE"]))
    if env.get("LMPT_TEST_SIGINT_IN_SAVE"):
        _sigint_in_save(int(env["LMPT_TEST_SIGINT_IN_SAVE"]))
    if env.get("LMPT_TEST_TRACE_WINDOWS"):
        _trace_windows(env["LMPT_TEST_TRACE_WINDOWS"])


if __name__ == "__main__":
    install_from_environment()
    from lmpt.cli import main

    sys.argv = ["lmpt", *sys.argv[1:]]
    main()
