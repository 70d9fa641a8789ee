"""No code runs from a file lmpt reads (issue 12, point 1). A pickle whose `__reduce__` calls `os.system`, or a
YAML `!!python/object/apply:os.system` tag, is planted in the final model, in each checkpoint part (its
manifest recomputed, as an attacker would) and in the files lmpt-compare reads; each goes through resume and
every command. The payload would create a marker file: it never does, and every reader of the file names it
in one line and exits 2."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from runner import SMALL, run_lmpt

from lmpt.config.command_options import run_command
from lmpt.downstream.eval_cli import evaluate
from lmpt.errors import LmptError
from lmpt.hf.export import export
from lmpt.inference.fill import fill
from lmpt.inference.generate import generate
from lmpt.report.compare import main as compare_main
from lmpt.rundir.checkpoint import MANIFEST, manifest_problem
from lmpt.safe_files import UnsafeFile, load_sharded, load_torch, load_yaml, read_dcp_metadata

ARGS = [*SMALL, "trainer.max_steps=2", "trainer.eval_batches=1", "trainer.sample_tokens=0"]
CHECKPOINT = Path("checkpoints") / "step_00000002"


class Payload:
    """Unpickling this runs `touch marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def yaml_payload(marker: Path) -> str:
    return f"objective: !!python/object/apply:os.system ['touch {marker}']\nmodel: {{}}\ntrainer: {{}}\n"


def reseal(checkpoint: Path) -> None:
    """Recompute the manifest over the checkpoint's files, as someone planting a file would."""
    files = {
        str(p.relative_to(checkpoint)): {"size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        for p in sorted(checkpoint.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    (checkpoint / MANIFEST).write_text(json.dumps({"step": 2, "files": files}))
    assert manifest_problem(checkpoint) is None


def plant_pickle(path: Path, marker: Path, keep: Path | None = None) -> None:
    """`path` becomes a torch.save pickle carrying the payload (beside the real content of `keep`, if given)."""
    content = torch.load(keep, weights_only=True) if keep is not None else {}
    torch.save({**content, "payload": Payload(marker)}, path)


# what each case plants (relative to a copy of the run) and which readers must refuse naming that file
CASES = {
    "final model.pt": ("model.pt", {"generate", "fill", "eval", "export"}),
    "checkpoint model.safetensors": (
        str(CHECKPOINT / "model.safetensors"),
        {"resume", "generate", "fill", "eval", "export"},
    ),
    "checkpoint model.pt": (str(CHECKPOINT / "model.pt"), {"resume", "generate", "fill", "eval", "export"}),
    "checkpoint optimizer.pt": (str(CHECKPOINT / "optimizer.pt"), {"resume"}),
    "checkpoint trainer.pt": (str(CHECKPOINT / "trainer.pt"), {"resume", "generate", "fill", "eval", "export"}),
    "config.yaml": ("config.yaml", {"resume", "generate", "fill", "eval", "export", "compare"}),
    ".hydra/overrides.yaml": (".hydra/overrides.yaml", {"compare"}),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("safe")
    result = run_lmpt(*ARGS, f"hydra.run.dir={root / 'run'}", cwd=root)
    assert result.returncode == 0, result.stderr[-2000:]
    return root / "run"


def plant(run: Path, case: str, marker: Path) -> Path:
    """Plant `case`'s payload in `run`; returns the planted file."""
    name, _ = CASES[case]
    path = run / name
    checkpoint = run / CHECKPOINT
    if name == "model.pt":
        (run / "model.safetensors").unlink()
        plant_pickle(path, marker)
    elif name.endswith(".yaml"):
        path.write_text(yaml_payload(marker))
    else:
        if path.name == "model.pt":
            (checkpoint / "model.safetensors").unlink()
        plant_pickle(path, marker, keep=path if path.exists() and path.suffix == ".pt" else None)
        reseal(checkpoint)
    return path


def run_in_process(command: Callable[[list[str]], None], argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["lmpt-x", *argv])
    with pytest.raises(SystemExit) as exit_info:
        run_command(command)
    return int(exit_info.value.code or 0), capsys.readouterr().err


def commands(run: Path, target: Path, tmp_path: Path, text: Path) -> dict[str, Callable[..., tuple[int, str]]]:
    """Every command but `lmpt`, in process, as `(monkeypatch, capsys) -> (exit code, stderr)`: lmpt-compare on
    the run, the others on `target` (the run, or its checkpoint)."""

    def compare(monkeypatch, capsys) -> tuple[int, str]:
        try:
            compare_main([str(run), f"out={tmp_path / 'report'}"])
        except SystemExit as exc:
            return int(exc.code or 0), capsys.readouterr().err
        return 0, capsys.readouterr().err

    return {
        "generate": lambda mp, cs: run_in_process(generate, [str(target), "prompt=To be", "max_tokens=2"], mp, cs),
        "fill": lambda mp, cs: run_in_process(fill, [str(target), "text=To [MASK]"], mp, cs),
        "eval": lambda mp, cs: run_in_process(evaluate, [str(target), f"data={text}"], mp, cs),
        "export": lambda mp, cs: run_in_process(export, [str(target), str(tmp_path / "export")], mp, cs),
        "compare": compare,
    }


def test_the_planted_payloads_are_live(tmp_path: Path) -> None:
    """Loaded the unsafe way, each payload runs: what the test below shows lmpt never does."""
    marker = tmp_path / "marker"
    plant_pickle(tmp_path / "evil.pt", marker)
    torch.load(tmp_path / "evil.pt", weights_only=False)
    assert marker.exists()
    marker.unlink()
    yaml.unsafe_load(yaml_payload(marker))
    assert marker.exists()


def check(case: str, name: str, planted: Path, marker: Path, code: int, stderr: str) -> None:
    """The payload never ran; a reader of the planted file refused in one line naming it, with exit 2."""
    assert not marker.exists(), f"{case}: the payload ran under {name}"
    if name in CASES[case][1]:
        lines = stderr.strip().splitlines()
        assert code == 2 and len(lines) == 1, f"{case} under {name}: exit {code}, stderr {stderr[-1500:]}"
        assert str(planted) in lines[0] and "error" in lines[0], f"{case} under {name}: {lines[0]}"
    else:
        assert code in (0, 2) and "Traceback" not in stderr, f"{case} under {name}: {stderr[-1500:]}"


def planted_copy(trained: Path, tmp_path: Path, case: str) -> tuple[Path, Path, Path]:
    """(run directory, planted file, marker) in a fresh copy of the trained run."""
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    marker = tmp_path / "marker"
    return run, plant(run, case, marker), marker


@pytest.mark.parametrize("case", list(CASES))
def test_no_payload_runs_under_any_command(case: str, trained: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    run, planted, marker = planted_copy(trained, tmp_path, case)
    target = run / CHECKPOINT if case.startswith("checkpoint") else run
    text = tmp_path / "eval.txt"
    text.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n")
    for name, command in commands(run, target, tmp_path, text).items():
        code, stderr = command(monkeypatch, capsys)
        check(case, name, planted, marker, code, stderr)


SLOW_RESUMES = {"final model.pt", "checkpoint model.pt", "checkpoint model.safetensors", ".hydra/overrides.yaml"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.soak) if c in SLOW_RESUMES else c for c in CASES])
def test_no_payload_runs_under_resume(case: str, trained: Path, tmp_path: Path) -> None:
    """`lmpt` run again on the directory, as a resume (each case a whole process: the slower ones are soak)."""
    run, planted, marker = planted_copy(trained, tmp_path, case)
    done = run_lmpt(*ARGS, "trainer.max_steps=3", f"hydra.run.dir={run}", cwd=tmp_path)
    check(case, "resume", planted, marker, done.returncode, done.stderr)


def test_readers_refuse_code_in_unit(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    plant_pickle(tmp_path / "evil.pt", marker)
    with pytest.raises(UnsafeFile, match="evil.pt"):
        load_torch(tmp_path / "evil.pt")
    (tmp_path / "evil.yaml").write_text(yaml_payload(marker))
    with pytest.raises(UnsafeFile, match="evil.yaml"):
        load_yaml(tmp_path / "evil.yaml")
    (tmp_path / "broken.yaml").write_text("a: [1, 2\n")
    with pytest.raises(LmptError, match="broken.yaml is not valid YAML"):
        load_yaml(tmp_path / "broken.yaml")
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, as the test means
def test_sharded_checkpoint_metadata_is_read_without_code(tmp_path: Path) -> None:
    """A torch.distributed.checkpoint directory loads through the restricted reader; a `.metadata` (the pickle
    DCP itself would unpickle blindly) carrying a payload is refused, naming it."""
    import torch.distributed.checkpoint as dcp

    def stepped(lr: float) -> dict:
        model = torch.nn.Linear(4, 4)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict()}

    state, fresh = stepped(1e-3), stepped(5e-2)
    dcp.save(state, checkpoint_id=str(tmp_path / "sharded"))
    load_sharded(fresh, tmp_path / "sharded")  # tensors, and the optimizer's plain values (lr) as bytes
    assert all(torch.equal(fresh["model"][k], state["model"][k]) for k in state["model"])
    assert torch.equal(fresh["optimizer"]["state"][0]["exp_avg"], state["optimizer"]["state"][0]["exp_avg"])
    assert fresh["optimizer"]["param_groups"][0]["lr"] == 1e-3
    assert type(read_dcp_metadata(tmp_path / "sharded" / ".metadata")).__name__ == "Metadata"

    marker = tmp_path / "marker"
    with open(tmp_path / "sharded" / ".metadata", "wb") as f:
        pickle.dump(Payload(marker), f)
    with pytest.raises(UnsafeFile, match=r"sharded/\.metadata"):
        load_sharded(fresh, tmp_path / "sharded")
    assert not marker.exists()


def test_equal_tensors_and_metadata_give_byte_identical_files(tmp_path: Path) -> None:
    """safetensors writes metadata keys in a random order (a Rust HashMap): lmpt sorts them, so a checksum
    shows equal weights."""
    import torch

    from lmpt.safe_files import save_weights, weights_metadata

    tensors = {"b": torch.arange(6.0).reshape(2, 3), "a": torch.ones(4, dtype=torch.int64)}
    keys = [f"key{i}" for i in range(12)]
    files = []
    for n, order in enumerate([keys, keys[::-1], keys[5:] + keys[:5]]):
        files.append(tmp_path / f"m{n}.safetensors")
        save_weights(files[-1], tensors, {k: f"value of {k}" for k in order})
    assert len({f.read_bytes() for f in files}) == 1
    assert weights_metadata(files[0]) == {k: f"value of {k}" for k in keys}
