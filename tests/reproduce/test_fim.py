"""lmpt-reproduce fim: each claim's verdict from made-up runs (free, a clear cost where the grid meets the paper's
conditions and where it misses them, one seed, runs missing, a cost proportional to the sentinel share or not), the
sentinel share measured from real text (short documents against long ones), the dry run at both scales, and its bad
input in one line."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from test_reproduce import refused

from lmpt.errors import LmptError
from lmpt.reproduce import grid
from lmpt.reproduce.cli import reproduce
from lmpt.reproduce.fim import reproduction as fim_reproduction
from lmpt.reproduce.fim.findings import PAPER_SMALLEST
from lmpt.reproduce.fim.inputs import FimInputs, measure_inputs
from lmpt.reproduce.fim.reproduction import FimForFree
from lmpt.reproduce.reproduction import FinishedRun, Scale
from lmpt.reproduce.verdict import ClaimVerdict, Verdict

TEXT = {"shakespeare": (44.0, 0.034), "tinystories": (185.0, 0.011), "wikitext": (6700.0, 0.003)}
"""Each bundled corpus's mean document length and sentinel share, as the made-up measurement reports them."""


@pytest.fixture(autouse=True)
def measured(monkeypatch) -> None:
    """The analysis's measurement of each corpus, made up (the real one reads the token cache)."""

    def made_up(keys: tuple[str, ...], steps: int) -> FimInputs:
        corpus = next(k.split("=", 1)[1] for k in keys if k.startswith("data="))
        length, share = TEXT[corpus]
        return FimInputs(1000, round(1000 * (length + 1)), round(share * 100_000), 100_000, steps)

    monkeypatch.setattr(fim_reproduction, "measure_inputs", made_up)


def made_up_runs(
    reproduction: FimForFree, cost: Callable[[str], float], noise: float = 0.05, drop: str = ""
) -> list[FinishedRun]:
    """Every planned run completed: clm at about 6 bits a token, fim `cost(corpus)` % above it (with `noise` % between
    seeds), fim's FIM loss 0.5 bits below clm's; runs whose name holds `drop` left out."""
    rng = np.random.default_rng(0)
    runs = []
    for run in reproduction.runs():
        if drop and drop in run.name:
            continue
        labels = run.labels
        clm = 6.0 + 0.05 * labels["seed"]
        rearranged = labels["objective"] == "fim"
        bits = clm * (1 + (cost(labels["corpus"]) + rng.normal(0, noise)) / 100) if rearranged else clm
        fim_loss = (7.0 - (0.5 if rearranged else 0.0) + rng.normal(0, 0.01)) * math.log(2)
        record = {
            "step": 10,
            "flops": run.flops,
            "val_bits_per_token": bits,
            "val_fim_psm_loss": fim_loss,
            "val_fim_spm_loss": fim_loss - 0.1,
        }
        runs.append(FinishedRun(run, {"status": "completed", "train_s": 1.0}, [record]))
    return runs


def verdicts(claims: list[ClaimVerdict]) -> dict[str, ClaimVerdict]:
    return {c.claim.split(" (")[0]: c for c in claims}


def test_fim_for_free_where_the_runs_show_it_is_reproduced_at_any_scale() -> None:
    reproduction = FimForFree(seeds=3)
    findings = reproduction.analyse(made_up_runs(reproduction, lambda corpus: 0.0))
    claims = verdicts(findings.claims)
    for corpus in TEXT:
        free = claims[f"FIM-for-free on {corpus}"]
        assert free.verdict is Verdict.reproduced, free.sentence()
        assert "shown although the grid misses non-embedding parameters" in free.sentence()
    assert claims["FIM loss far lower"].verdict is Verdict.reproduced
    # no cost to apportion: neither a slope nor a fall can be told from none
    assert claims["the cost comes from lost text"].verdict is Verdict.inconclusive
    names = [name for name, _ in findings.sections]
    assert "Every run" in names
    every = dict(findings.sections)["Every run"]
    assert all(run.name in every for run in reproduction.runs())
    conditions = {c.name: c for c in findings.conditions}
    assert conditions["document length: wikitext"].met is True
    assert (
        conditions["document length: shakespeare"].met is False
        and "44 tokens" in conditions["document length: shakespeare"].grid
    )
    assert conditions["context length"].met is False and conditions["context length"].grid == "512"
    assert conditions["sentinel share: tinystories"].grid.startswith("1.10%")


