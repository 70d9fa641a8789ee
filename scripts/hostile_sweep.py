"""Hostile inputs against lmpt's surfaces: lmpt-reproduce (its names, and every key: scale, corpus, ladder, budgets,
unique_tokens, epochs, seeds, slots, device, launcher, max_minutes, dry_run, reuse, dir, out, readme), lmpt-study's
plan and precision (a dry run with bad study.* keys, trainer.amp, trainer.precision, a deprecated key), a run's text
and resume from another folder (a copy of a finished run resumed, or scored with `lmpt-eval RUN held_out=true`, from a
folder holding the same text, another text or none; its RUN/text.json deleted or damaged; keys a resume may not
change), Hydra sweeps (-m) and yes-or-no keys, the objectives' measures in lmpt-eval, Zorro (bundled:zorro,
scripts/make_zorro.py) and lmpt-generate's printing. Each case runs a real command in a subprocess and is judged by
what a user sees: `ok` (exit 0 with the expected words), `refused` (exit 2 with one `lmpt: error:` line naming the
problem, or the script's own one line), or a `FAIL` (a traceback, another exit code, a refusal of several lines, no
answer within CASE_TIMEOUT, or something written into the case's folder where nothing should be).

    python scripts/hostile_sweep.py --out docs/hostile_sweep.md   # every case, the table written there
    python scripts/hostile_sweep.py --only reproduce              # the cases whose name starts so
    python scripts/hostile_sweep.py --only study: --cache DIR     # DIR keeps the measured run rates between sweeps

Cases are named by surface: reproduce:, study:, resume:, eval: (eval: held_out for a run's text), sweep: (lmpt -m and
yes-or-no keys), zorro:, make_zorro:, generate:, fill:, compare:.

It trains four tiny runs first (clm, mdlm and fim on the bundled text, and clm on a corpus.txt of its own, 3 steps) in
a temporary folder, whose cache directory ($LMPT_CACHE_DIR) every case shares: the first laptop-scale dry run of
lmpt-reproduce measures its models' rates there (lmpt.study.rates, about 20 s a model), the later ones read them."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASE_TIMEOUT = 180
"""Seconds a case may take: every case answers in seconds, or refuses; one that trains instead is a failure."""
TINY = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.ffn_dim=64",
    "trainer.max_steps=3",
]


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    expect: str
    """"ok" or "refused"."""
    words: str = ""
    """Words the answer must contain (the refusal's line, or the output)."""
    writes_nothing: bool = False
    """The case's working folder must hold nothing new (what `setup` put there aside)."""
    setup: Callable[[Path], None] | None = None
    """Run before the command with the case's working folder: files it needs there (a corpus.txt), a copy of a run."""


def env(cache: Path) -> dict[str, str]:
    """The cases' environment: this checkout's lmpt, one thread, and the sweep's own cache directory (tokenizers,
    token caches and the run rates a laptop-scale dry run measures once, then reads)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), e.get("PYTHONPATH")]))
    e.setdefault("OMP_NUM_THREADS", "1")
    e["LMPT_CACHE_DIR"] = str(cache)
    e.pop("HYDRA_FULL_ERROR", None)
    return e


def py(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def gpu_visible() -> bool:
    """Whether torch sees a GPU here (the refusals of device=gpu and study.slot_device=gpu need a machine without)."""
    import torch

    return torch.cuda.is_available()


def put(*files: tuple[str, Path]) -> Callable[[Path], None]:
    """A setup that copies each (name, file) into the case's folder."""

    def setup(cwd: Path) -> None:
        for name, source in files:
            shutil.copy(source, cwd / name)

    return setup


def copied_run(source: Path, copy: Path, corpus: Path | None = None, text_json: str = "") -> Callable[[Path], None]:
    """A setup that copies the finished run `source` to `copy` (the originals stay as other cases read them), puts
    `corpus` into the case's folder as corpus.txt, and does `text_json` to the copy's RUN/text.json: deleted, damaged
    (JSON without its keys), binary (not UTF-8 JSON), empty, or a folder."""

    def setup(cwd: Path) -> None:
        shutil.copytree(source, copy)
        record = copy / "text.json"
        if text_json:
            record.unlink()
        if text_json == "damaged":
            record.write_text('{"fingerprint": 3}\n')
        elif text_json == "binary":
            record.write_bytes(b"\x00\xffnot json")
        elif text_json == "empty":
            record.write_text("")
        elif text_json == "folder":
            record.mkdir()
        if corpus is not None:
            shutil.copy(corpus, cwd / "corpus.txt")

    return setup


def cases(runs: dict[str, Path], files: dict[str, Path]) -> list[Case]:
    clm, mdlm, text = str(runs["clm"]), str(runs["mdlm"]), str(files["text"])
    rep = "lmpt.reproduce"
    out = [
        # lmpt-reproduce: names, keys and values
        Case("reproduce: unknown name", py(rep, "nope"), "refused", "no reproduction called 'nope'", True),
        Case("reproduce: empty name", py(rep, ""), "refused", "no reproduction called ''", True),
        Case("reproduce: name with a slash", py(rep, "../fim"), "refused", "no reproduction called", True),
        Case("reproduce: no name", py(rep), "refused", "takes NAME", True),
        Case("reproduce: two names", py(rep, "fim", "fim"), "refused", "takes NAME", True),
        Case("reproduce: unknown key", py(rep, "fim", "seed=1"), "refused", "unknown key 'seed'", True),
        Case("reproduce: seeds=0", py(rep, "fim", "seeds=0"), "refused", "seeds=0", True),
        Case("reproduce: seeds=-3", py(rep, "fim", "seeds=-3"), "refused", "seeds=-3", True),
        Case("reproduce: seeds=abc", py(rep, "fim", "seeds=abc"), "refused", "seeds", True),
        Case("reproduce: seeds=1.5", py(rep, "fim", "seeds=1.5"), "refused", "seeds", True),
        Case("reproduce: seeds=1000", py(rep, "fim", "seeds=1000"), "refused", "seeds=1000 is more than 100", True),
        Case("reproduce: max_minutes=0", py(rep, "fim", "max_minutes=0"), "refused", "max_minutes=0", True),
        Case("reproduce: max_minutes=-1", py(rep, "fim", "max_minutes=-1"), "refused", "max_minutes", True),
        Case("reproduce: max_minutes=nan", py(rep, "fim", "max_minutes=nan"), "refused", "max_minutes", True),
        Case(
            "reproduce: max_minutes=inf, dry run",
            py(rep, "fim", "max_minutes=inf", "dry_run=true"),
            "ok",
            "72 runs",
            True,
        ),
        Case("reproduce: max_minutes=x", py(rep, "fim", "max_minutes=x"), "refused", "max_minutes", True),
        Case("reproduce: slots=0", py(rep, "fim", "slots=0"), "refused", "slots", True),
        Case("reproduce: slots=999", py(rep, "fim", "slots=999"), "refused", "slots", True),
        Case("reproduce: slots=two", py(rep, "fim", "slots=two"), "refused", "slots", True),
        Case("reproduce: slots=-1", py(rep, "fim", "slots=-1"), "refused", "slots", True),
        Case("reproduce: dry_run=maybe", py(rep, "fim", "dry_run=maybe"), "refused", "dry_run", True),
        Case("reproduce: dry run", py(rep, "fim", "dry_run=true"), "ok", "72 runs", True),
        Case("reproduce: dry run, 1 seed", py(rep, "fim", "dry_run=true", "seeds=1"), "ok", "24 runs", True),
        Case("reproduce: dry run, 1 slot", py(rep, "fim", "dry_run=true", "slots=1"), "ok", "1 CPU slot", True),
        Case("reproduce: dry run, --help", py(rep, "--help"), "ok", "NAME", True),
        Case("reproduce: -h with a name", py(rep, "fim", "-h"), "ok", "lmpt-reproduce", True),
        Case("reproduce: dir is a file", py(rep, "fim", f"dir={text}", "dry_run=true"), "ok", "", False),
        Case(
            "reproduce: reuse with no runs",
            py(rep, "fim", "reuse=true", "dir=nothing", "out=o"),
            "ok",
            "wrote o/fim.md",
            False,
        ),
        Case("reproduce: key with no value", py(rep, "fim", "seeds="), "refused", "seeds", True),
        Case("reproduce: unicode name", py(rep, "fïm"), "refused", "no reproduction called", True),
        Case("reproduce: very long name", py(rep, "x" * 5000), "refused", "no reproduction called", True),
        # lmpt-eval: each objective measured by its own measure
        Case("eval: mdlm data", py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "json=true"), "ok", "bound"),
        Case("eval: mdlm data, seed 5", py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "seed=5"), "ok", "bound"),
        Case("eval: mdlm data, batch 1", py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "batch_size=1"), "ok"),
        Case("eval: mdlm data, seq_len 8", py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "seq_len=8"), "ok"),
        Case(
            "eval: mdlm data, seq_len 1",
            py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "seq_len=1"),
            "refused",
            "seq_len=1",
        ),
        Case(
            "eval: mdlm data, seq_len 10000",
            py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "seq_len=10000"),
            "refused",
            "seq_len=10000",
        ),
        Case(
            "eval: mdlm method=pll",
            py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "method=pll"),
            "refused",
            "diffusion bound",
        ),
        Case(
            "eval: mdlm method=bogus",
            py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "method=bogus"),
            "refused",
            "method=bogus",
        ),
        Case(
            "eval: mdlm empty file",
            py("lmpt.downstream.eval_cli", mdlm, f"data={files['empty']}"),
            "refused",
            "no text",
        ),
        Case("eval: mdlm one-word file", py("lmpt.downstream.eval_cli", mdlm, f"data={files['word']}"), "ok"),
        Case(
            "eval: mdlm binary file",
            py("lmpt.downstream.eval_cli", mdlm, f"data={files['binary']}"),
            "refused",
            "UTF-8",
        ),
        Case("eval: mdlm missing file", py("lmpt.downstream.eval_cli", mdlm, "data=/nope.txt"), "refused", "not found"),
        Case(
            "eval: mdlm task zorro-fast",
            py("lmpt.downstream.eval_cli", mdlm, "task=bundled:zorro-fast", "json=true"),
            "ok",
            "zorro",
        ),
        Case(
            "eval: mdlm batch_size=0",
            py("lmpt.downstream.eval_cli", mdlm, f"data={text}", "batch_size=0"),
            "refused",
            "batch_size=0",
        ),
        Case("eval: clm data", py("lmpt.downstream.eval_cli", clm, f"data={text}", "json=true"), "ok", "exact"),
        Case(
            "eval: clm method=pll",
            py("lmpt.downstream.eval_cli", clm, f"data={text}", "method=pll"),
            "refused",
            "method=pll scores encoders",
        ),
        Case(
            "eval: clm stride 0", py("lmpt.downstream.eval_cli", clm, f"data={text}", "stride=0"), "refused", "stride"
        ),
        Case(
            "eval: clm stride > seq_len",
            py("lmpt.downstream.eval_cli", clm, f"data={text}", "stride=999"),
            "refused",
            "stride",
        ),
        Case(
            "eval: clm empty file", py("lmpt.downstream.eval_cli", clm, f"data={files['empty']}"), "refused", "no text"
        ),
        Case("eval: clm one-word file", py("lmpt.downstream.eval_cli", clm, f"data={files['word']}"), "ok"),
        Case(
            "eval: clm data and task",
            py("lmpt.downstream.eval_cli", clm, f"data={text}", "task=bundled:zorro"),
            "refused",
            "one of them",
        ),
        Case(
            "eval: a folder that is no run",
            py("lmpt.downstream.eval_cli", str(files["dir"]), f"data={text}"),
            "refused",
            "run",
        ),
        # Zorro as a task
        Case("zorro: clm zorro-fast", py("lmpt.downstream.eval_cli", clm, "task=bundled:zorro-fast"), "ok", "ties"),
        Case("zorro: clm zorro (all)", py("lmpt.downstream.eval_cli", clm, "task=bundled:zorro", "json=true"), "ok"),
        Case(
            "zorro: clm zorro-fast control",
            py("lmpt.downstream.eval_cli", clm, "task=bundled:zorro-fast", "control=scratch", "json=true"),
            "ok",
            "gain",
        ),
        Case(
            "zorro: unknown bundled name", py("lmpt.downstream.eval_cli", clm, "task=bundled:zoro"), "refused", "zoro"
        ),
        Case(
            "zorro: a Zorro-like file with one sentence",
            py("lmpt.downstream.eval_cli", clm, f"task={files['pairs_bad']}"),
            "refused",
            "",
        ),
        Case(
            "zorro: a pairs file with a tie",
            py("lmpt.downstream.eval_cli", clm, f"task={files['pairs_tie']}", "json=true"),
            "ok",
            '"ties": 1',
        ),
        Case(
            "make_zorro: no folder",
            [sys.executable, str(REPO / "scripts/make_zorro.py"), "/nope", "--out", "o"],
            "refused",
            "",
            True,
        ),
        Case(
            "make_zorro: a folder without sentences",
            [sys.executable, str(REPO / "scripts/make_zorro.py"), str(files["dir"]), "--out", "o"],
            "refused",
            "",
            True,
        ),
        Case(
            "make_zorro: odd lines",
            [sys.executable, str(REPO / "scripts/make_zorro.py"), str(files["zorro_odd"]), "--out", "o"],
            "refused",
            "",
            True,
        ),
        Case(
            "make_zorro: empty paradigm",
            [sys.executable, str(REPO / "scripts/make_zorro.py"), str(files["zorro_empty"]), "--out", "o"],
            "refused",
            "",
            True,
        ),
        Case(
            "make_zorro: same sentence twice",
            [sys.executable, str(REPO / "scripts/make_zorro.py"), str(files["zorro_same"]), "--out", "o"],
            "refused",
            "",
            True,
        ),
        Case(
            "make_zorro: no licence",
            [sys.executable, str(REPO / "scripts/make_zorro.py"), str(files["zorro_nolicence"]), "--out", "o"],
            "refused",
            "",
            True,
        ),
        # fim: measured on the plain text, its FIM loss in training
        Case(
            "eval: fim data",
            py("lmpt.downstream.eval_cli", str(runs["fim"]), f"data={text}", "json=true"),
            "ok",
            "exact",
        ),
        Case(
            "eval: fim method=pll",
            py("lmpt.downstream.eval_cli", str(runs["fim"]), f"data={text}", "method=pll"),
            "refused",
            "method=pll scores encoders",
        ),
        Case("eval: fim zorro-fast", py("lmpt.downstream.eval_cli", str(runs["fim"]), "task=bundled:zorro-fast"), "ok"),
        Case(
            "fill: fim prefix and suffix",
            py("lmpt.inference.fill", str(runs["fim"]), "prefix=First", "suffix=speak.", "max_tokens=3"),
            "ok",
        ),
        Case("generate: fim", py("lmpt.inference.generate", str(runs["fim"]), "max_tokens=3"), "ok"),
        Case(
            "compare: the three runs",
            py("lmpt.report.compare", str(runs["clm"]), str(runs["mdlm"]), str(runs["fim"])),
            "ok",
        ),
        # lmpt-generate
        Case("generate: clm", py("lmpt.inference.generate", clm, "max_tokens=4"), "ok"),
        Case("generate: clm max_tokens=0", py("lmpt.inference.generate", clm, "max_tokens=0"), "refused", "max_tokens"),
        Case("generate: mdlm", py("lmpt.inference.generate", mdlm, "max_tokens=4", "steps=2"), "ok"),
        Case("generate: mdlm steps=0", py("lmpt.inference.generate", mdlm, "steps=0"), "refused", "steps"),
        Case(
            "generate: clm emoji prompt",
            py("lmpt.inference.generate", clm, "prompt=:smile: [b]x", "max_tokens=2"),
            "ok",
            ":smile: [b]x",
        ),
    ]
    for objective in ("clm", "mdlm"):
        for key, value, words in (
            ("seq_len", "0", "seq_len"),
            ("seq_len", "-5", "seq_len"),
            ("batch_size", "-1", "batch_size"),
            ("seed", "x", "seed"),
            ("device", "tpu", "device"),
            ("documents", "bogus", "documents"),
            ("json", "perhaps", "json"),
            ("control", "maybe", "control"),
            ("choice_pll", "half", "choice_pll"),
            ("stride", "-1", "stride"),
        ):
            out.append(
                Case(
                    f"eval: {objective} {key}={value}",
                    py("lmpt.downstream.eval_cli", str(runs[objective]), f"data={text}", f"{key}={value}"),
                    "refused",
                    words,
                )
            )
        for task in ("bundled:zorro-fast", "bundled:blimp-fast", f"{files['pairs_tie']}", "bundled:shakespeare-cloze"):
            out.append(
                Case(
                    f"eval: {objective} task={Path(task).name}",
                    py("lmpt.downstream.eval_cli", str(runs[objective]), f"task={task}", "json=true"),
                    "ok",
                )
            )
    return [
        *out,
        *reproduce_cases(runs, files),
        *study_cases(),
        *resume_cases(runs, files),
        *eval_cases(runs, files),
        *sweep_cases(),
    ]


