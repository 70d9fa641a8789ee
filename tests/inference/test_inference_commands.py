"""lmpt-generate, lmpt-fill, lmpt-eval and lmpt-export on tiny models trained once per module by the real CLI."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from runner import run_lmpt

from lmpt.config.command_options import run_command
from lmpt.downstream.eval_cli import evaluate
from lmpt.hf.export import export
from lmpt.inference.evaluate import read_text
from lmpt.inference.fill import fill
from lmpt.inference.generate import generate
from lmpt.rundir.trained import load_trained

TINY = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.max_steps=5",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
]
TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish? Caf\u00e9 \u00e9t\u00e9!\n"
)


def _train(tmp_path_factory: pytest.TempPathFactory, *overrides: str) -> Path:
    run = tmp_path_factory.mktemp("run") / "run"
    done = run_lmpt(*TINY, *overrides, f"hydra.run.dir={run}", cwd=run.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return run


@pytest.fixture(scope="module")
def decoder_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "objective=clm")


@pytest.fixture(scope="module")
def encoder_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "objective=mlm")


@pytest.fixture(scope="module")
def encoder_decoder_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory, "objective=span", "model.n_layers=2", "trainer.max_steps=2")


@pytest.fixture(scope="module")
def text_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "eval.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _json(command: Callable[[list[str]], None], argv: list[str], capsys: pytest.CaptureFixture) -> dict:
    command([*argv, "json=true"])
    return json.loads(capsys.readouterr().out)


def _refused(command: Callable[[list[str]], None], argv: list[str], capsys: pytest.CaptureFixture, monkeypatch) -> str:
    """The command's stderr, which must be one `lmpt: error:` line with exit code 2."""
    monkeypatch.setattr(sys, "argv", ["lmpt-x", *argv])
    with pytest.raises(SystemExit) as exit_info:
        run_command(command)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("lmpt: error: ") and err.count("\n") == 1, err
    return err


# -- generate ----------------------------------------------------------------------------------------


def test_generate_decoder_is_seeded_and_greedy_matches_uncached(decoder_run: Path, capsys) -> None:
    argv = [str(decoder_run), "prompt=ROMEO:", "max_tokens=12", "seed=3"]
    first, second = _json(generate, argv, capsys), _json(generate, argv, capsys)
    assert first == second and first["text"].startswith("ROMEO:") and 1 <= first["tokens"] <= 12

    from lmpt.model.generate import sample

    trained = load_trained(decoder_run)
    prompt = [trained.tokenizer.special.eos, *trained.tokenizer.encode("ROMEO:")]
    assert sample(trained.model, prompt, 30, temperature=0) == sample(
        trained.model, prompt, 30, temperature=0, use_cache=False
    )


def test_generate_from_a_checkpoint_directory(decoder_run: Path, capsys) -> None:
    (checkpoint,) = sorted((decoder_run / "checkpoints").iterdir())[-1:]
    out = _json(generate, [str(checkpoint), "prompt=Hello", "max_tokens=4", "temperature=0"], capsys)
    assert out["text"].startswith("Hello")


def test_generate_fills_spans_with_an_encoder_decoder(encoder_decoder_run: Path, capsys) -> None:
    out = _json(generate, [str(encoder_decoder_run), "prompt=The <extra_id_0> sat on the mat.", "max_tokens=8"], capsys)
    assert set(out["spans"]) == {"<extra_id_0>"}
    assert "<extra_id_0>" not in out["text"] and out["text"].endswith("sat on the mat.")


# -- fill --------------------------------------------------------------------------------------------


def test_fill_lists_top_k_per_mask(encoder_run: Path, capsys) -> None:
    out = _json(fill, [str(encoder_run), "text=The chef [MASK] a delicious [MASK].", "top_k=4"], capsys)
    assert len(out["masks"]) == 2
    for mask in out["masks"]:
        probs = [c["probability"] for c in mask["candidates"]]
        assert len(probs) == 4 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
        assert all(not c["token"].startswith(("[", "<")) or c["token"].startswith("<0x") for c in mask["candidates"])
    fill([str(encoder_run), "text=To be or not to [MASK]."])
    assert "probability" in capsys.readouterr().out


# -- eval --------------------------------------------------------------------------------------------


def _text_bytes(path: Path) -> int:
    """Independently: blank-line documents of stripped lines; a document's lines are its sentences."""
    return sum(len(line.strip().encode("utf-8")) for line in path.read_text(encoding="utf-8").splitlines())


