"""Build the bundled content-classification task lmpt/tasks/clinc-domains/ from CLINC150 (Larson et al., 2019, "An
Evaluation Dataset for Intent Classification and Out-of-Scope Prediction", EMNLP-IJCNLP; github.com/clinc/oos-eval;
CC BY 3.0), reproducibly: the same bytes on every run from the same input. Nothing is downloaded.

Each in-scope query is labelled with the domain of its intent (data/domains.json: 10 domains of 15 intents each,
banking, travel, kitchen_and_dining, ...), so the classes differ in what the text is about. Out-of-scope queries are
left out.
- train.jsonl: the first TRAIN_PER_INTENT training queries of every intent, in file order (3,000; 300 a domain). A
  small training set on purpose: what pre-training brings shows where the fine-tuning data is scarce.
- dev.jsonl: CLINC150's validation split (3,000), the split lmpt reports.
- test.jsonl: CLINC150's test split (4,500).
- README.md: the attribution and licence that travel with the data.

SOURCE is a clone of the oos-eval repository (a bare one too; data/*.json at HEAD are read with `git show`) or its
data/ folder.

Usage: python scripts/make_clinc.py SOURCE [--out lmpt/tasks/clinc-domains]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import Counter
from pathlib import Path

TRAIN_PER_INTENT = 20
"""Training queries kept per intent (of CLINC150's 100)."""
ATTRIBUTION = """# clinc-domains (bundled content classification)

The queries are CLINC150, from Stefan Larson, Anish Mahendran, Joseph J. Peper, Christopher Clarke, Andrew Lee,
Parker Hill, Jonathan K. Kummerfeld, Kevin Leach, Michael A. Laurenzano, Lingjia Tang and Jason Mars, "An Evaluation
Dataset for Intent Classification and Out-of-Scope Prediction", EMNLP-IJCNLP 2019, https://github.com/clinc/oos-eval.

Licence: the data is distributed under the Creative Commons Attribution 3.0 Unported licence (CC BY 3.0,
https://creativecommons.org/licenses/by/3.0/). Changes made by lmpt (scripts/make_clinc.py): each in-scope query is
labelled with the domain of its intent (the dataset's data/domains.json, 10 domains); out-of-scope queries are left
out; train.jsonl keeps the first 20 training queries of each of the 150 intents (3,000); dev.jsonl is the validation
split (3,000) and test.jsonl the test split (4,500). The queries themselves are unchanged.
"""


def _read(source: Path, name: str) -> object:
    if (source / name).is_file():
        return json.loads((source / name).read_text(encoding="utf-8"))
    if (source / "data" / name).is_file():
        return json.loads((source / "data" / name).read_text(encoding="utf-8"))
    shown = subprocess.run(["git", "-C", str(source), "show", f"HEAD:data/{name}"], check=True, capture_output=True)
    return json.loads(shown.stdout.decode("utf-8"))


def _lines(queries: list[list[str]], domain_of: dict[str, str]) -> str:
    return "".join(json.dumps({"text": text, "label": domain_of[intent]}) + "\n" for text, intent in queries)


def build(source: Path, out: Path) -> dict[str, int]:
    """Write train/dev/test.jsonl and README.md into `out`; returns the item count of each split."""
    domains = _read(source, "domains.json")
    domain_of = {intent: domain for domain, intents in domains.items() for intent in intents}
    full = _read(source, "data_full.json")
    seen: Counter[str] = Counter()
    train = []
    for text, intent in full["train"]:
        seen[intent] += 1
        if seen[intent] <= TRAIN_PER_INTENT:
            train.append([text, intent])
    splits = {"train": train, "dev": full["val"], "test": full["test"]}
    out.mkdir(parents=True, exist_ok=True)
    for split, queries in splits.items():
        (out / f"{split}.jsonl").write_text(_lines(queries, domain_of), encoding="utf-8")
    (out / "README.md").write_text(ATTRIBUTION, encoding="utf-8")
    return {split: len(queries) for split, queries in splits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a clone of github.com/clinc/oos-eval, or its data/ folder")
    parser.add_argument("--out", type=Path, default=Path("lmpt/tasks/clinc-domains"))
    args = parser.parse_args()
    counts = build(args.source, args.out)
    print(", ".join(f"{split}: {n:,}" for split, n in counts.items()), f"-> {args.out}")


if __name__ == "__main__":
    main()