def reproduce_cases(runs: dict[str, Path], files: dict[str, Path]) -> list[Case]:
    """lmpt-reproduce's keys and its scale. Most are refused in one line before anything is planned; a dry run at
    scale=paper plans at once, one at scale=laptop reads its models' rates (measured by the first, then cached); a
    launch that is refused is refused before anything trains or is written."""
    rep = "lmpt.reproduce"
    dry = ("scale=paper", "dry_run=true")  # a plan that needs no measured rate
    reuse = ("reuse=true", "dir=nothing", "out=o")  # the document from no runs: written at once
    paper_runs = {"fim": "6 runs", "repetition": "240 runs", "crossover": "108 runs", "diffusion-gap": "48 runs"}
    one_text = ("seeds=1", "max_minutes=inf")  # a launch reaching the text's check (its refusal comes before training)
    grid_run = "shakespeare-micro-300k-clm-seed0"

    def other_grid(cwd: Path) -> None:  # a run of other keys under the name of fim's first run
        if not (files["other_grid"] / grid_run).exists():
            shutil.copytree(runs["clm"], files["other_grid"] / grid_run)

    def refused(name: str, words: str, *argv: str) -> Case:
        return Case(f"reproduce: {name}", py(rep, *argv), "refused", words, True)

    def planned(name: str, words: str, *argv: str) -> Case:
        return Case(f"reproduce: {name}", py(rep, *argv), "ok", words, True)

    out = [
        # scale=: laptop or paper; paper is planned anywhere and launched only where a GPU or SLURM is
        refused("scale=huge", "scale=huge is unknown", "fim", "scale=huge"),
        refused("scale= (empty)", "scale= is unknown", "fim", "scale=", "dry_run=true"),
        refused("scale=LAPTOP", "scale=LAPTOP is unknown", "fim", "scale=LAPTOP", "dry_run=true"),
        refused("scale=[laptop]", "is unknown", "fim", "scale=[laptop]", "dry_run=true"),
        refused("SCALE=paper (a key's case)", "unknown key 'SCALE'", "fim", "SCALE=paper"),
        *(planned(f"{name} scale=paper, dry run", paper_runs[name], name, *dry) for name in paper_runs),
        *(
            refused(f"{name} scale=paper without a GPU", "dry_run=true plans it here", name, "scale=paper")
            for name in paper_runs
        ),
        refused("scale=paper dry_run=false", "dry_run=true plans it here", "fim", "scale=paper", "dry_run=false"),
        planned(
            "scale=paper then scale=laptop, dry run", "72 runs", "fim", "scale=paper", "scale=laptop", "dry_run=true"
        ),
        # device= and launcher=
        refused("device=tpu", "device=tpu must be cpu or gpu", "fim", "device=tpu"),
        refused("device=GPU", "device=GPU must be cpu or gpu", "fim", "device=GPU", "dry_run=true"),
        planned("device=gpu, dry run (planned on CPU slots)", "72 runs", "fim", "device=gpu", "dry_run=true"),
        refused("launcher=pbs", "launcher=pbs must be local or slurm", "fim", "launcher=pbs"),
        refused("launcher= (empty)", "must be local or slurm", "fim", "launcher="),
        planned("launcher=slurm, dry run", "72 runs", "fim", "launcher=slurm", "dry_run=true"),
        planned("scale=paper launcher=slurm, dry run", "6 runs", "fim", "launcher=slurm", *dry),
        # corpus=: a data group, a path to text, nothing that exists; checked at launch before anything trains
        planned("corpus=[shakespeare], dry run", "24 runs", "fim", "corpus=[shakespeare]", "dry_run=true"),
        planned("corpus=shakespeare (no brackets), dry run", "6 runs", "fim", "corpus=shakespeare", *dry),
        planned("corpus=[a text file], dry run", "6 runs", "fim", f"corpus=[{files['text']}]", *dry),
        planned("corpus=[c4] at laptop scale, dry run", "24 runs", "fim", "corpus=[c4]", "dry_run=true"),
        refused("corpus=[c4] at laptop scale, max_minutes=1", "max_minutes=1", "fim", "corpus=[c4]", "max_minutes=1"),
        planned("corpus=[] (the scale's)", "6 runs", "fim", "corpus=[]", *dry),
        refused("corpus=[a missing path]", "neither a data group", "fim", "corpus=[/nonexistent/x.txt]", *dry),
        refused("corpus=[nosuchgroup]", "corpus=nosuchgroup", "fim", "corpus=[nosuchgroup]", *dry),
        refused("corpus named twice", "names shakespeare twice", "fim", "corpus=[shakespeare,shakespeare]", *dry),
        refused("repetition two corpora", "must be one text", "repetition", "corpus=[shakespeare,wikitext]", *dry),
        refused("crossover two corpora", "crossover takes one", "crossover", "corpus=[shakespeare,wikitext]", *dry),
        refused(
            "diffusion-gap two corpora", "reads one corpus", "diffusion-gap", "corpus=[shakespeare,wikitext]", *dry
        ),
        refused("corpus=[an empty file]", "empty", "fim", f"corpus=[{files['empty']}]", *one_text),
        refused("corpus=[a folder of no text]", "holds no text files", "fim", f"corpus=[{files['dir']}]", *one_text),
        refused("corpus=[a one-word file]", "corpus", "fim", f"corpus=[{files['word']}]", *one_text),
        refused("corpus=[text] (a group of no paths)", "data.paths is empty", "fim", "corpus=[text]", *one_text),
        refused("corpus=[hf] (a group of no name)", "data.name", "fim", "corpus=[hf]", *one_text),
        refused("corpus=[a glob matching nothing]", "not found", "fim", f"corpus=[{files['dir']}/*.none]", *one_text),
        # ladder=: widths (and fim's micro, tiny; diffusion-gap's model groups)
        planned("ladder=[micro] seeds=1, dry run", "12 runs", "fim", "ladder=[micro]", "seeds=1", "dry_run=true"),
        refused("ladder=[micro,micro]", "names a width twice", "fim", "ladder=[micro,micro]", *dry),
        refused("ladder=[64,64]", "names a width twice", "fim", "ladder=[64,64]", *dry),
        refused("ladder=[inf]", "ladder=inf", "fim", "ladder=[inf]", *dry),
        refused("ladder=[nan]", "ladder=nan", "fim", "ladder=[nan]", *dry),
        refused("ladder=[-64]", "ladder width -64", "fim", "ladder=[-64]", *dry),
        refused("ladder=[0]", "ladder width 0", "fim", "ladder=[0]", *dry),
        refused("ladder=[huge]", "ladder=huge", "fim", "ladder=[huge]", *dry),
        refused("ladder=[1e9]", "ladder=1e9", "fim", "ladder=[1e9]", *dry),
        refused("ladder=[2] (all embedding)", "too small for the 4,096-piece tokenizer", "fim", "ladder=[2]", *dry),
        # a width whose heads (one a 32 dimensions) do not divide it, or hold an odd number of dimensions: lmpt
        # cannot build the model, so the plan must not hold it
        refused("ladder=[33] (odd head width)", "ladder", "fim", "ladder=[33]", *dry),
        refused("repetition ladder=[200,300] (heads do not divide)", "ladder", "repetition", "ladder=[200,300]", *dry),
        refused("repetition one size only", "gives one model size", "repetition", "ladder=[256]", *dry),
        refused("repetition the same size twice", "gives one model size", "repetition", "ladder=[256,256]", *dry),
        refused("repetition ladder=[inf,32]", "ladder=inf", "repetition", "ladder=[inf,32]", *dry),
        refused("repetition ladder=[nan,32]", "ladder=nan", "repetition", "ladder=[nan,32]", *dry),
        refused("repetition ladder=[-16,32]", "ladder=-16", "repetition", "ladder=[-16,32]", *dry),
        refused("repetition ladder=[0,32]", "ladder=0", "repetition", "ladder=[0,32]", *dry),
        refused("repetition ladder=[128.5,256] (no whole width)", "128.5", "repetition", "ladder=[128.5,256]", *dry),
        refused("repetition ladder=[16,1024] (no base law)", "base law", "repetition", "ladder=[16,1024]"),
        refused("crossover ladder width 1e8", "past any model", "crossover", "ladder=[99999999,64]", *dry),
        refused("crossover ladder=[nan,64]", "ladder=nan", "crossover", "ladder=[nan,64]", *dry),
        refused("diffusion-gap ladder=[inf,64]", "'inf'", "diffusion-gap", "ladder=[inf,64]", *dry),
        refused("diffusion-gap ladder=[64,64]", "twice", "diffusion-gap", "ladder=[64,64]", *dry),
        # budgets=, unique_tokens=, epochs=: lists of finite numbers, each reproduction taking its own
        planned("budgets=[] (the scale's)", "6 runs", "fim", "budgets=[]", *dry),
        refused("budgets=[inf]", "budgets=inf", "fim", "budgets=[inf]", *dry),
        refused("budgets=[nan]", "budgets=nan", "fim", "budgets=[nan]", *dry),
        refused("budgets=[-1e6]", "budgets=-1e6", "fim", "budgets=[-1e6]", *dry),
        refused("budgets=[0]", "budgets=0", "fim", "budgets=[0]", *dry),
        refused("budgets=[1e400]", "budgets=1e400", "fim", "budgets=[1e400]", *dry),
        refused("budgets=[lots]", "budgets=lots", "fim", "budgets=[lots]", *dry),
        refused("budgets=[100] (under 20 steps)", "fewer than 20 optimizer steps", "fim", "budgets=[100]", *dry),
        refused("diffusion-gap one budget", "is one budget", "diffusion-gap", "budgets=[1e6]", *dry),
        refused("diffusion-gap a budget twice", "twice", "diffusion-gap", "budgets=[1e6,1e6]", *dry),
        refused("crossover takes no budgets", "crossover takes no budgets=", "crossover", "budgets=[1e6]", *dry),
        refused("repetition budgets=[inf]", "budgets=inf", "repetition", "budgets=[inf]", *dry),
        refused("repetition budgets=[1]", "budgets=1", "repetition", "budgets=[1]", *dry),
        refused("repetition budgets=[250000] (no base law)", "base law", "repetition", "budgets=[250000]"),
        planned("repetition unique_tokens=[] (the scale's)", "240 runs", "repetition", "unique_tokens=[]", *dry),
        refused("repetition unique_tokens=[nan]", "unique_tokens=nan", "repetition", "unique_tokens=[nan]", *dry),
        refused("repetition unique_tokens=[0]", "unique_tokens=0", "repetition", "unique_tokens=[0]", *dry),
        refused("repetition unique_tokens=[1e400]", "unique_tokens=1e400", "repetition", "unique_tokens=[1e400]", *dry),
        refused("repetition unique_tokens=[-5]", "unique_tokens=-5", "repetition", "unique_tokens=[-5]", *dry),
        refused("repetition unique_tokens=[abc]", "unique_tokens=abc", "repetition", "unique_tokens=[abc]", *dry),
        refused("fim takes no unique_tokens", "fim takes no unique_tokens=", "fim", "unique_tokens=[1e6]", *dry),
        refused(
            "crossover unique_tokens=[1e30]", "more text than any corpus", "crossover", "unique_tokens=[1e30]", *dry
        ),
        refused("crossover unique_tokens=[100]", "unique_tokens=100", "crossover", "unique_tokens=[100]", *dry),
        planned("repetition epochs=[] (the scale's)", "240 runs", "repetition", "epochs=[]", *dry),
        refused("repetition epochs=[inf]", "epochs=inf", "repetition", "epochs=[inf]", *dry),
        refused("repetition epochs=[nan]", "epochs=nan", "repetition", "epochs=[nan]", *dry),
        refused("repetition epochs=[1e400]", "epochs=1e400", "repetition", "epochs=[1e400]", *dry),
        refused("repetition epochs=[-2]", "epochs=-2", "repetition", "epochs=[-2]", *dry),
        refused("repetition epochs=[many]", "epochs=many", "repetition", "epochs=[many]", *dry),
        refused("repetition epochs=[1] (repeats nothing)", "repeats nothing", "repetition", "epochs=[1]", *dry),
        refused("repetition epochs=[0.5,2]", "epochs=0.5", "repetition", "epochs=[0.5,2]", *dry),
        refused("crossover epochs=[inf]", "epochs=inf", "crossover", "epochs=[inf]", *dry),
        refused("crossover epochs=[0]", "epochs=0", "crossover", "epochs=[0]", *dry),
        refused("crossover epochs=[1] (short of the crossing)", "cannot reach", "crossover", "epochs=[1]"),
        refused("crossover epochs past the crossing", "starts past", "crossover", "epochs=[256,512,1024]"),
        refused("fim takes no epochs", "fim takes no epochs=", "fim", "epochs=[2]", *dry),
        refused("diffusion-gap takes no epochs", "diffusion-gap takes no epochs=", "diffusion-gap", "epochs=[2]", *dry),
        # seeds=
        refused("seeds=99999999999999999999", "more than 100", "fim", "seeds=99999999999999999999", *dry),
        refused("seeds=101", "seeds=101 is more than 100", "fim", "seeds=101", *dry),
        refused("seeds=-1", "seeds=-1 must be at least 1", "fim", "seeds=-1", *dry),
        refused("repetition seeds=0", "seeds=0 must be at least 1", "repetition", "seeds=0", *dry),
        refused("seeds=1e3", "seeds='1e3'", "fim", "seeds=1e3", *dry),
        refused("seeds=[1,2]", "seeds='[1,2]'", "fim", "seeds=[1,2]", *dry),
        refused("seeds=true", "seeds='true'", "fim", "seeds=true", *dry),
        planned("seeds=100, dry run", "200 runs", "fim", "seeds=100", *dry),
        planned("seeds=none (the scale's), dry run", "6 runs", "fim", "seeds=none", *dry),
        # slots=, max_minutes=, dry_run=, reuse=
        planned("slots=auto, dry run", "6 runs", "fim", "slots=auto", *dry),
        refused("slots=4096 (more than the cores)", "more slots than", "fim", "slots=4096", *dry),
        refused("slots=0, dry run", "slots=0", "fim", "slots=0", *dry),
        refused("slots=1.5", "slots=1.5", "fim", "slots=1.5", *dry),
        refused("slots= (empty)", "slots=", "fim", "slots=", *dry),
        refused("max_minutes=0, dry run", "max_minutes=0", "fim", "max_minutes=0", "dry_run=true"),
        refused("max_minutes=-5, scale=paper", "max_minutes=-5", "fim", "max_minutes=-5", "scale=paper"),
        refused("max_minutes=nan, dry run", "max_minutes=nan", "fim", "max_minutes=nan", "dry_run=true"),
        planned("max_minutes=1e400 (no limit), dry run", "6 runs", "fim", "max_minutes=1e400", *dry),
        refused("max_minutes=1", "more than max_minutes=1", "fim", "max_minutes=1"),
        planned("dry_run=yes", "6 runs", "fim", "scale=paper", "dry_run=yes"),
        planned("dry_run=1", "6 runs", "fim", "scale=paper", "dry_run=1"),
        refused("dry_run=2", "dry_run='2'", "fim", "scale=paper", "dry_run=2"),
        refused("dry_run= (empty)", "dry_run=''", "fim", "scale=paper", "dry_run="),
        refused("dry_run without a value", "takes NAME", "fim", "dry_run"),
        refused("--dry_run=true", "takes NAME", "fim", "--dry_run=true"),
        refused("reuse=maybe", "reuse='maybe'", "fim", "reuse=maybe"),
        refused("reuse=2", "reuse='2'", "fim", "reuse=2"),
        refused("a key it does not take", "unknown key 'trainer.max_steps'", "fim", "trainer.max_steps=5", *dry),
        # dir=: another grid's runs are never taken for this one's
        Case(
            "reproduce: dir= holding another grid's run",
            py(rep, "fim", f"dir={files['other_grid']}", "dry_run=true"),
            "refused",
            "another grid's run",
            True,
            other_grid,
        ),
        refused("dir= holding a folder of no run's keys", "cannot be told", "fim", f"dir={files['foreign_grid']}"),
        # out= and readme= (reuse=true writes the document from no runs at once)
        Case("reproduce: out= a new folder", py(rep, "fim", *reuse[:2], "out=new/sub"), "ok", "wrote new/sub/fim.md"),
        refused("out= a file", "is not a folder", "fim", *reuse[:2], f"out={files['text']}"),
        refused("out= under a file", "is not a folder", "fim", *reuse[:2], f"out={files['text']}/sub"),
        refused("out= where nothing may be written", "out=", "fim", *reuse[:2], "out=/proc/lmpt-sweep"),
        Case(
            "reproduce: readme= with the table's markers",
            py(rep, "fim", *reuse, "readme=README.md"),
            "ok",
            "its row in README.md",
            setup=put(("README.md", files["readme"])),
        ),
        # a README that cannot take the row is refused before the document is written (or a grid trains)
        refused("readme= a missing file", "readme=", "fim", *reuse, "readme=none.md"),
        refused("readme= not UTF-8", "is not UTF-8", "fim", *reuse, f"readme={files['readme_binary']}"),
        refused("readme= markers reversed", "in that order", "fim", *reuse, f"readme={files['readme_reversed']}"),
        refused("readme= a folder", "readme=", "fim", *reuse, f"readme={files['dir']}"),
    ]
    if not gpu_visible():
        out += [
            refused("device=gpu without a GPU", "device=gpu", "fim", "device=gpu"),
            refused("scale=paper device=gpu without a GPU", "device=gpu", "fim", "scale=paper", "device=gpu"),
        ]
    if shutil.which("srun") is None:  # not on SLURM: submitit cannot send a job
        out.append(refused("launcher=slurm off SLURM", "slurm", "fim", "scale=paper", "launcher=slurm"))
    return out


