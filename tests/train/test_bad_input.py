"""Bad input (issue #4, point 9): each case ends with exit code 2 and exactly one stderr line starting
"lmpt: error:" that names the problem, leaves no run directory behind and changes nothing already written."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from golden import BASE, describe, env, run
from runner import run_lmpt
from tokenizers import Tokenizer as FastTokenizer
from tokenizers import models

TEXT = "The quick brown fox jumps over the lazy dog near the riverbank at dawn.\n"


def snapshot(directory: Path) -> dict[str, str]:
    """A run's files, Hydra's .hydra/ record included (a resume leaves it as the first launch wrote it); not .lock,
    which holds the PID of the last process that ran there."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, describe(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lmpt: error: "), describe(result)
    return lines[0]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A launch directory holding bad corpora and a finished run that no failure may touch."""
    root = tmp_path_factory.mktemp("bad-input")
    (root / "empty.txt").write_text("")
    (root / "no-text").mkdir()
    (root / "no-text" / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (root / "latin1.txt").write_bytes(TEXT.encode() * 20 + "caf\xe9 cr\xe8me\n".encode("latin-1"))
    (root / "tiny.txt").write_text("a b\n\nc d\n\ne f\n\ng h\n")
    (root / "small.txt").write_text(TEXT * 40 + "\n" + TEXT.upper() * 40)
    (root / "a-file").write_text("not a directory\n")
    pq.write_table(pa.table({"url": ["u"], "content": ["c"]}), root / "web.parquet")
    pq.write_table(pa.table({"text": [TEXT * 40, None, TEXT * 40]}), root / "nulls.parquet")
    FastTokenizer(models.WordLevel()).save(str(root / "empty-tokenizer.json"))
    existing = root / "existing"
    result = run(existing, [*BASE, "trainer.max_steps=4"])
    assert result.returncode == 0, describe(result)
    return root


CASES = {
    "missing path": (["data=text", "data.paths=[no/such/corpus.txt]"], "no/such/corpus.txt"),
    "empty file": (["data=text", "data.paths=[empty.txt]"], "empty"),
    "directory without text": (["data=text", "data.paths=[no-text]"], "holds no text files"),
    "invalid utf-8": (["data=text", "data.paths=[latin1.txt]"], "latin1.txt is not valid UTF-8"),
    "parquet without the text column": (
        ["data=text", "data.paths=[web.parquet]"],
        "web.parquet has no column 'text' (its columns: url, content): set data.text_field",
    ),
    "corpus smaller than one window": (
        [
            "data=text",
            "data.paths=[tiny.txt]",
            "data.val_paths=[small.txt]",
            "tokenizer.model_file=existing/tokenizer.model",
        ],
        "fewer than one window",
    ),
    "vocabulary larger than the corpus supports": (
        ["data=text", "data.paths=[small.txt]"],
        "tokenizer.vocab_size=1024 is larger than this corpus supports",
    ),
    "seq_len beyond max_seq_len": (["data.seq_len=600"], "model.max_seq_len"),
    "unknown objective": (["objective=telepathy"], "telepathy"),
    "unknown model": (["model=gigantic"], "gigantic"),
    "cuda without a GPU": (["trainer.device=cuda"], "trainer.device=cuda"),
    "output directory under a file": (["hydra.run.dir=a-file/run"], "a-file"),
    "cache directory a file": (["data.cache_dir=a-file"], "data.cache_dir=a-file: a-file is a file, not a directory"),
    "tokenizer with an empty vocabulary": (
        ["tokenizer=hf", "tokenizer.path=empty-tokenizer.json", "tokenizer.vocab_size=null"],
        "empty-tokenizer.json has an empty vocabulary: it cannot encode text; fix tokenizer.path",
    ),
    "null text in parquet": (
        ["data=text", "data.paths=[nulls.parquet]", "tokenizer.model_file=existing/tokenizer.model"],
        "nulls.parquet, record 2 has no string field 'text' (it is null)",
    ),
    "a yes-or-no key given a number": (
        ["objective=mdlm", "objective.low_discrepancy=2"],
        "objective.low_discrepancy=2 is not a yes or no: give objective.low_discrepancy=true or false",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_and_damages_nothing(case: str, workspace: Path) -> None:
    overrides, fragment = CASES[case]
    existing = workspace / "existing"
    before = snapshot(existing)
    launch = [p.name for p in workspace.iterdir()]
    target = workspace / f"run-{case.replace(' ', '-')}"
    args = [*BASE, *overrides]
    if not any(o.startswith("hydra.run.dir=") for o in overrides):
        args.append(f"hydra.run.dir={target}")
    result = run_lmpt(*args, cwd=workspace, env=env())
    line = one_error_line(result)
    assert fragment in line, line
    assert snapshot(existing) == before
    assert sorted(p.name for p in workspace.iterdir()) == sorted(launch)  # no run directory left behind
    assert (workspace / "a-file").read_text() == "not a directory\n"


def test_bad_input_against_an_existing_run_leaves_it_as_it_was(workspace: Path) -> None:
    """Resuming a finished run on a machine without a GPU: refused, and the run's files are untouched."""
    existing = workspace / "existing"
    before = snapshot(existing)
    line = one_error_line(run(existing, [*BASE, "trainer.max_steps=4", "trainer.device=cuda"]))
    assert "no CUDA GPU" in line, line
    assert snapshot(existing) == before
