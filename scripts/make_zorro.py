"""Build the bundled minimal-pairs tasks zorro and zorro-fast in lmpt/tasks/ from Zorro, the grammar test suite of
Huebner et al. (2021, "BabyBERTa: Learning More Grammar With Small-Scale Child-Directed Language", CoNLL;
github.com/phueb/Zorro; MIT licence), reproducibly: the same bytes on every run from the same input
(tests/downstream/test_zorro.py checks it). Nothing is downloaded.

Zorro keeps each paradigm in sentences/babyberta/PHENOMENON-PARADIGM.txt, one sentence a line, the pairs in turn:
line 1 ungrammatical, line 2 its grammatical twin, line 3 the next pair's ungrammatical one, and so on (its
README; zorro/data.py pairs them the same way). Each pair becomes one record in the layout of lmpt's minimal-pair
tasks (lmpt.downstream.zero_shot_files): sentence_good, sentence_bad, field (the phenomenon, e.g.
agreement_subject_verb), UID (the paradigm, the file's name, e.g. agreement_subject_verb-across_relative_clause) and
pairID (the pair's index in its file), the sentences unchanged.

- zorro (lmpt/tasks/zorro.jsonl.zst): every pair of every paradigm, paradigms in file-name order, pairs in file
  order, zstd-compressed at a fixed level.
- zorro-fast (lmpt/tasks/zorro-fast.jsonl): FAST_PAIRS pairs of each paradigm, plain, in file order. Zorro's files
  walk through their templates and words in order, so the first pairs of a file would repeat a few words: the
  pairs are drawn instead, each pair's rank a hash of its paradigm and index (a function of the pair alone, the
  same in every Python and on every machine).
- lmpt/tasks/zorro/README.md: the attribution, the source's commit and MIT licence notice, the counts, and the
  coverage of Zorro's words by lmpt's bundled corpora.

SOURCE is a clone of the Zorro repository (a bare one too: sentences/babyberta/*.txt and LICENSE at HEAD are read
with `git show`) or a copy of its files without git (SOURCE/sentences/babyberta/, SOURCE/LICENSE). Input in another
layout (no sentences/babyberta/, a paradigm file with an odd number of sentences or an empty line, ...) is refused in
one line with exit status 2, and nothing is written.

Usage: python scripts/make_zorro.py SOURCE [--out lmpt/tasks]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import zstandard

from lmpt.data.sources import bundled_dir

SENTENCES = "sentences/babyberta"
"""Where Zorro keeps its paradigm files (its sentences in BabyBERTa's vocabulary, the only set it ships)."""
FAST_PAIRS = 50
"""Pairs per paradigm in zorro-fast."""
FAST_SEED = "zorro-fast"
"""What each pair's rank hashes beside its paradigm and index (sha256): the fixed draw of zorro-fast."""
ZSTD_LEVEL = 19
PUNCTUATION = frozenset({".", "?"})
"""Zorro's tokens that are not words: a sentence's final mark, written apart from its last word."""
CORPORA = ("tinyshakespeare.txt", "wikitext-2-valid.txt")
"""The bundled corpora (lmpt/corpora) whose coverage of Zorro's words the card states."""
CITATION = (
    'Philip A. Huebner, Elior Sulem, Cynthia Fisher and Dan Roth, "BabyBERTa: Learning More Grammar With Small-Scale '
    'Child-Directed Language", Proceedings of the 25th Conference on Computational Natural Language Learning (CoNLL '
    "2021), 624-646, doi:10.18653/v1/2021.conll-1.49"
)


class NotZorro(Exception):
    """The source is not in Zorro's layout: the one line main() prints before exiting 2."""


@dataclass(frozen=True)
class Source:
    """What the build reads of a Zorro source: its paradigm files, licence and commit."""

    paradigms: dict[str, str]
    """{file name: text} of every sentences/babyberta/*.txt."""
    licence: str
    commit: str | None
    """The commit read (git sources); None for a copy without git."""


def _is_git_repo(source: Path) -> bool:
    return (source / "HEAD").is_file() or (source / ".git").exists()


def _git(source: Path, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(source), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise NotZorro(f"{source} is a git repository but git is not installed: install git, or give a copy") from None
    if done.returncode != 0:
        error = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise NotZorro(f"git -C {source} {' '.join(args)} failed: {error[-1] if error else done.returncode}")
    return done.stdout


def _decoded(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotZorro(f"{name} is not UTF-8 text (byte {error.start}): is this Zorro's {SENTENCES}/?") from None


def _read(path: Path) -> bytes:
    """A paradigm file's bytes; a folder or a link to nothing under that name is refused in one line."""
    try:
        return path.read_bytes()
    except OSError as error:
        what = "a folder" if path.is_dir() else "a link to nothing" if path.is_symlink() else "unreadable"
        raise NotZorro(
            f"{SENTENCES}/{path.name} is {what}, not a paradigm file ({error.strerror}): remove it, or give a clean "
            "copy of Zorro"
        ) from None


def read_source(source: Path) -> Source:
    """The paradigm files and licence of a Zorro clone (at HEAD) or copy; a source without them is refused."""
    hint = "give a clone of https://github.com/phueb/Zorro (or a copy of its files)"
    if not source.is_dir():
        raise NotZorro(f"{source} is not a folder: {hint}")
    if _is_git_repo(source):
        listed = _git(source, "ls-tree", "--name-only", "HEAD", f"{SENTENCES}/").decode("utf-8").split("\n")
        names = sorted(n for n in listed if n.endswith(".txt"))
        if not names:
            raise NotZorro(f"{source} holds no {SENTENCES}/*.txt at HEAD: {hint}")
        if "LICENSE" not in _git(source, "ls-tree", "--name-only", "HEAD").decode("utf-8").split("\n"):
            raise NotZorro(f"{source} holds no LICENSE at HEAD: lmpt ships Zorro's licence notice with its pairs")
        files = {Path(n).name: _decoded(n, _git(source, "show", f"HEAD:{n}")) for n in names}
        licence = _decoded("LICENSE", _git(source, "show", "HEAD:LICENSE"))
        return Source(files, licence, _git(source, "rev-parse", "HEAD").decode("ascii").strip())
    folder = source / SENTENCES
    paths = sorted(folder.glob("*.txt")) if folder.is_dir() else []
    if not paths:
        raise NotZorro(f"{source} has no {SENTENCES}/ holding .txt files: {hint}")
    if not (source / "LICENSE").is_file():
        raise NotZorro(f"{source} has no LICENSE: lmpt ships Zorro's licence notice with its pairs")
    files = {p.name: _decoded(str(p), _read(p)) for p in paths}
    return Source(files, _decoded(str(source / "LICENSE"), (source / "LICENSE").read_bytes()), None)


def paradigm_pairs(name: str, text: str) -> list[dict]:
    """The records of one paradigm file (lines bad, good, bad, good, ...); a file that is not so is refused."""
    stem = name.removesuffix(".txt")
    phenomenon, _, paradigm = stem.rpartition("-")  # phenomena may hold a hyphen (filler-gap), paradigms never
    if not phenomenon or not paradigm:
        raise NotZorro(f"{SENTENCES}/{name} is not named PHENOMENON-PARADIGM.txt: is this Zorro's {SENTENCES}/?")
    lines = [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")]
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise NotZorro(f"{SENTENCES}/{name}:{number} is empty: Zorro's files hold one sentence a line, no gaps")
    if len(lines) % 2:
        raise NotZorro(
            f"{SENTENCES}/{name} has {len(lines):,} sentences, an odd number: line {len(lines):,} ({lines[-1]!r}) "
            "has no twin (Zorro's lines go bad, good, bad, good, ...)"
        )
    pairs = []
    for i, (bad, good) in enumerate(zip(lines[0::2], lines[1::2], strict=True)):
        if bad == good:
            raise NotZorro(f"{SENTENCES}/{name}:{2 * i + 1} and {2 * i + 2} are the same sentence: not a minimal pair")
        pairs.append({"sentence_good": good, "sentence_bad": bad, "field": phenomenon, "UID": stem, "pairID": str(i)})
    return pairs


def fast_draw(pairs: list[dict]) -> list[dict]:
    """FAST_PAIRS of one paradigm's pairs, those whose hash of (FAST_SEED, UID, pairID) ranks first, in file order."""

    def rank(i: int) -> str:
        return hashlib.sha256(f"{FAST_SEED}\x1f{pairs[i]['UID']}\x1f{pairs[i]['pairID']}".encode()).hexdigest()

    return [pairs[i] for i in sorted(sorted(range(len(pairs)), key=rank)[:FAST_PAIRS])]


def jsonl_bytes(records: list[dict]) -> bytes:
    """One JSON object a line, UTF-8, fields in the records' order."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def corpus_words(text: str) -> set[str]:
    """The words of a corpus, lower-cased: runs of letters with inner apostrophes, and WikiText's split negations
    ("isn 't") joined as Zorro writes them ("isn't")."""
    joined = re.sub(r"([A-Za-z])n 't\b", r"\1n't", text)
    return {w.lower() for w in re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)*", text + "\n" + joined)}


def coverage_lines(every: list[dict]) -> list[str]:
    """The card's coverage of Zorro's words (types and occurrences, case ignored) by each bundled corpus."""
    counts = Counter(w for r in every for s in (r["sentence_good"], r["sentence_bad"]) for w in s.split())
    words = {w: n for w, n in counts.items() if w not in PUNCTUATION}
    found = {name: corpus_words((bundled_dir() / name).read_text(encoding="utf-8")) for name in CORPORA}
    found["both together"] = set().union(*found.values())
    head = "| corpus (lmpt/corpora) | Zorro's words found | share of Zorro's word occurrences | missing (the first 6) |"
    lines = [head, "| --- | ---: | ---: | --- |"]
    for name, vocabulary in found.items():
        covered = [w for w in words if w.lower() in vocabulary]
        missing = sorted(set(words) - set(covered))
        share = sum(words[w] for w in covered) / sum(words.values())
        shown = ", ".join(missing[:6]) + (", ..." if len(missing) > 6 else "")
        lines.append(
            f"| {name} | {len(covered)} of {len(words)} ({len(covered) / len(words):.1%}) | {share:.1%} | {shown} |"
        )
    return lines


def _paragraph(text: str) -> list[str]:
    """A paragraph in lines of at most 120 characters, as lmpt's docs are written (a longer word stays whole)."""
    return [*textwrap.wrap(text, 120, break_long_words=False, break_on_hyphens=False), ""]


def card(source: Source, every: list[dict], fast: list[dict]) -> str:
    """lmpt/tasks/zorro/README.md: where the pairs come from, the licence notice, the counts and the coverage."""
    paradigms = Counter(r["UID"] for r in every)
    fields = sorted({r["field"] for r in every})
    tokens = {w for r in every for s in (r["sentence_good"], r["sentence_bad"]) for w in s.split()}
    equal = sum(len(r["sentence_good"].split()) == len(r["sentence_bad"].split()) for r in every)
    commit = f"commit {source.commit}" if source.commit else "a copy without git history (commit unknown)"
    sizes = sorted(set(paradigms.values()))
    per = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,} to {sizes[-1]:,}"
    marks = " and ".join(sorted(PUNCTUATION))
    return "\n".join(
        [
            "# Zorro (bundled minimal pairs)",
            "",
            *_paragraph(
                "`zorro.jsonl.zst` and `zorro-fast.jsonl` (one folder up) are Zorro, the grammar test suite released "
                f"with {CITATION}; https://github.com/phueb/Zorro, {commit}, its {SENTENCES}/*.txt."
            ),
            *_paragraph(
                "Built by scripts/make_zorro.py. Changes made by lmpt: each file's lines (ungrammatical, grammatical, "
                "in turn) are paired into records of sentence_good, sentence_bad, field (the phenomenon: the file name "
                "before its last hyphen), UID (the paradigm: the file name) and pairID (the pair's index in its file, "
                f'from "0"); zorro-fast keeps {FAST_PAIRS} pairs of each paradigm (those ranking first by sha256 of '
                f'"{FAST_SEED}", UID and pairID), in file order; the full set is zstd-compressed. The sentences '
                'themselves are unchanged (lower case but for names, the final "." or "?" apart from the last word).'
            ),
            f"- zorro: {len(every):,} pairs, {len(paradigms)} paradigms of {per} pairs, {len(fields)} phenomena",
            f"- zorro-fast: {len(fast):,} pairs ({FAST_PAIRS} per paradigm)",
            f"- {len(tokens - PUNCTUATION)} distinct words ({len(tokens)} tokens with {marks})",
            f"- {equal:,} pairs ({equal / len(every):.1%}) of equal length in words",
            "",
            *_paragraph(f"The {len(fields)} phenomena (field): {', '.join(fields)}."),
            *_paragraph(
                "Coverage of Zorro's words by lmpt's bundled corpora: a word is found when it occurs there as a whole "
                "word, case ignored (WikiText's \"isn 't\" counts as isn't)."
            ),
            *coverage_lines(every),
            "",
            "Licence: Zorro is distributed under the MIT licence; its notice, as the source's LICENSE gives it:",
            "",
            *("    " + line if line.strip() else "" for line in source.licence.strip("\n").split("\n")),
            "",
        ]
    )


def build(source: Path, out: Path) -> dict[str, Path]:
    """Write zorro.jsonl.zst, zorro-fast.jsonl and zorro/README.md under `out`; returns {task: path}. Everything is
    read and checked before the first byte is written."""
    read = read_source(source)
    paradigms = [paradigm_pairs(name, text) for name, text in sorted(read.paradigms.items())]
    every = [pair for pairs in paradigms for pair in pairs]
    fast = [pair for pairs in paradigms for pair in fast_draw(pairs)]
    readme = card(read, every, fast)
    # one frame, single-threaded, content size in the header: the same bytes for the same input and level
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True, threads=0)
    contents = {"zorro": compressor.compress(jsonl_bytes(every)), "zorro-fast": jsonl_bytes(fast)}
    written = {"zorro": out / "zorro.jsonl.zst", "zorro-fast": out / "zorro-fast.jsonl"}
    (out / "zorro").mkdir(parents=True, exist_ok=True)
    for task, data in contents.items():
        written[task].write_bytes(data)
    written["card"] = out / "zorro" / "README.md"
    written["card"].write_text(readme, encoding="utf-8", newline="\n")
    for task, records in (("zorro", every), ("zorro-fast", fast)):
        print(f"{task}: {written[task]} ({len(records):,} pairs, {written[task].stat().st_size:,} bytes)")
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a clone of Zorro's repository (bare too), or a copy of its files")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "lmpt" / "tasks")
    args = parser.parse_args(argv)
    try:
        build(args.source.expanduser(), args.out)
    except NotZorro as error:
        print(f"make_zorro: error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