STUDY = [
    "study.run_keys=[]",
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.ffn_dim=64",
    "data.seq_len=64",
    "tokenizer.vocab_size=1024",
    "trainer.batch_size=8",
    "study.objectives=[clm]",
    "study.seeds=[0]",
    "study.trials=2",
    "trainer.budget=2e10flops",
    "study.probe=false",
    "trainer.dry_run=true",
]
"""A small study's dry run: its plan answers in seconds. A case's keys replace these key by key."""


def study_cases() -> list[Case]:
    """lmpt-study's plan (a dry run of a small study, changed one key at a time) and its runs' precision."""

    def study(*keys: str, budget: bool = True) -> list[str]:
        given = {k.split("=", 1)[0] for k in keys}
        base = [k for k in STUDY if k.split("=", 1)[0] not in given and (budget or not k.startswith("trainer.budget"))]
        return py("lmpt.study", *base, *keys)

    def refused(name: str, words: str, *keys: str, budget: bool = True) -> Case:
        return Case(f"study: {name}", study(*keys, budget=budget), "refused", words, True)

    def planned(name: str, words: str, *keys: str, budget: bool = True) -> Case:
        return Case(f"study: {name}", study(*keys, budget=budget), "ok", words, True)

    space = "study.space={optimizer.lr:%s}"
    out = [
        planned("the small study's plan", "3 runs"),
        refused("study.objectives=[]", "study.objectives is empty", "study.objectives=[]"),
        refused("an unknown objective", "unknown objective 'nope'", "study.objectives=[nope]"),
        refused("an objective twice", "names an objective twice", "study.objectives=[clm,clm]"),
        refused("study.objectives=clm (no list)", "study.objectives", "study.objectives=clm"),
        refused("study.seeds=[]", "study.seeds is empty", "study.seeds=[]"),
        refused("a seed twice", "names a seed twice", "study.seeds=[0,0]"),
        refused("study.seeds=[x]", "study.seeds", "study.seeds=[x]"),
        planned("study.seeds=[-1] (torch takes it)", "3 runs", "study.seeds=[-1]"),
        planned("study.seeds=[99999999999999999999]", "3 runs", "study.seeds=[99999999999999999999]"),
        refused("trainer.seed given", "trainer.seed is set by the study", "trainer.seed=-1"),
        refused("study.trials=0", "study.trials=0 must be at least 1", "study.trials=0"),
        refused("study.trials=-3", "study.trials=-3", "study.trials=-3"),
        refused("study.trials=1e400", "study.trials", "study.trials=1e400"),
        refused("no budget at all", "give trainer.budget", "study.budgets=[]", budget=False),
        refused("study.budgets and trainer.budget", "not both", "study.budgets=[4e10flops]"),
        refused("a budget of a bad unit", "1e12lightyears", "study.budgets=[1e12lightyears]", budget=False),
        refused("study.budgets=[nan]", "names no unit", "study.budgets=[nan]", budget=False),
        refused("study.budgets=[nanflops]", "nanflops is not a budget", "study.budgets=[nanflops]", budget=False),
        refused("study.budgets=[inf]", "names no unit", "study.budgets=[inf]", budget=False),
        refused("a negative budget", "-1e12flops is not a budget", "study.budgets=[-1e12flops]", budget=False),
        refused("a budget twice", "names a budget twice", "study.budgets=[2e10flops,2e10flops]", budget=False),
        planned("two budgets", "4 runs", "study.budgets=[2e10flops,4e10flops]", budget=False),
        refused("trainer.budget=nanflops", "nanflops is not a budget", "trainer.budget=nanflops"),
        refused("study.slots=0", "study.slots=0 is no number of slots", "study.slots=0"),
        refused("study.slots=text", "study.slots=text is no number of slots", "study.slots=text"),
        refused("study.slots=4096 (more than the cores)", "more slots than", "study.slots=4096"),
        planned("study.slots=1", "3 runs", "study.slots=1"),
        refused("study.slot_device=tpu", "study.slot_device=tpu", "study.slot_device=tpu"),
        refused("study.launcher=bad", "study.launcher=bad", "study.launcher=bad"),
        refused("study.sampler=tpe", "study.sampler=tpe", "study.sampler=tpe"),
        refused("study.probe=maybe", "study.probe", "study.probe=maybe"),
        refused("study.probe=2", "is not a yes or no", "study.probe=2"),
        planned("study.probe=false", "at 40% of the peak", "study.probe=false"),
        planned("study.probe=0", "at 40% of the peak", "study.probe=0"),
        refused("study.search_fraction=0", "study.search_fraction=0.0", "study.search_fraction=0"),
        refused("study.search_fraction=1.5", "study.search_fraction=1.5", "study.search_fraction=1.5"),
        refused("study.search_fraction=nan", "study.search_fraction=nan", "study.search_fraction=nan"),
        refused("a search of 1 step", "study.min_search_steps", "study.search_fraction=1e-9"),
        refused("study.space unquoted", "quote it as a string", space % "interval(0.001,0.1)"),
        refused("study.space low above high", "low end above its high end", space % '"interval(1,0)"'),
        refused("study.space bogus(1)", "cannot be read", space % '"bogus(1)"'),
        refused("study.space interval(a,b)", "cannot be read", space % '"interval(a,b)"'),
        refused("study.space choice()", "cannot be read", space % '"choice()"'),
        refused("study.space log from 0", "its low end must be above 0", space % '"tag(log,interval(0,1))"'),
        refused("study.space interval(nan,1)", "not a finite number", space % '"interval(nan,1)"'),
        refused("study.space a plain number", "is no search range", space % "0.01"),
        # a learning rate of -1 to 1 draws rates every run refuses (optimizer.lr must be > 0)
        refused("study.space negative learning rates", "optimizer.lr", space % '"interval(-1,1)"'),
        planned("study.space choice(0.01,0.02)", "3 runs", space % '"choice(0.01,0.02)"'),
        refused("study.space an unknown key", "nope.key", 'study.space={nope.key:"interval(0.1,0.2)"}'),
        refused("study.space=notadict", "study.space=notadict", "study.space=notadict"),
        refused("a searched key also given", "drop model.d_model=32", 'study.space={model.d_model:"choice(32,64)"}'),
        refused("-m", "lmpt-study runs its trials and final runs itself", "-m"),
        refused("hydra.run.dir=", "launches its runs itself", "hydra.run.dir=somewhere"),
        # the runs' precision, and a deprecated key
        refused("trainer.amp=2", "trainer.amp=2 is not a yes or no", "trainer.amp=2"),
        refused("trainer.precision=fp8", "fp8", "trainer.precision=fp8"),
        planned("trainer.precision=bf16", "3 runs", "trainer.precision=bf16"),
        planned(
            "downstream.choice_tasks (deprecated)", "are now one list", "downstream.choice_tasks=[bundled:blimp-fast]"
        ),
        # a study launched (no dry run) into a study.dir that is a file is refused naming the key
        Case(
            "study: study.dir= a file",
            study("trainer.dry_run=false", "study.dir=taken"),
            "refused",
            "study.dir",
            True,
            lambda cwd: (cwd / "taken").write_text("a file\n"),
        ),
    ]
    if not gpu_visible():
        out.append(refused("study.slot_device=gpu without a GPU", "shows no GPU", "study.slot_device=gpu"))
    if shutil.which("srun") is None:
        out.append(refused("study.launcher=slurm off SLURM", "study.launcher=slurm", "study.launcher=slurm"))
    else:
        out.append(planned("study.launcher=slurm, dry run", "3 runs", "study.launcher=slurm"))
    return out


