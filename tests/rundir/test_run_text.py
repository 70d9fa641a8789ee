"""A run keeps the text it trains on (RUN/text.json, lmpt.rundir.text): a resume and `lmpt-eval RUN held_out=true`
read its data paths where the run started them, from any folder, and refuse text that changed since (one line, exit
2, the run directory untouched) unless data.allow_changed_text (lmpt-eval: allow_changed_text) lets them go on with a
warning. One tiny run is trained once; each test works on a copy of it, and the run's text is restored after it."""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from runner import records, run_lmpt

from lmpt.config.command_options import run_command
from lmpt.config.schema import DataConfig, settings
from lmpt.downstream.eval_cli import evaluate
from lmpt.errors import LmptError
from lmpt.rundir.text import TEXT_FILE, recorded_text

RUN = [
    "model=micro",
    "tokenizer.vocab_size=400",
    "data.seq_len=32",
    "data.paths=[corpus.txt]",
    "trainer.batch_size=4",
    "trainer.max_steps=2",
    "trainer.eval_every=0",
    "trainer.eval_batches=1",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
]
WORDS = "the a cat dog sat on mat ran far away home big small red blue green tree house river stone".split()


def corpus(seed: int, paragraphs: int) -> str:
    """Paragraphs of random words, a blank line between them."""
    draw = random.Random(seed)
    lines = [" ".join(draw.choices(WORDS, k=draw.randint(8, 30))).capitalize() + "." for _ in range(paragraphs)]
    return "\n\n".join(lines) + "\n"


def train_tokens(stdout: str) -> str:
    """The training tokens a launch's data line counts (`... epochs of the 24,232 train tokens`)."""
    found = re.search(r"epochs of the ([\d,]+) train tokens", stdout)
    assert found is not None, stdout
    return found.group(1)


