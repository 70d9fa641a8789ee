"""lmpt-export of a decoder starts a text where lmpt does, after `</s>` (issues 32 and 36): the export declares
`</s>` as bos, so transformers' generate() without input and lm_eval's empty context start from it, and by default
its tokenizer puts it before every text, so generate() on tokenizer(prompt) gives lmpt-generate's greedy tokens out
of the box; `add_bos_token=false` declares it without adding it. lm_eval's agreement:
tests/downstream/test_downstream_runs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from runner import TINY_RUN, run_lmpt

from lmpt.hf.export import export
from lmpt.inference.generate import generate
from lmpt.model.generate import sample
from lmpt.rundir.trained import load_trained

transformers = pytest.importorskip("transformers")

TINY = [
    "objective=clm",
    *TINY_RUN,
    "trainer.max_steps=60",  # enough that a prompt with and without its leading </s> decode apart
]
PROMPTS = ["ROMEO:", "First Citizen:\nBefore we proceed", "What, art thou"]
NEW = 24


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(a tiny clm run, its plain export, its export with add_bos_token=false)."""
    root = tmp_path_factory.mktemp("generation")
    done = run_lmpt(*TINY, f"hydra.run.dir={root / 'run'}", cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    export([str(root / "run"), str(root / "plain")])
    export([str(root / "run"), str(root / "nobos"), "add_bos_token=false"])
    return root / "run", root / "plain", root / "nobos"


def _load(directory: Path, **kwargs) -> tuple:
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory, local_files_only=True, **kwargs)
    return tokenizer, transformers.AutoModelForCausalLM.from_pretrained(directory, local_files_only=True).eval()


def _lmpt_generate(run: Path, prompt: str, capsys: pytest.CaptureFixture) -> str:
    generate([str(run), f"prompt={prompt}", "temperature=0", f"max_tokens={NEW}", "json=true"])
    return json.loads(capsys.readouterr().out)["text"]


def _greedy(model, input_ids: torch.Tensor | None, eos: int) -> list[int]:
    """generate()'s new tokens, without the eos it stops at (lmpt's sample stops before it)."""
    with torch.no_grad():
        out = model.generate(input_ids, do_sample=False, max_new_tokens=NEW)[0].tolist()
    new = out[input_ids.shape[1] if input_ids is not None else 1 :]
    return new[: new.index(eos)] if eos in new else new


def test_the_export_declares_eos_as_where_a_text_starts(exports) -> None:
    run, plain, nobos = exports
    trained = load_trained(run)
    eos = trained.tokenizer.special.eos
    for directory in (plain, nobos):
        config = json.loads((directory / "config.json").read_text())
        generation = json.loads((directory / "generation_config.json").read_text())
        assert config["bos_token_id"] == config["eos_token_id"] == generation["bos_token_id"] == eos
        tokenizer = transformers.AutoTokenizer.from_pretrained(directory, local_files_only=True)
        assert (tokenizer.bos_token, tokenizer.bos_token_id, tokenizer.eos_token_id) == ("</s>", eos, eos)
    sentence = PROMPTS[1]
    ids = trained.tokenizer.encode(sentence)
    plain_tok = transformers.AutoTokenizer.from_pretrained(plain, local_files_only=True)
    assert plain_tok(sentence)["input_ids"] == [eos, *ids]  # lmpt-generate's prompt, lmpt-eval's context
    assert plain_tok(sentence, add_special_tokens=False)["input_ids"] == ids
    assert plain_tok.decode(plain_tok(sentence)["input_ids"], skip_special_tokens=True) == trained.tokenizer.decode(ids)
    nobos_tok = transformers.AutoTokenizer.from_pretrained(nobos, local_files_only=True)
    assert nobos_tok(sentence)["input_ids"] == ids
    asked = transformers.AutoTokenizer.from_pretrained(nobos, local_files_only=True, add_bos_token=True)
    assert asked(sentence)["input_ids"] == [eos, *ids]


def test_generate_on_tokenizer_prompt_is_lmpt_generate_greedy(exports, capsys) -> None:
    """The plain export: model.generate(**tokenizer(prompt)) gives lmpt-generate's temperature=0 tokens and text,
    and generate() without input is lmpt-generate's empty prompt."""
    run, plain, _ = exports
    trained = load_trained(run)
    eos = trained.tokenizer.special.eos
    tokenizer, model = _load(plain)
    changed = 0
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        ours = sample(
            trained.model,
            [eos, *trained.tokenizer.encode(prompt)],
            NEW,
            temperature=0,
            eos_id=eos,
            vocab_size=trained.tokenizer.vocab_size,
        )
        theirs = _greedy(model, ids, eos)
        assert theirs == ours, prompt
        text = tokenizer.decode([*ids[0].tolist(), *theirs], skip_special_tokens=True)
        assert text == _lmpt_generate(run, prompt, capsys)
        changed += _greedy(model, ids[:, 1:], eos) != ours
    assert changed  # without the leading </s> the text differs: the checks above can tell the two framings apart
    ours = sample(trained.model, [eos], NEW, temperature=0, eos_id=eos, vocab_size=trained.tokenizer.vocab_size)
    assert _greedy(model, None, eos) == ours
    assert trained.tokenizer.decode(ours) == _lmpt_generate(run, "", capsys)


def test_an_export_without_bos_continues_a_prompt_after_bos_token(exports) -> None:
    """add_bos_token=false: a prompt continues as lmpt-generate's after the tokenizer's bos_token, or with a
    tokenizer loaded with add_bos_token=True; generate() without input still starts from eos."""
    run, _, nobos = exports
    trained = load_trained(run)
    eos = trained.tokenizer.special.eos
    tokenizer, model = _load(nobos)
    ours = sample(trained.model, [eos], NEW, temperature=0, eos_id=eos, vocab_size=trained.tokenizer.vocab_size)
    assert _greedy(model, None, eos) == ours
    asked = transformers.AutoTokenizer.from_pretrained(nobos, local_files_only=True, add_bos_token=True)
    for prompt in PROMPTS:
        expected = sample(
            trained.model,
            [eos, *trained.tokenizer.encode(prompt)],
            NEW,
            temperature=0,
            eos_id=eos,
            vocab_size=trained.tokenizer.vocab_size,
        )
        by_hand = tokenizer(tokenizer.bos_token + prompt, return_tensors="pt")["input_ids"]
        assert _greedy(model, by_hand, eos) == expected, prompt
        assert _greedy(model, asked(prompt, return_tensors="pt")["input_ids"], eos) == expected, prompt