def resume_cases(runs: dict[str, Path], files: dict[str, Path]) -> list[Case]:
    """Resume from another folder: each case resumes its own copy of a finished run (the originals are left as
    other cases read them) from a case folder holding the run's text as corpus.txt, another text, or none. The "text"
    run trained on a corpus.txt of its own since moved away, so its resume reads the folder's corpus.txt: the same
    text goes on (said in a note), another is refused naming data.allow_changed_text unless that is given."""
    count = iter(range(1_000))
    corpora = {"same": files["corpus"], "other": files["corpus_other"], "none": None}

    def case(name: str, expect: str, words: str, keys: list[str], corpus="same", run="text", text_json="") -> Case:
        copy = files["copies"] / f"resume{next(count)}"
        argv = py("lmpt", *(k.replace("RUN", str(copy)) for k in keys))
        return Case(
            f"resume: {name}", argv, expect, words, True, copied_run(runs[run], copy, corpora[corpus], text_json)
        )

    more = ["trainer.resume=RUN", "trainer.max_steps=5"]
    return [
        case("another folder, the same text", "ok", "reading the same text", more),
        case("another folder, another text", "refused", "data.allow_changed_text=true", more, "other"),
        case(
            "another text, data.allow_changed_text=true",
            "ok",
            "going on with this text",
            [*more, "data.allow_changed_text=true"],
            "other",
        ),
        case("a folder without the text", "refused", "cannot read the text", more, "none"),
        case("hydra.run.dir=RUN, the same text", "ok", "reading the same text", ["hydra.run.dir=RUN", more[1]]),
        case(
            "hydra.run.dir=RUN, another text",
            "refused",
            "data.allow_changed_text",
            ["hydra.run.dir=RUN", more[1]],
            "other",
        ),
        # RUN/text.json deleted: the run reads its data paths from the folder it starts in, as a run recorded before
        # lmpt kept text.json does (a note says so)
        case("text.json deleted, another text", "ok", "has no text.json", more, "other", text_json="deleted"),
        case("text.json deleted, no text", "refused", "not found", more, "none", text_json="deleted"),
        case("text.json damaged", "refused", "is not lmpt's record", more, text_json="damaged"),
        case("text.json not UTF-8", "refused", "is not lmpt's record", more, text_json="binary"),
        case("text.json empty", "refused", "is not lmpt's record", more, text_json="empty"),
        case("text.json a folder", "refused", "is not lmpt's record", more, text_json="folder"),
        # keys a resume may not change, and what trainer.resume= names
        case("model.d_model=64", "refused", "model.d_model=64", ["trainer.resume=RUN", "model.d_model=64"]),
        case("trainer.seed=7", "refused", "trainer.seed=7", ["trainer.resume=RUN", "trainer.seed=7"]),
        case("~trainer.seed", "refused", "~trainer.seed", ["trainer.resume=RUN", "~trainer.seed"]),
        case("data=wikitext", "refused", "data=wikitext", ["trainer.resume=RUN", "data=wikitext"], run="clm"),
        case("objective=mdlm", "refused", "objective=mdlm", ["hydra.run.dir=RUN", "objective=mdlm"], run="clm"),
        case(
            "hydra.run.dir= another folder",
            "refused",
            "is not the run trainer.resume continues",
            ["trainer.resume=RUN", "hydra.run.dir=elsewhere"],
        ),
        case("trainer.resume= a missing path", "refused", "not a run directory", ["trainer.resume=/nonexistent/run"]),
        case("trainer.resume= a file", "refused", "not a run directory", [f"trainer.resume={files['text']}"]),
        case("trainer.resume=RUN/checkpoints", "refused", "not a run directory", ["trainer.resume=RUN/checkpoints"]),
        case(
            "trainer.resume= its checkpoint", "ok", "step 3", ["trainer.resume=RUN/checkpoints/step_00000003", more[1]]
        ),
        case("trainer.max_steps below the step reached", "ok", "", ["trainer.resume=RUN", "trainer.max_steps=2"]),
        # a run on the bundled text reads the package's copy from any folder, whatever its corpus.txt
        case("bundled text, another folder's corpus.txt", "ok", "run directory", more, "other", run="clm"),
    ]