def test_eval_decoder_numbers_are_consistent(decoder_run: Path, text_file: Path, capsys) -> None:
    out = _json(evaluate, [str(decoder_run), f"data={text_file}", "seq_len=16", "stride=4"], capsys)
    assert out["text_bytes"] == _text_bytes(text_file) == out["scored_bytes"]
    assert out["scored_tokens"] == out["text_tokens"]  # every token once, each document's eos included
    assert out["perplexity"] == pytest.approx(math.exp(out["loss"]), rel=1e-9)
    assert out["loss"] == pytest.approx(out["nats"] / out["scored_tokens"], rel=1e-9)
    assert out["bits_per_byte"] == pytest.approx(out["nats"] / math.log(2) / _text_bytes(text_file), rel=1e-9)

    # seq_len covering the whole text in one window scores every token with full context: one forward pass
    trained = load_trained(decoder_run)
    text = read_text([str(text_file)], "blank_line", "text", trained.tokenizer)
    ids = torch.tensor([[trained.tokenizer.special.eos, *text.tokens]])
    with torch.no_grad():
        logits = trained.model.logits(ids[:, :-1])[0]
    reference = float(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum"))
    whole = _json(evaluate, [str(decoder_run), f"data={text_file}", f"seq_len={ids.shape[1]}"], capsys)
    assert whole["nats"] == pytest.approx(reference, rel=1e-5)


def test_eval_encoder_masking_is_seeded(encoder_run: Path, text_file: Path, capsys) -> None:
    argv = [str(encoder_run), f"data={text_file}", "seq_len=32"]
    first, again = _json(evaluate, argv, capsys), _json(evaluate, [*argv, "batch_size=1"], capsys)
    assert first["scored_tokens"] > 0 and first["nats"] == pytest.approx(again["nats"], rel=1e-5)
    assert first["perplexity"] == pytest.approx(math.exp(first["loss"]), rel=1e-9)
    assert first["bits_per_byte"] == pytest.approx(first["nats"] / math.log(2) / first["scored_bytes"], rel=1e-9)
    other = _json(evaluate, [*argv, "seed=1"], capsys)
    assert other["scored_tokens"] != first["scored_tokens"] or other["nats"] != first["nats"]


def test_eval_encoder_pll_scores_every_ordinary_token(encoder_run: Path, text_file: Path, capsys) -> None:
    out = _json(evaluate, [str(encoder_run), f"data={text_file}", "seq_len=32", "method=pll", "batch_size=16"], capsys)
    trained = load_trained(encoder_run)
    text = read_text([str(text_file)], "blank_line", "text", trained.tokenizer)
    ordinary = sum(t >= trained.tokenizer.special.first_ordinary for t in text.tokens)
    assert out["scored_tokens"] == ordinary and out["method"].startswith("pseudo-log-likelihood")
    assert out["pseudo_perplexity"] == pytest.approx(math.exp(out["nats"] / ordinary), rel=1e-9)
    assert out["bits_per_byte"] == pytest.approx(out["nats"] / math.log(2) / out["scored_bytes"], rel=1e-9)
    evaluate([str(encoder_run), f"data={text_file}", "seq_len=32", "method=pll"])
    assert "pseudo-perplexity" in capsys.readouterr().out


def test_eval_encoder_decoder_table(encoder_decoder_run: Path, text_file: Path, capsys) -> None:
    evaluate([str(encoder_decoder_run), f"data={text_file}", "seq_len=16"])
    out = capsys.readouterr().out
    assert "bits per byte" in out and "span" in out


# -- export ------------------------------------------------------------------------------------------


def test_export_decoder_loads_in_transformers_with_the_same_loss(decoder_run: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "hf"
    done = run_lmpt(str(decoder_run), str(out), cwd=tmp_path, command="lmpt-export")
    assert done.returncode == 0, done.stderr
    model = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
    trained = load_trained(decoder_run)
    assert type(model).__name__ == "LlamaForCausalLM"
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]  # after </s>, as lmpt reads every text
    assert ids[0].tolist() == [trained.tokenizer.special.eos, *trained.tokenizer.encode(TEXT)]
    with torch.no_grad():
        ours = trained.model.logits(ids)
        theirs = model(ids, labels=ids)
    our_loss = torch.nn.functional.cross_entropy(ours[0, :-1], ids[0, 1:])
    assert abs(float(theirs.loss) - float(our_loss)) < 1e-4
    torch.testing.assert_close(theirs.logits, ours, atol=1e-4, rtol=1e-4)


def test_export_mlm_encoder_as_eurobert(encoder_run: Path, tmp_path: Path, capsys) -> None:
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "EuroBertForMaskedLM"):
        pytest.skip("this transformers has no EuroBERT")
    export([str(encoder_run), str(tmp_path / "hf")])  # add_bos_token unset: false for an encoder
    model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf", local_files_only=True).eval()
    trained = load_trained(encoder_run)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf", local_files_only=True)
    assert tokenizer(TEXT)["input_ids"] == trained.tokenizer.encode(TEXT)  # nothing added: as lmpt trained it
    ids = torch.tensor([trained.tokenizer.encode(TEXT)[:60]])
    with torch.no_grad():
        ours = trained.model.body(ids) @ trained.model.head_weight.t()
        torch.testing.assert_close(model(ids).logits, ours, atol=1e-4, rtol=1e-4)


