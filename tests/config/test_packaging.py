"""`pip install .` carries conf/ and the bundled corpora inside the wheel, and the installed lmpt finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_carries_configs_and_corpora(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("lmpt-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for group in ("tokenizer", "objective", "model", "optimizer", "scheduler", "data", "trainer", "downstream"):
        assert any(n.startswith(f"lmpt/conf/{group}/") and n.endswith(".yaml") for n in names), group
    corpora = {f"lmpt/corpora/{name}" for name in ("tinyshakespeare.txt", "tinystories-prefix.txt", "README.md")}
    assert {"lmpt/conf/config.yaml", "lmpt/conf/data/tinystories.yaml", *corpora} <= names
    tasks = {"lmpt/tasks/shakespeare-cloze.jsonl", "lmpt/tasks/shakespeare-order/train.jsonl"}
    assert tasks <= names  # task=bundled:NAME and downstream=shakespeare work from an installed wheel
    assert any(n.endswith("entry_points.txt") for n in names)

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    found = subprocess.run(
        [sys.executable, "-c", "from lmpt.config.store import conf_dir; print(conf_dir())"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found) == site / "lmpt" / "conf"
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "lmpt = lmpt.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