def eval_cases(runs: dict[str, Path], files: dict[str, Path]) -> list[Case]:
    """`lmpt-eval RUN held_out=true` from another folder: the run's own validation windows of its own text, read
    where the run recorded it (or the same text in the folder it starts in); a copy of the "text" run each."""
    count = iter(range(1_000))
    corpora = {"same": files["corpus"], "other": files["corpus_other"], "none": None}

    def case(name: str, expect: str, words: str, keys: list[str], corpus="same", text_json="") -> Case:
        copy = files["copies"] / f"eval{next(count)}"
        argv = py("lmpt.downstream.eval_cli", str(copy), *keys)
        setup = copied_run(runs["text"], copy, corpora[corpus], text_json)
        return Case(f"eval: held_out {name}", argv, expect, words, True, setup)

    held = ["held_out=true"]
    return [
        case("from another folder, the same text", "ok", "reading the same text", held),
        case("json=true", "ok", '"val_loss"', [*held, "json=true"]),
        case("another text", "refused", "allow_changed_text=true", held, "other"),
        case(
            "another text, allow_changed_text=true",
            "ok",
            "going on with this text",
            [*held, "allow_changed_text=true"],
            "other",
        ),
        case("no text", "refused", "cannot read the text", held, "none"),
        case("seq_len=32", "refused", "seq_len= does not apply", [*held, "seq_len=32"]),
        case("stride and batch_size", "refused", "do not apply", [*held, "stride=8", "batch_size=4"]),
        case("seed=3", "refused", "seed= does not apply", [*held, "seed=3"]),
        case("and data=", "refused", "one of them", [*held, f"data={files['text']}"]),
        case("and task=", "refused", "one of them", [*held, "task=bundled:zorro-fast"]),
        case("held_out=2", "refused", "held_out='2'", ["held_out=2"]),
        case("allow_changed_text=maybe", "refused", "allow_changed_text='maybe'", [*held, "allow_changed_text=maybe"]),
        case("text.json damaged", "refused", "is not lmpt's record", held, text_json="damaged"),
        case("text.json deleted, another text", "ok", "has no text.json", held, "other", text_json="deleted"),
        # allow_changed_text= is held_out=true's alone: with data= it would be ignored
        case(
            "data= with allow_changed_text",
            "refused",
            "allow_changed_text",
            [f"data={files['text']}", "allow_changed_text=true"],
        ),
        *(
            Case(
                f"eval: held_out {objective} (the bundled text)",
                py("lmpt.downstream.eval_cli", str(runs[objective]), *held, "json=true"),
                "ok",
                '"val_bits_per_token"',
                True,
                put(("corpus.txt", files["corpus_other"])),
            )
            for objective in ("clm", "mdlm", "fim")
        ),
    ]


