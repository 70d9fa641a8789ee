"""Build the downstream tasks that ship in lmpt/tasks/ from the bundled tiny Shakespeare, reproducibly: a fixed
seed, the same bytes on every run (tests/downstream/test_make_tasks.py checks it). Nothing is downloaded.

Only held-out text is used: the speaker turns (blank-line documents) that the bundled default run
(conf/data/shakespeare.yaml, data.val_fraction=0.05) holds out for validation, i.e. document i with
floor((i+1) * 0.05) > floor(i * 0.05) (lmpt.data.split.is_held_out): turns 19, 39, 59, ... So no text a task
scores was in the pre-training text of the default run (nor in its tokenizer's training text).

- shakespeare-order (classification, like CoLA): `text` is one line of a held-out turn (5+ words), `label` 1 if
  its words are in Shakespeare's order, 0 if they are shuffled (a seeded permutation that moves at least one
  word). Every line appears in both forms, in the same split; turns are split 60/20/20 into train/dev/test, so no
  line is in two splits. Chance: 0.5.
- shakespeare-cloze (multiple choice, like LAMBADA): the context is the turn's speaker, the line before (if any)
  and the line up to its final word; the choices are that final word and 3 final words of other held-out lines,
  drawn (seeded) from the list of all final words with their repeats, distinct. The true word and the distractors
  come from the same distribution, so a model's preference for frequent words alone scores chance (0.25); only
  the context lifts it above.

Usage: python scripts/make_tasks.py [--out lmpt/tasks]
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from lmpt.data.readers.text import text_documents
from lmpt.data.sources import bundled_dir
from lmpt.data.split import is_held_out

SEED = 23
VAL_FRACTION = 0.05  # conf/data/shakespeare.yaml's data.val_fraction (the schema default)
MIN_WORDS = 5
CHOICES = 4
FINAL_WORD = re.compile(r"^(?P<head>.*\S)\s+(?P<word>[A-Za-z]{3,})(?P<tail>[^A-Za-z]*)$")


def held_out_turns() -> list[list[str]]:
    """The speaker turns of tiny Shakespeare the default run holds out, each [speaker line, text lines...]."""
    docs = text_documents(bundled_dir() / "tinyshakespeare.txt", "blank_line")
    return [doc for i, doc in enumerate(docs) if is_held_out(i, VAL_FRACTION) and len(doc) >= 2]


def shuffled(words: list[str], rng: random.Random) -> list[str]:
    """A permutation of `words` that differs from them (words are not all equal: checked by the caller)."""
    while True:
        out = words[:]
        rng.shuffle(out)
        if out != words:
            return out


def order_task(turns: list[list[str]], rng: random.Random) -> dict[str, list[dict]]:
    """train/dev/test of shakespeare-order: every 5+ word line as written (1) and shuffled (0)."""
    order = list(range(len(turns)))
    rng.shuffle(order)
    cut1, cut2 = int(0.6 * len(order)), int(0.8 * len(order))
    splits = {"train": sorted(order[:cut1]), "dev": sorted(order[cut1:cut2]), "test": sorted(order[cut2:])}
    task = {}
    for split, members in splits.items():
        records = []
        for t in members:
            for line in turns[t][1:]:
                words = line.split()
                if len(words) < MIN_WORDS or len(set(words)) < 2:
                    continue
                records.append({"text": line, "label": 1})
                records.append({"text": " ".join(shuffled(words, rng)), "label": 0})
        rng.shuffle(records)
        task[split] = records
    return task


def cloze_task(turns: list[list[str]], rng: random.Random) -> list[dict]:
    """shakespeare-cloze: pick the final word of a held-out line among 4."""
    items = []
    for turn in turns:
        speaker, lines = turn[0], turn[1:]
        for k, line in enumerate(lines):
            match = FINAL_WORD.match(line)
            if match is None or len(line.split()) < MIN_WORDS:
                continue
            before = [speaker, lines[k - 1]] if k > 0 else [speaker]
            items.append((" ".join([*before, match["head"]]), match["word"]))
    pool = [word for _, word in items]  # with repeats: distractors as frequent as the words they stand beside
    records = []
    for context, word in items:
        choices = [word]
        while len(choices) < CHOICES:
            other = rng.choice(pool)
            if other.lower() not in {c.lower() for c in choices}:
                choices.append(other)
        rng.shuffle(choices)
        records.append({"context": context, "choices": choices, "label": choices.index(word)})
    return records


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


def build(out: Path) -> list[Path]:
    """Write every task under `out`; returns the files written."""
    turns = held_out_turns()
    written = []
    for split, records in order_task(turns, random.Random(f"{SEED}-order")).items():
        written.append(out / "shakespeare-order" / f"{split}.jsonl")
        write_jsonl(written[-1], records)
    written.append(out / "shakespeare-cloze.jsonl")
    write_jsonl(written[-1], cloze_task(turns, random.Random(f"{SEED}-cloze")))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "lmpt" / "tasks")
    for path in build(parser.parse_args().out):
        print(f"{path}: {sum(1 for _ in path.open(encoding='utf-8'))} records, {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