def test_a_clear_cost_where_the_grid_meets_the_papers_conditions_is_not_reproduced() -> None:
    reproduction = FimForFree(Scale.paper, seeds=3)
    findings = reproduction.analyse(made_up_runs(reproduction, lambda corpus: 3.0))
    free = verdicts(findings.claims)["FIM-for-free on wikitext"]
    assert free.verdict is Verdict.not_reproduced, free.sentence()
    assert all(c.met is not False for c in findings.conditions), findings.conditions
    assert [c.claim for c in findings.claims] == [
        "FIM-for-free on wikitext (documents of 6,700 tokens)",
        "FIM loss far lower (PSM and SPM)",
    ]


def test_a_clear_cost_where_the_grid_misses_a_condition_is_inconclusive_naming_it() -> None:
    reproduction = FimForFree(seeds=3)
    findings = reproduction.analyse(made_up_runs(reproduction, lambda corpus: 3.0))
    free = verdicts(findings.claims)["FIM-for-free on wikitext"]
    assert free.verdict is Verdict.inconclusive
    assert "lies wholly outside" in free.sentence() and "the grid misses non-embedding parameters" in free.sentence()
    assert "context length (512 against 2,048)" in free.sentence()


def test_one_seed_gives_no_interval_and_no_verdict_from_it() -> None:
    reproduction = FimForFree(seeds=1)
    findings = reproduction.analyse(made_up_runs(reproduction, lambda corpus: 3.0))
    for claim in findings.claims:
        assert claim.verdict is Verdict.inconclusive, claim.sentence()
        assert "no interval" in claim.sentence()
    assert "With one seed there is no interval" in dict(findings.sections)["The grid"]


def test_a_claim_whose_runs_are_missing_has_no_verdict() -> None:
    reproduction = FimForFree(seeds=2)
    findings = reproduction.analyse(made_up_runs(reproduction, lambda corpus: 0.1, drop="wikitext-tiny"))
    claims = verdicts(findings.claims)
    gone = claims["FIM-for-free on wikitext"]
    assert gone.verdict is None and "runs not completed: wikitext-tiny-" in gone.sentence()
    assert claims["FIM-for-free on shakespeare"].verdict is Verdict.reproduced
    assert claims["FIM loss far lower"].verdict is None
    nothing = reproduction.analyse([])
    assert all(c.verdict is None for c in nothing.claims) and nothing.headline == "no runs yet"


def test_a_cost_proportional_to_the_sentinel_share_is_lost_text_and_one_with_an_intercept_is_not() -> None:
    reproduction = FimForFree(seeds=3)

    def proportional(corpus: str) -> float:
        return 40 * TEXT[corpus][1]  # 0.4 points of cost a point of share

    claims = verdicts(reproduction.analyse(made_up_runs(reproduction, proportional, noise=0.02)).claims)
    assert claims["the cost comes from lost text"].verdict is Verdict.reproduced
    assert claims["fim's cost falls as documents lengthen"].verdict is Verdict.reproduced
    assert claims["FIM-for-free on wikitext"].verdict is Verdict.reproduced
    assert claims["FIM-for-free on shakespeare"].verdict is Verdict.inconclusive  # a cost, on 44-token documents

    def with_intercept(corpus: str) -> float:
        return 1.5 + 40 * TEXT[corpus][1]

    claims = verdicts(reproduction.analyse(made_up_runs(reproduction, with_intercept, noise=0.02)).claims)
    lost = claims["the cost comes from lost text"]
    assert lost.verdict is Verdict.not_reproduced and "intercept excludes 0" in lost.sentence()


def _write(folder: Path, documents: list[str]) -> Path:
    folder.mkdir()
    for i, text in enumerate(documents):
        (folder / f"part{i}.txt").write_text(text)
    return folder


def test_the_sentinel_share_is_measured_from_the_runs_batches_and_falls_with_document_length(
    tmp_path, repo_root
) -> None:
    """The same text, as speaker turns (documents of tens of tokens) and as four whole files (thousands): fim's
    batches hold several times more sentinels on the short documents; clm's (fim_rate 0) none."""
    text = (repo_root / "lmpt" / "corpora" / "tinyshakespeare.txt").read_text()[:120_000]
    quarters = [text[i * 30_000 : (i + 1) * 30_000] for i in range(4)]
    folder = _write(tmp_path / "text", quarters)
    run = (
        "objective=fim",
        "data=text",
        f"data.paths=[{folder}]",
        "tokenizer.vocab_size=512",
        "data.seq_len=256",
        "trainer.batch_size=4",
        "trainer.max_steps=100",
    )
    short = measure_inputs((*run, "data.documents=blank_line"), 20)
    long = measure_inputs((*run, "data.documents=file"), 20)
    assert short.steps == long.steps == 20 and short.positions == long.positions == 20 * 4 * 256
    assert short.mean_document < 100 and long.mean_document > 3000
    assert short.sentinel_share > 3 * long.sentinel_share > 0
    assert measure_inputs((*run, "objective.fim_rate=0.0"), 5).sentinels == 0
    with pytest.raises(LmptError, match="objective=clm has no FIM sentinels"):
        measure_inputs(("objective=clm", *run[1:]), 5)