def sweep_cases() -> list[Case]:
    """`lmpt -m` sweeps planned by a dry run, the parallel launcher's n_jobs, and yes-or-no keys given a number."""
    dry = "trainer.dry_run=true"
    parallel = ["-m", "hydra/launcher=parallel", dry, "trainer.max_steps=5,6"]
    return [
        Case("sweep: -m dry run", py("lmpt", "-m", dry, "trainer.max_steps=5,6"), "ok", "job 1/2", True),
        Case("sweep: n_jobs=-1", py("lmpt", *parallel, "hydra.launcher.n_jobs=-1"), "ok", "", True),
        Case("sweep: n_jobs=-5", py("lmpt", *parallel, "hydra.launcher.n_jobs=-5"), "refused", "n_jobs=-5", True),
        Case("sweep: n_jobs=0", py("lmpt", *parallel, "hydra.launcher.n_jobs=0"), "refused", "n_jobs=0", True),
        Case(
            "sweep: objective.low_discrepancy=2",
            py("lmpt", "objective=mdlm", "objective.low_discrepancy=2", dry),
            "refused",
            "is not a yes or no",
            True,
        ),
        Case("sweep: trainer.amp=2", py("lmpt", "trainer.amp=2", dry), "refused", "is not a yes or no", True),
        Case("sweep: trainer.amp=-1", py("lmpt", "trainer.amp=-1", dry), "refused", "is not a yes or no", True),
        Case("sweep: trainer.amp=1", py("lmpt", "trainer.amp=1", dry), "ok", "", True),
        Case("sweep: trainer.dry_run=2", py("lmpt", "trainer.dry_run=2"), "refused", "is not a yes or no", True),
        Case(
            "sweep: data.allow_changed_text=3",
            py("lmpt", "data.allow_changed_text=3", dry),
            "refused",
            "is not a yes or no",
            True,
        ),
        Case("sweep: trainer.precision=fp8", py("lmpt", "trainer.precision=fp8", dry), "refused", "fp8", True),
        Case("sweep: trainer.precision=bf16", py("lmpt", "trainer.precision=bf16", dry), "ok", "", True),
    ]