# -- refusals: one line, exit 2 ----------------------------------------------------------------------


def test_refusals(decoder_run, encoder_run, encoder_decoder_run, tmp_path, capsys, monkeypatch) -> None:
    assert "lmpt-fill" in _refused(generate, [str(encoder_run), "prompt=hi"], capsys, monkeypatch)
    assert "lmpt-generate" in _refused(fill, [str(decoder_run), "text=a [MASK]"], capsys, monkeypatch)
    out = tmp_path / "refused"
    err = _refused(export, [str(encoder_decoder_run), str(out)], capsys, monkeypatch)
    assert "no transformers architecture" in err and not out.exists()
    err = _refused(export, [str(encoder_run), str(out), "add_bos_token=true"], capsys, monkeypatch)
    assert "add_bos_token=true is for decoders" in err and not out.exists()
    assert "does not exist" in _refused(generate, [str(tmp_path / "missing")], capsys, monkeypatch)
    assert "not a run directory" in _refused(fill, [str(tmp_path), "text=[MASK]"], capsys, monkeypatch)
    assert "unknown key 'tempreature'" in _refused(generate, [str(decoder_run), "tempreature=1"], capsys, monkeypatch)
    assert "not a valid int" in _refused(generate, [str(decoder_run), "max_tokens=many"], capsys, monkeypatch)
    assert "top_p" in _refused(generate, [str(decoder_run), "top_p=0"], capsys, monkeypatch)
    assert "no [MASK]" in _refused(fill, [str(encoder_run), "text=nothing here"], capsys, monkeypatch)
    assert "no span" in _refused(generate, [str(encoder_decoder_run), "prompt=plain"], capsys, monkeypatch)
    assert "needs data=" in _refused(evaluate, [str(decoder_run)], capsys, monkeypatch)
    assert "data path not found" in _refused(evaluate, [str(decoder_run), "data=nope.txt"], capsys, monkeypatch)
    pll = [str(decoder_run), f"data={tmp_path}", "method=pll"]
    assert "method=pll scores encoders" in _refused(evaluate, pll, capsys, monkeypatch)


def test_export_where_it_cannot_write_names_out_dir(decoder_run: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    for out in (tmp_path / "a-file" / "hf", tmp_path / "a-file"):
        err = _refused(export, [str(decoder_run), str(out)], capsys, monkeypatch)
        assert f"OUT_DIR {out} cannot be written" in err and "pick a directory you can write to" in err, err
    assert (tmp_path / "a-file").read_text() == "not a directory\n"


def test_console_script_refusal_and_help(encoder_run: Path) -> None:
    run = lambda *a: run_lmpt(*a, cwd=encoder_run.parent, command="lmpt-generate")
    refused = run(str(encoder_run), "prompt=hi")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "lmpt-fill" in refused.stderr
    helped = run("--help")
    assert helped.returncode == 0 and "max_tokens=" in helped.stdout and "top_p=" in helped.stdout


# -- progress ----------------------------------------------------------------------------------------


def test_eval_and_generate_show_progress_on_a_terminal_but_not_in_json(
    decoder_run: Path, text_file: Path, capsys, monkeypatch
) -> None:
    from lmpt.console import console

    monkeypatch.setattr(console, "_force_terminal", True)  # as on a terminal: off one (logs, CI) no bar is drawn
    monkeypatch.setattr(console, "is_interactive", True)
    argv = [str(decoder_run), f"data={text_file}", "seq_len=16", "stride=4"]
    windows = _json(evaluate, argv, capsys)["windows"]  # json=true: stdout holds the JSON object alone
    evaluate(argv)
    out = capsys.readouterr().out
    assert "scoring windows" in out and f"{windows}/{windows}" in out and "bits per byte" in out

    argv = [str(decoder_run), "prompt=ROMEO:", "max_tokens=6", "seed=1"]
    tokens = _json(generate, argv, capsys)["tokens"]
    generate(argv)
    out = capsys.readouterr().out
    assert "generating tokens" in out and f"{tokens}/6" in out
