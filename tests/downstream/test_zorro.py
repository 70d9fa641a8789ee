"""Zorro (bundled:zorro, bundled:zorro-fast; scripts/make_zorro.py): the shipped files' shape, what the script builds
(the same bytes twice), the input it refuses in
one line with exit status 2 and nothing written, scoring on a tiny model, and ties (counted wrong, and counted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import zstandard
from omegaconf import OmegaConf

from lmpt.config.schema import ModelConfig
from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.kinds.pairs import MinimalPairs, PairsResult
from lmpt.downstream.likelihood import pair_figures
from lmpt.downstream.run_tasks import fast_twin
from lmpt.downstream.significance import decode_outcomes
from lmpt.downstream.task import Scoring, kind_of, read_task
from lmpt.downstream.zero_shot_files import MinimalPair, read_pairs
from lmpt.model import build_model
from lmpt.rundir.trained import Trained

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "make_zorro.py"
FIELDS = ["sentence_good", "sentence_bad", "field", "UID", "pairID"]
SHIPPED = ("zorro.jsonl.zst", "zorro-fast.jsonl", "zorro/README.md")
MIT = "Permission is hereby granted, free of charge, to any person obtaining a copy"
sys.path.insert(0, str(REPO / "scripts"))
import make_zorro  # noqa: E402


def _shipped_records() -> list[dict]:
    text = zstandard.ZstdDecompressor().decompress((tasks_dir() / "zorro.jsonl.zst").read_bytes())
    return [json.loads(line) for line in text.decode("utf-8").splitlines()]


def test_the_shipped_zorro_is_23_paradigms_of_2000_pairs_and_a_fast_draw_of_50_each() -> None:
    every = _shipped_records()
    assert len(every) == 46_000 and all(list(r) == FIELDS for r in every)
    paradigms = {r["UID"] for r in every}
    assert len(paradigms) == 23 and all(sum(r["UID"] == p for r in every) == 2000 for p in paradigms)
    assert all(r["field"] == r["UID"].rpartition("-")[0] for r in every)  # the phenomenon: filler-gap keeps its hyphen
    assert {"agreement_subject_verb", "filler-gap", "island-effects"} <= {r["field"] for r in every}
    assert len({r["field"] for r in every}) == 13
    assert all(r["sentence_good"] != r["sentence_bad"] for r in every)
    equal = sum(len(r["sentence_good"].split()) == len(r["sentence_bad"].split()) for r in every)
    assert equal == 45_783  # 99.5% of pairs of equal length in words
    first = every[0]
    assert (first["sentence_bad"], first["sentence_good"]) == (
        "look at this purple things .",
        "look at this purple thing .",
    )
    fast = [json.loads(line) for line in (tasks_dir() / "zorro-fast.jsonl").read_text(encoding="utf-8").splitlines()]
    by_key = {(r["UID"], r["pairID"]): r for r in every}
    assert len(fast) == 1150 and all(by_key[r["UID"], r["pairID"]] == r for r in fast)
    assert all(sum(r["UID"] == p for r in fast) == 50 for p in paradigms)
    order = [(r["UID"], int(r["pairID"])) for r in fast]
    assert order == sorted(order) and int(fast[49]["pairID"]) > 1000  # a draw over the file, kept in file order
    card = (tasks_dir() / "zorro" / "README.md").read_text(encoding="utf-8")
    assert "Copyright (c) 2020 Philip Huebner" in card and MIT in card and "https://github.com/phueb/Zorro" in card
    assert "46,000 pairs, 23 paradigms of 2,000 pairs" in card and "doi:10.18653/v1/2021.conll-1.49" in card


def test_bundled_zorro_is_a_minimal_pair_task_with_a_fast_twin() -> None:
    assert kind_of("bundled:zorro").kind == kind_of("bundled:zorro-fast").kind == "pairs"
    assert kind_of("bundled:zorro") is MinimalPairs  # lmpt/tasks/zorro/ is a folder, but no task's files
    assert (
        fast_twin("bundled:zorro") == "bundled:zorro-fast" and fast_twin("bundled:zorro-fast") == "bundled:zorro-fast"
    )
    pairs = read_pairs("bundled:zorro-fast")
    assert pairs[0] == MinimalPair(
        "those healthy lions did not happen .",
        "those healthy lion did not happen .",
        "agreement_determiner_noun",
        "agreement_determiner_noun-across_1_adjective",
    )


def _paradigm(n: int, stem: str) -> str:
    return "".join(f"{stem} bad {i} .\n{stem} good {i} .\n" for i in range(n))


def _fake_zorro(root: Path, files: dict[str, str] | None = None) -> Path:
    folder = root / "sentences" / "babyberta"
    folder.mkdir(parents=True)
    files = files or {"zeta-one.txt": _paradigm(60, "z"), "filler-gap-wh_question.txt": _paradigm(3, "f")}
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    (root / "LICENSE").write_text(f"MIT License\n\nCopyright (c) 2020 Someone\n\n{MIT}\n", encoding="utf-8")
    return root


def _built(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_fake_zorro_builds_the_same_bytes_twice_from_a_folder_or_a_git_clone(tmp_path: Path) -> None:
    source = _fake_zorro(tmp_path / "zorro")
    make_zorro.build(source, tmp_path / "a")
    make_zorro.build(source, tmp_path / "b")
    first = _built(tmp_path / "a")
    assert first == _built(tmp_path / "b") and set(first) == set(SHIPPED)
    every = [
        json.loads(line) for line in zstandard.ZstdDecompressor().decompress(first["zorro.jsonl.zst"]).splitlines()
    ]
    assert [r["UID"] for r in every] == ["filler-gap-wh_question"] * 3 + ["zeta-one"] * 60  # by file name
    assert every[0] == {
        "sentence_good": "f good 0 .",
        "sentence_bad": "f bad 0 .",
        "field": "filler-gap",
        "UID": "filler-gap-wh_question",
        "pairID": "0",
    }
    fast = [json.loads(line) for line in first["zorro-fast.jsonl"].decode("utf-8").splitlines()]
    assert fast[:3] == every[:3] and len(fast) == 3 + 50  # a paradigm of fewer pairs than the draw keeps them all
    assert fast[3:] == [r for r in every[3:] if r in fast[3:]] and fast[3:] != every[3:53]  # drawn, in file order
    assert b"commit unknown" in first["zorro/README.md"] and MIT.encode() in first["zorro/README.md"]
    git = ["git", "-C", str(source), "-c", "user.name=lmpt", "-c", "user.email=lmpt@example.com"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "zorro"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    (source / "sentences" / "babyberta" / "zeta-one.txt").write_text("uncommitted\n", encoding="utf-8")  # HEAD is read
    make_zorro.build(source, tmp_path / "git")
    from_git = _built(tmp_path / "git")
    assert {k: v for k, v in from_git.items() if k != "zorro/README.md"} == {
        k: v for k, v in first.items() if k != "zorro/README.md"
    }
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert f"commit {head}".encode() in from_git["zorro/README.md"]


BAD_SOURCES = {
    "no sentences/babyberta": ({}, "has no sentences/babyberta/"),
    "an odd number of lines": (
        {"case-pronoun.txt": _paradigm(2, "c") + "c bad 2 .\n"},
        "has 5 sentences, an odd number",
    ),
    "an unpaired sentence": (
        {"case-pronoun.txt": "c bad 0 .\n\nc good 0 .\nc bad 1 .\n"},
        "case-pronoun.txt:2 is empty",
    ),
    "a pair of one sentence twice": ({"case-pronoun.txt": "same .\nsame .\n"}, "are the same sentence"),
    "a file not named PHENOMENON-PARADIGM": ({"pronoun.txt": _paradigm(1, "p")}, "not named PHENOMENON-PARADIGM"),
}


@pytest.mark.parametrize("case", list(BAD_SOURCES))
def test_input_not_in_zorros_layout_exits_2_in_one_line_writing_nothing(tmp_path: Path, case: str, capsys) -> None:
    files, expected = BAD_SOURCES[case]
    source = tmp_path / "zorro"
    if files:
        _fake_zorro(source, files)
    else:
        (source / "sentences").mkdir(parents=True)
        (source / "LICENSE").write_text("MIT License\n", encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        make_zorro.main([str(source), "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.count("\n") == 1 and expected in error, error
    assert not (tmp_path / "out").exists()


def test_the_command_exits_2_on_a_folder_without_zorros_sentences(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--out", str(tmp_path / "out")], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == "" and not (tmp_path / "out").exists()
    assert done.stderr == (
        f"make_zorro: error: {tmp_path} has no sentences/babyberta/ holding .txt files: give a clone of "
        "https://github.com/phueb/Zorro (or a copy of its files)\n"
    )


def _trained(shakespeare, arch: str, objective: str) -> Trained:
    torch.manual_seed(0)
    cfg = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_dim=64, max_seq_len=64)
    model = build_model(cfg, arch, shakespeare.tokenizer.vocab_size, shakespeare.tokenizer.special.pad).eval()
    config = OmegaConf.create({"data": {"seq_len": 32}, "trainer": {"seed": 0}})
    return Trained(model, shakespeare.tokenizer, config, arch, objective, Path("unused"))


def test_bundled_zorro_scores_per_paradigm_on_a_tiny_model(shakespeare) -> None:
    task = read_task("bundled:zorro", how=Scoring(batch_size=8, hidden=True))
    assert task.name == "zorro" and len(task.items) == 46_000
    subset = task.with_items(list(task.items)[::2000])  # the first pair of each paradigm
    result = subset.evaluate(_trained(shakespeare, "decoder", "clm"))
    assert result["n"] == 23 and len(result["paradigms"]) == 23 and len(result["fields"]) == 13
    assert 0 <= result["accuracy"] <= 1 and result["ties"] == sum(g["ties"] for g in result["paradigms"].values())
    assert all(g["n"] == 1 and "ties" in g for g in result["paradigms"].values())


def test_a_tie_counts_wrong_and_is_reported_overall_and_per_group() -> None:
    pairs = [MinimalPair("a b", "b a", "f1", "p1"), MinimalPair("c d", "d c", "f1", "p1"), MinimalPair("e", "f", "f2")]
    good, bad = [-2.0, -1.0, -5.0], [-2.0, -3.0, -4.0]  # a tie, right, wrong
    result = pair_figures(pairs, good, bad, good_tokens=[2, 2, 1], bad_tokens=[2, 2, 2])
    assert result["accuracy"] == pytest.approx(1 / 3) and result["ties"] == 1
    assert list(decode_outcomes(result["accuracy_items"])) == [0, 1, 0]
    assert result["equal_length"]["ties"] == 1 and result["equal_length"]["accuracy"] == 0.5
    assert {k: (g["accuracy"], g["ties"]) for k, g in result["paradigms"].items()} == {"p1": (0.5, 1), "-": (0.0, 0)}
    assert result["fields"]["f1"]["ties"] == 1 and result["fields"]["f2"]["ties"] == 0


@pytest.mark.parametrize(("arch", "objective"), [("decoder", "clm"), ("encoder", "mlm")])
def test_a_pair_of_one_sentence_twice_is_a_tie_and_wrong(shakespeare, arch: str, objective: str) -> None:
    pairs = [MinimalPair("the dog ran .", "the dog ran ."), MinimalPair("i saw the dog .", "i saw the dogs .")]
    task = read_task("bundled:zorro-fast", how=Scoring(batch_size=1, hidden=True)).with_items(pairs)
    result = task.evaluate(_trained(shakespeare, arch, objective))  # one row a pass
    assert result["ties"] >= 1 and decode_outcomes(result["accuracy_items"])[0] == 0


def test_a_record_from_before_ties_were_counted_still_renders(capsys) -> None:
    pairs = [MinimalPair("a", "b", "f", "p1"), MinimalPair("c", "d", "f", "p2")]
    result = pair_figures(pairs, [-1.0, -1.0], [-2.0, -1.0], [1, 1], [1, 1])
    result |= {"objective": "clm", "arch": "decoder", "method": "log-likelihood", "task": "old"}
    PairsResult(result).render()
    assert "ties (wrong)" in capsys.readouterr().out
    old = {k: v for k, v in result.items() if k != "ties"}
    old["paradigms"] = {k: {f: x for f, x in g.items() if f != "ties"} for k, g in result["paradigms"].items()}
    PairsResult(old).render()  # a record written before: no ties to show, nothing refused
    assert "p2" in capsys.readouterr().out
    assert np.isclose(result["accuracy"], 0.5)


@pytest.mark.parametrize("odd", ["folder", "dangling link"])
def test_a_folder_or_a_dangling_link_named_like_a_paradigm_exits_2_in_one_line(
    tmp_path: Path, odd: str, capsys
) -> None:
    source = _fake_zorro(tmp_path / "zorro")
    named = source / "sentences" / "babyberta" / "case-pronoun.txt"
    if odd == "folder":
        named.mkdir()
    else:
        named.symlink_to(tmp_path / "nowhere.txt")
    with pytest.raises(SystemExit) as stopped:
        make_zorro.main([str(source), "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err
    expected = "a folder" if odd == "folder" else "a link to nothing"
    assert stopped.value.code == 2 and error.count("\n") == 1 and f"case-pronoun.txt is {expected}" in error, error
    assert not (tmp_path / "out").exists()