def make_files(root: Path) -> dict[str, Path]:
    files = {
        "text": root / "text.txt",
        "empty": root / "empty.txt",
        "word": root / "word.txt",
        "binary": root / "b.txt",
    }
    files["text"].write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n\n" * 20)
    files["empty"].write_text("")
    files["word"].write_text("speak\n")
    files["binary"].write_bytes(bytes(range(256)) * 4)
    files["dir"] = root / "not-a-run"
    files["dir"].mkdir()
    files["pairs_bad"] = root / "bad.jsonl"
    files["pairs_bad"].write_text('{"sentence_good": "the dog runs ."}\n')
    files["pairs_tie"] = root / "tie.jsonl"
    files["pairs_tie"].write_text(
        '{"sentence_good": "the dog runs .", "sentence_bad": "the dog runs .", "field": "f", "UID": "u"}\n'
        '{"sentence_good": "the dog runs .", "sentence_bad": "the dogs runs .", "field": "f", "UID": "u"}\n'
    )
    licence = "MIT License\n\nCopyright (c) 2020 Someone\n\nPermission is hereby granted\n"
    for name, content, with_licence in (
        ("zorro_odd", "a b .\na c .\nb c .\n", True),
        ("zorro_empty", "", True),
        ("zorro_same", "a b .\na b .\n", True),
        ("zorro_nolicence", "a b .\na c .\n", False),
    ):
        folder = root / name / "sentences" / "babyberta"
        folder.mkdir(parents=True)
        (folder / "agreement-one.txt").write_text(content)
        if with_licence:
            (root / name / "LICENSE").write_text(licence)
        files[name] = root / name
    # a run's text: the text the "text" run trained on (its own corpus.txt since moved away) and another text
    trained, other = corpus_texts()
    files["corpus"] = root / "corpus-trained.txt"
    files["corpus"].write_text(trained)
    files["corpus_other"] = root / "corpus-other.txt"
    files["corpus_other"].write_text(other)
    files["copies"] = root / "copies"
    files["copies"].mkdir()
    # lmpt-reproduce's readme=: one with the table's markers, one with them reversed, one not UTF-8
    files["readme"] = root / "README-good.md"
    files["readme"].write_text("# x\n\n<!-- reproductions -->\n| a |\n| --- |\n<!-- /reproductions -->\n")
    files["readme_reversed"] = root / "README-reversed.md"
    files["readme_reversed"].write_text("# x\n\n<!-- /reproductions -->\n| a |\n<!-- reproductions -->\n")
    files["readme_binary"] = root / "README-binary.md"
    files["readme_binary"].write_bytes(b"\xff\xfe<!-- reproductions -->\x00")
    # lmpt-reproduce dir=: a folder holding, under a grid run's name, another run, and a folder of no run's
    run_name = "shakespeare-micro-300k-clm-seed0"  # fim's first laptop run
    files["other_grid"] = root / "other-grid"
    files["foreign_grid"] = root / "foreign-grid"
    (files["foreign_grid"] / run_name).mkdir(parents=True)
    (files["foreign_grid"] / run_name / "config.yaml").write_text("garbage: [\n")
    return files