def test_the_dry_run_plans_both_scales_and_writes_nothing(tmp_path, capsys, monkeypatch, lmpt_cache_dir) -> None:
    monkeypatch.chdir(tmp_path)
    cached = sorted(lmpt_cache_dir.rglob("*"))
    reproduce(["fim", "dry_run=true", "slots=2"])
    out = capsys.readouterr().out
    laptop = FimForFree()
    assert f"scale=laptop: {len(laptop.runs())} runs" in out and "wikitext-tiny-1M-fim-seed2" in out
    assert "objective.fim_rate=0.0" in out and "downstream.tasks=[bundled:zorro-fast]" in out
    assert "GPU-hours" in out and "about" in out
    plan = grid.plan_grid(laptop, tmp_path / "x", "2", 1e9, dry_run=True)
    assert plan.estimate_s < 95 * 60  # 2 CPU slots finish it in about 90 minutes
    reproduce(["fim", "scale=paper", "dry_run=true"])
    out = capsys.readouterr().out
    assert "scale=paper: 6 runs" in out and "data.seq_len=2048" in out and "model.d_model=512" in out
    paper = FimForFree(Scale.paper)
    assert paper.shapes[0].matmul_parameters > PAPER_SMALLEST  # the paper's smallest model, or larger
    assert sum(r.paper_flops for r in paper.runs()) == pytest.approx(
        6 * paper.shapes[0].matmul_parameters * 6 * 1.1e9, rel=0.01
    )
    assert list(tmp_path.iterdir()) == [] and sorted(lmpt_cache_dir.rglob("*")) == cached


def test_bad_grids_are_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch, repo_root) -> None:
    monkeypatch.chdir(tmp_path)
    assert "fim takes no epochs= key: it takes corpus, ladder, budgets" in refused(
        ["fim", "epochs=[4]"], capsys, monkeypatch
    )
    assert "ladder=big must be a model width (a whole number) or one of micro, tiny" in refused(
        ["fim", "ladder=[big]", "dry_run=true"], capsys, monkeypatch
    )
    assert "names a width twice" in refused(["fim", "ladder=[micro,64]", "dry_run=true"], capsys, monkeypatch)
    assert "budgets=1000 buys fewer than 20 optimizer steps of 2,048 tokens" in refused(
        ["fim", "budgets=[1000]", "dry_run=true"], capsys, monkeypatch
    )
    assert "budgets=inf must be a finite number" in refused(["fim", "budgets=[inf]"], capsys, monkeypatch)
    assert "corpus=nowhere is neither a data group" in refused(["fim", "corpus=[nowhere]"], capsys, monkeypatch)
    # data=text and data=hf need a path or a dataset besides: no corpus on their own (a dry run planned them)
    for form in ("text", "hf"):
        said = refused(["fim", f"corpus=[{form}]", "dry_run=true"], capsys, monkeypatch)
        assert f"corpus={form} is a form of data group that names no text" in said and "wikitext" in said, said
    assert "names wikitext twice" in refused(["fim", "corpus=[wikitext,wikitext]"], capsys, monkeypatch)
    small = tmp_path / "small.txt"
    small.write_text((repo_root / "lmpt" / "corpora" / "tinyshakespeare.txt").read_text()[:200_000])
    err = refused(
        ["fim", f"corpus=[{small}]", "ladder=[micro]", "budgets=[1000000]", "seeds=1", "slots=1", "dir=g"],
        capsys,
        monkeypatch,
    )
    assert "corpus small holds" in err and "give a text of at least 250,000 tokens" in err
    # a text lmpt-prepare refuses (one word: nothing to hold out) is refused naming this command's key
    (tmp_path / "one.txt").write_text("word\n")
    err = refused(["fim", f"corpus=[{tmp_path / 'one.txt'}]", "ladder=[micro]", "dir=g"], capsys, monkeypatch)
    assert "corpus=one cannot be prepared for this grid: give a longer text" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.txt", "small.txt"]