@dataclass(frozen=True)
class Trained:
    text: Path
    """The run's corpus.txt, in the folder it was launched from."""
    run: Path
    tokens: str
    """Its training tokens, as its first launch counted them."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """A two-step run of the micro model on launch/corpus.txt, launched from launch/ (a relative data path)."""
    launch = tmp_path_factory.mktemp("launch").resolve()
    (launch / "corpus.txt").write_text(corpus(seed=0, paragraphs=300))
    run = launch.parent / f"{launch.name}-run"
    done = run_lmpt(*RUN, f"hydra.run.dir={run}", cwd=launch)
    assert done.returncode == 0, done.stderr
    return Trained(launch / "corpus.txt", run, train_tokens(done.stdout))


@pytest.fixture
def run(trained: Trained, tmp_path: Path) -> Iterator[Path]:
    """A copy of the trained run; the run's text is as it was again after the test."""
    copy = tmp_path / "run"
    shutil.copytree(trained.run, copy)
    text = trained.text.read_bytes()
    yield copy
    if not trained.text.is_file() or trained.text.read_bytes() != text:
        trained.text.write_bytes(text)


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """Another folder, holding another corpus.txt (the same relative path as the run's data path)."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "corpus.txt").write_text(corpus(seed=1, paragraphs=120))
    return folder


def append_to(path: Path) -> None:
    with path.open("a") as f:
        f.write("\nThe red dog ran home.\n")


def snapshot(run: Path) -> dict[str, bytes]:
    """Every file of the run directory and its bytes (the lock file aside: it holds the last process's PID)."""
    return {
        str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"
    }


def test_a_resume_from_another_folder_trains_on_the_run_s_own_text(
    trained: Trained, run: Path, elsewhere: Path
) -> None:
    done = run_lmpt(f"hydra.run.dir={run}", "trainer.max_steps=3", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert train_tokens(done.stdout) == trained.tokens  # the run's corpus, not elsewhere/corpus.txt
    assert max(r["step"] for r in records(run)) == 3
    recorded = json.loads((run / TEXT_FILE).read_text())
    assert recorded["launch_dir"] == str(trained.text.parent)
    assert [f["path"] for f in recorded["files"]] == [str(trained.text)]
    assert recorded == json.loads((trained.run / TEXT_FILE).read_text())  # as the run's first launch recorded it


@pytest.mark.parametrize("how", ["trainer.resume={run}", "hydra.run.dir={run}"])
def test_text_appended_to_since_the_run_started_is_refused_in_one_line(
    trained: Trained, run: Path, elsewhere: Path, how: str
) -> None:
    append_to(trained.text)
    before = snapshot(run)
    done = run_lmpt(how.format(run=run), "trainer.max_steps=3", cwd=elsewhere)
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"lmpt: error: {run}'s text differs from what {run / TEXT_FILE} records: {trained.text} ")
    assert "bytes then" in line and "data.allow_changed_text=true" in line
    assert snapshot(run) == before  # nothing written: no checkpoint, metrics, config, log line or record


def test_allow_changed_text_warns_goes_on_and_records_the_new_text(
    trained: Trained, run: Path, elsewhere: Path
) -> None:
    append_to(trained.text)
    done = run_lmpt(f"trainer.resume={run}", "trainer.max_steps=3", "data.allow_changed_text=true", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    warning = next(line for line in done.stdout.splitlines() if line.startswith("WARNING"))
    assert f"{trained.text} changed" in warning and "data.allow_changed_text=true" in warning
    assert warning in (run / "lmpt.log").read_text()
    assert max(r["step"] for r in records(run)) == 3
    recorded = json.loads((run / TEXT_FILE).read_text())
    assert recorded["files"][0]["size"] == trained.text.stat().st_size  # the run's text from now on
    assert OmegaConf.load(run / "config.yaml").data.allow_changed_text is False  # for that launch only


def answer(argv: list[str], capsys, monkeypatch) -> tuple[int, str]:
    """(exit code, lmpt-eval's JSON answer or its one-line refusal)."""
    monkeypatch.setattr(sys, "argv", ["lmpt-eval", *argv, "json=true"])
    capsys.readouterr()
    try:
        run_command(evaluate)
        code = 0
    except SystemExit as stopped:
        code = int(stopped.code or 0)
    out, err = capsys.readouterr()
    return code, (out if code == 0 else err.strip().splitlines()[-1])  # the status lines before it aside


def test_lmpt_eval_held_out_measures_the_run_s_own_text(
    trained: Trained, run: Path, elsewhere: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(elsewhere)
    logged = [r for r in records(run) if "val_loss" in r][-1]
    code, said = answer([str(run), "held_out=true"], capsys, monkeypatch)
    assert code == 0, said
    assert json.loads(said)["val_loss"] == pytest.approx(logged["val_loss"], rel=1e-5)

    append_to(trained.text)
    code, said = answer([str(run), "held_out=true"], capsys, monkeypatch)
    assert code == 2, said
    assert said.startswith(f"lmpt: error: {run}'s text differs") and f"{trained.text} changed" in said
    assert "allow_changed_text=true" in said
    code, said = answer([str(run), "held_out=true", "allow_changed_text=true"], capsys, monkeypatch)
    assert code == 0 and "val_loss" in json.loads(said), said


def run_data(run: Path) -> DataConfig:
    return settings(
        OmegaConf.merge(OmegaConf.structured(DataConfig), OmegaConf.load(run / "config.yaml").data), DataConfig
    )


def test_text_moved_with_the_run_is_found_where_it_now_is(trained: Trained, run: Path, tmp_path, monkeypatch) -> None:
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(trained.text, moved / "corpus.txt")
    trained.text.unlink()  # the folder the run started in holds its text no more
    monkeypatch.chdir(moved)
    found = recorded_text(run, run_data(run), False, "data.allow_changed_text=true")
    assert found.text.launch_dir == moved.resolve() and not found.changed and "no longer under" in found.notice
    (moved / "corpus.txt").write_text(corpus(seed=2, paragraphs=50))
    with pytest.raises(LmptError, match=rf"{re.escape(str(trained.text))} is gone, .*corpus.txt is new"):
        recorded_text(run, run_data(run), False, "data.allow_changed_text=true")


def test_a_run_from_before_text_json_still_resumes(trained: Trained, run: Path) -> None:
    """Compatibility (true before this record existed too): no record, the data paths start at the working folder."""
    (run / TEXT_FILE).unlink()
    done = run_lmpt(f"trainer.resume={run}", "trainer.max_steps=3", cwd=trained.text.parent)
    assert done.returncode == 0, done.stderr
    assert f"has no {TEXT_FILE}" in done.stdout
    assert json.loads((run / TEXT_FILE).read_text())["files"][0]["path"] == str(trained.text)  # recorded from now on