def corpus_texts() -> tuple[str, str]:
    """Two different texts of 150 kB (parts of the bundled tiny Shakespeare): the "text" run's, and another."""
    bundled = (REPO / "lmpt" / "corpora" / "tinyshakespeare.txt").read_text()
    return bundled[:150_000], bundled[150_000:300_000]


def last_words(out: str) -> str:
    """The last line of `out` that says something (a table's border aside)."""
    said = [line.strip() for line in out.splitlines() if any(ch.isalnum() for ch in line)]
    return said[-1] if said else ""


def judge(case: Case, done: subprocess.CompletedProcess, cwd: Path, before: set[str]) -> tuple[str, str]:
    """The outcome and what the command said; `before`: what the setup put into `cwd`."""
    out, err = done.stdout, done.stderr
    lines = [line for line in err.splitlines() if line.strip()]
    if "Traceback" in err or "Traceback" in out:
        return "FAIL", "traceback: " + (lines[-1] if lines else "")
    wrote = sorted(p.name for p in cwd.iterdir() if p.name not in before) if case.writes_nothing else []
    if case.expect == "ok":
        if done.returncode != 0:
            return "FAIL", f"exit {done.returncode}: {lines[-1] if lines else ''}"
        if case.words and case.words not in out + err:
            return "FAIL", f"no '{case.words}' in the output"
        return ("FAIL", f"wrote {wrote}") if wrote else ("ok", last_words(out)[:90])
    if done.returncode != 2:
        return "FAIL", f"exit {done.returncode} (expected 2): {lines[-1] if lines else last_words(out)[:90]}"
    if len(lines) != 1:
        return "FAIL", f"{len(lines)} lines on stderr"
    if case.words and case.words not in lines[0]:
        return "FAIL", f"the line does not name '{case.words}': {lines[0][:120]}"
    return ("FAIL", f"wrote {wrote}") if wrote else ("refused", lines[0][:140])


def train_runs(root: Path, cache: Path) -> dict[str, Path]:
    """Three tiny runs on the bundled text (clm, mdlm, fim), and "text": a clm run on a corpus.txt of its own in
    root/texthome, that corpus.txt then moved away (its text kept as files["corpus"]), so that a resume from another
    folder reads that folder's corpus.txt: the same text, or another."""
    runs = {}
    home = root / "texthome"
    home.mkdir()
    (home / "corpus.txt").write_text(corpus_texts()[0])
    for name, keys, where in (
        ("clm", ["objective=clm"], root),
        ("mdlm", ["objective=mdlm"], root),
        ("fim", ["objective=fim"], root),
        ("text", ["objective=clm", "data=text", "data.paths=[corpus.txt]"], home),
    ):
        path = where / name
        done = subprocess.run(
            py("lmpt", *keys, *TINY, f"hydra.run.dir={path}"), env=env(cache), capture_output=True, text=True, cwd=where
        )
        if done.returncode != 0:
            sys.exit(f"training the {name} run failed: {done.stderr[-500:]}")
        runs[name] = path
    (home / "corpus.txt").unlink()
    return runs


def run_case(case: Case, cwd: Path, cache: Path) -> subprocess.CompletedProcess | None:
    """The case's command in `cwd`, in a process group of its own; None when it gave no answer within CASE_TIMEOUT
    (the group is then killed: a grid or study that started training stops with it)."""
    with subprocess.Popen(
        case.argv,
        cwd=cwd,
        env=env(cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=CASE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return None
    return subprocess.CompletedProcess(case.argv, process.returncode, out, err)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the table here (markdown)")
    parser.add_argument("--only", default="", help="run only the cases whose name starts with this")
    parser.add_argument(
        "--cache",
        type=Path,
        help="the cases' cache directory (default: a fresh one in the temporary folder); one kept between sweeps "
        "keeps the run rates the laptop-scale dry runs measured",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cache = (args.cache or root / "cache").resolve()  # shared by every case: a run rate is measured once
        runs, files = train_runs(root, cache), make_files(root)
        rows, failed, started = [], 0, time.perf_counter()
        chosen = [c for c in cases(runs, files) if c.name.startswith(args.only)]
        for i, case in enumerate(chosen):
            cwd = root / f"case{i}"
            cwd.mkdir()
            if case.setup is not None:
                case.setup(cwd)
            before = {p.name for p in cwd.iterdir()}
            done = run_case(case, cwd, cache)
            if done is None:
                outcome, said = "FAIL", f"no answer in {CASE_TIMEOUT} s (killed)"
            else:
                outcome, said = judge(case, done, cwd, before)
            failed += outcome == "FAIL"
            rows.append((case.name, case.expect, outcome, said))
            print(f"[{i + 1}/{len(chosen)}] {outcome:8} {case.name}: {said}", flush=True)
        minutes = (time.perf_counter() - started) / 60
    print(f"{len(rows) - failed} passed, {failed} failed")
    if args.out:
        table = ["| case | expected | outcome | what it said |", "| --- | --- | --- | --- |"]
        table += [f"| {n} | {e} | {o} | {s.replace('|', '/')} |" for n, e, o, s in rows]
        args.out.write_text(
            "# Hostile inputs against this turn's surfaces\n\n"
            "`python scripts/hostile_sweep.py --out docs/hostile_sweep.md` ran every case below as a real command "
            f"({len(rows)} cases, {minutes:.1f} minutes): `ok` is exit 0 with the expected words, `refused` exit 2 "
            "with one line naming the problem (and nothing written where the case says so), `FAIL` anything "
            f"else.\n\n{len(rows) - failed} as expected, {failed} not.\n\n" + "\n".join(table) + "\n"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
