"""lmpt-eval (a text, and the first 200 minimal pairs of blimp-fast zero-shot) and lmpt-generate on a tiny run of every
one of the twelve objectives, trained together by one real `lmpt -m` sweep: each command exits 0 or refuses in one
line that names why (exit 2), and a likelihood is reported as the run's measure says (exact, or mdlm's bound with its
standard error)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from runner import TINY_RUN, records, run_lmpt

from lmpt.config.command_options import run_command
from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.eval_cli import evaluate
from lmpt.inference.generate import generate
from lmpt.objectives.registry import OBJECTIVES

TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n\n"
    "First Citizen:\nFirst, you know Caius Marcius is chief enemy to the people.\n\n"
) * 3
REFUSED = {  # objective -> the words of the one-line refusal of (eval text, eval task, generate); absent: exit 0
    "mlm": {"generate": "lmpt-fill"},
    "nsp": {"generate": "lmpt-fill"},
    "clm-then-mlm": {"generate": "lmpt-fill"},
    "electra": {
        "data": "no trained token head",
        "task": "no trained token head",
        "generate": "lmpt-fill",
        "held_out": "no trained token head",
    },
    "span": {"generate": "no span to fill"},
    "ul2-mixture": {"generate": "no span to fill"},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """objective -> its tiny run (3 steps), all twelve from one sweep."""
    root = tmp_path_factory.mktemp("twelve")
    names = list(OBJECTIVES)
    done = run_lmpt(
        "-m", f"objective={','.join(names)}", *TINY_RUN, "trainer.max_steps=3", f"hydra.sweep.dir={root}", cwd=root
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: root / str(i) for i, name in enumerate(names)}


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 of blimp-fast's 2,010 pairs: an encoder scores each sentence token by token (pseudo-log-likelihood), and
    every kind of scoring shows on a slice as on the whole (the bundled name is read in tests/downstream/)."""
    path = tmp_path_factory.mktemp("pairs") / "blimp-200.jsonl"
    path.write_text("".join((tasks_dir() / "blimp-fast.jsonl").read_text().splitlines(keepends=True)[:200]))
    return path


@pytest.fixture(scope="module")
def text_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "eval.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def answer(command: Callable[[list[str]], None], argv: list[str], capsys, monkeypatch) -> tuple[int, str]:
    """(exit code, its JSON answer or its one-line refusal)."""
    monkeypatch.setattr(sys, "argv", ["lmpt-x", *argv, "json=true"])
    capsys.readouterr()
    code = 0
    try:
        run_command(command)
    except SystemExit as stopped:
        code = int(stopped.code or 0)
    out, err = capsys.readouterr()
    if code:
        assert code == 2 and err.startswith("lmpt: error: ") and err.count("\n") == 1, err
        return code, err
    return code, out


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_every_objective_answers_lmpt_eval_and_lmpt_generate(
    objective, runs, text_file, pairs_file, capsys, monkeypatch
) -> None:
    run, refused = str(runs[objective]), REFUSED.get(objective, {})
    calls = {
        "data": (evaluate, [run, f"data={text_file}"]),
        "task": (evaluate, [run, f"task={pairs_file}"]),
        "generate": (generate, [run, "max_tokens=6"]),
        "held_out": (evaluate, [run, "held_out=true"]),
    }
    for what, (command, argv) in calls.items():
        code, said = answer(command, argv, capsys, monkeypatch)
        if what in refused:
            assert code == 2 and refused[what] in said, (what, said)
            continue
        assert code == 0, (what, said)
        result = json.loads(said)
        if what == "data":
            likelihood = OBJECTIVES[objective].likelihood
            assert result.get("likelihood") == likelihood and math.isfinite(result["loss"])
            if likelihood:
                assert result["bits_per_token"] == pytest.approx(result["loss"] / math.log(2))
                assert (result["bits_per_token_stderr"] > 0) == (likelihood == "bound")
        elif what == "task":
            assert 0 <= result["accuracy"] <= 1
        elif what == "held_out":  # the run's own last evaluation, recomputed from its final weights
            logged = [r for r in records(runs[objective]) if "val_loss" in r][-1]
            shared = {k for k in logged if k.startswith("val_") and "/" not in k} & set(result)
            assert "val_loss" in shared and all(result[k] == pytest.approx(logged[k], rel=1e-4) for k in shared)
            assert ("val_bpb" in result) == ("val_bpb" in logged)  # bits per byte as training logged them


def test_mdlm_is_scored_by_its_bound_over_fixed_draws(runs, text_file, capsys, monkeypatch) -> None:
    run = str(runs["mdlm"])
    code, first = answer(evaluate, [run, f"data={text_file}", "seed=3"], capsys, monkeypatch)
    _, again = answer(evaluate, [run, f"data={text_file}", "seed=3", "batch_size=1"], capsys, monkeypatch)
    first, again = json.loads(first), json.loads(again)
    assert code == 0 and first["bits_per_token"] == again["bits_per_token"]  # fixed draws, whatever the batch size
    assert "diffusion bound" in first["method"] and first["scored_tokens"] == first["text_tokens"]
    # the bound of a nearly untrained model sits near a uniform guess over the vocabulary, never far below it
    assert 0.5 * math.log2(1024) < first["bits_per_token"] < 1.5 * math.log2(1024)
    code, said = answer(evaluate, [run, f"data={text_file}", "method=pll"], capsys, monkeypatch)
    assert code == 2 and "the diffusion bound" in said


def test_generated_text_is_printed_as_written_never_as_markup_or_emoji(runs, capsys, monkeypatch) -> None:
    import lmpt.inference.generate as generating

    written = {"prompt": "[b]x[/b]", "continuation": " :smile: :a: [red]", "text": "", "tokens": 3}
    monkeypatch.setattr(generating, "continue_text", lambda trained, o, bar: written)
    monkeypatch.setattr(sys, "argv", ["lmpt-generate", str(runs["clm"])])
    with pytest.raises(SystemExit) as ended:
        run_command(generate)
    out = capsys.readouterr().out
    assert (
        ended.value.code == 0
        and "[b]x[/b] :smile: :a: [red]" in out
        and "\N{SMILING FACE WITH SMILING EYES}" not in out
    )


def test_held_out_figures_show_a_standard_error_only_where_the_measure_has_one(capsys) -> None:
    """An exact likelihood (clm) has no spread to show: no "0.0000" standard error beside it; a bound does."""
    from lmpt.inference.evaluate import render_held_out

    exact = {"objective": "clm", "arch": "decoder", "val_loss": 4.0, "val_bits_per_token": 5.77}
    render_held_out({**exact, "val_bits_per_token_stderr": 0.0, "val_bpb": 1.9})
    out = capsys.readouterr().out
    assert "stderr" not in out and "±" not in out and "val_bpb" in out and "1.9000" in out
    render_held_out({**exact, "objective": "mdlm", "val_bits_per_token_stderr": 0.0123})
    assert "5.7700 ± 0.0123" in capsys.readouterr().out


def test_held_out_refuses_the_options_it_would_ignore(tmp_path, capsys, monkeypatch) -> None:
    """held_out=true measures the run's windows as its training made them: a window length, stride, batch size or
    method given beside it is refused in one line, not silently ignored (issue 63, point 25)."""
    code, said = answer(evaluate, [str(tmp_path), "held_out=true", "seq_len=32", "method=pll"], capsys, monkeypatch)
    assert code == 2 and "method=, seq_len= do not apply there" in said
    code, said = answer(evaluate, [str(tmp_path), "held_out=true", "batch_size=2"], capsys, monkeypatch)
    assert code == 2 and "batch_size= does not apply there" in said
