"""Hostile inputs against this turn's new surfaces: lmpt-reproduce, the objectives' measures in lmpt-eval, Zorro
(bundled:zorro, scripts/make_zorro.py) and lmpt-generate's printing. Each case runs a real command in a subprocess and
is judged by what a user sees: `ok` (exit 0), `refused` (exit 2 with one `lmpt: error:` line, or the script's own one
line), or a `FAIL` (a traceback, another exit code, a refusal of several lines, or something written where nothing
should be).

    python scripts/hostile_sweep.py --out docs/hostile_sweep.md   # every case, the table written there
    python scripts/hostile_sweep.py --only reproduce              # the cases whose name starts so

It trains three tiny runs first (clm, mdlm and fim, 3 steps) in a temporary folder; about 4 minutes on 2 cores."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
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
    """The case's working folder must stay empty."""


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), e.get("PYTHONPATH")]))
    e.setdefault("OMP_NUM_THREADS", "1")
    e.pop("HYDRA_FULL_ERROR", None)
    return e


def py(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


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
        Case("reproduce: seeds=1000", py(rep, "fim", "seeds=1000"), "refused", "max_minutes", True),
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
        Case("reproduce: dry run, 1 seed", py(rep, "fim", "dry_run=true", "seeds=1"), "ok", "8 runs", True),
        Case("reproduce: dry run, 1 slot", py(rep, "fim", "dry_run=true", "slots=1"), "ok", "1 slot", True),
        Case("reproduce: dry run, --help", py(rep, "--help"), "ok", "NAME", True),
        Case("reproduce: -h with a name", py(rep, "fim", "-h"), "ok", "lmpt-reproduce", True),
        Case("reproduce: dir is a file", py(rep, "fim", f"dir={text}", "dry_run=true"), "ok", "", False),
        Case(
            "reproduce: reuse with no runs",
            py(rep, "fim", "reuse=true", "dir=nothing", "out=o", "readme=none.md"),
            "ok",
            "Not yet run",
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
    return out


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
    return files


def judge(case: Case, done: subprocess.CompletedProcess, cwd: Path) -> tuple[str, str]:
    out, err = done.stdout, done.stderr
    lines = [line for line in err.splitlines() if line.strip()]
    if "Traceback" in err or "Traceback" in out:
        return "FAIL", "traceback: " + (lines[-1] if lines else "")
    wrote = [p.name for p in cwd.iterdir()] if case.writes_nothing else []
    if case.expect == "ok":
        if done.returncode != 0:
            return "FAIL", f"exit {done.returncode}: {lines[-1] if lines else ''}"
        if case.words and case.words not in out + err:
            return "FAIL", f"no '{case.words}' in the output"
        return ("FAIL", f"wrote {wrote}") if wrote else ("ok", (out.strip().splitlines() or [""])[-1][:90])
    if done.returncode != 2:
        return "FAIL", f"exit {done.returncode} (expected 2): {lines[-1] if lines else out[-90:]}"
    if len(lines) != 1:
        return "FAIL", f"{len(lines)} lines on stderr"
    if case.words and case.words not in lines[0]:
        return "FAIL", f"the line does not name '{case.words}': {lines[0][:120]}"
    return ("FAIL", f"wrote {wrote}") if wrote else ("refused", lines[0][:140])


def train_runs(root: Path) -> dict[str, Path]:
    runs = {}
    for objective in ("clm", "mdlm", "fim"):
        path = root / objective
        done = subprocess.run(
            py("lmpt", f"objective={objective}", *TINY, f"hydra.run.dir={path}"),
            env=env(),
            capture_output=True,
            text=True,
            cwd=root,
        )
        if done.returncode != 0:
            sys.exit(f"training the {objective} run failed: {done.stderr[-500:]}")
        runs[objective] = path
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the table here (markdown)")
    parser.add_argument("--only", default="", help="run only the cases whose name starts with this")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs, files = train_runs(root), make_files(root)
        rows, failed, started = [], 0, time.perf_counter()
        chosen = [c for c in cases(runs, files) if c.name.startswith(args.only)]
        for i, case in enumerate(chosen):
            cwd = root / f"case{i}"
            cwd.mkdir()
            done = subprocess.run(
                case.argv, cwd=cwd, env=env(), capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
            )
            outcome, said = judge(case, done, cwd)
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
