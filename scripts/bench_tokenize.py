"""Token-cache build rate: MB of text tokenised per second, with 1 and with N tokenising processes.

The text is the bundled corpora concatenated `--copies` times into a temporary file; the tokenizer is
trained once (vocabulary 8192, on the bundled tinyshakespeare) and reused, so only the cache build is
timed. Each build starts from an empty token cache; settings alternate (1, N, 1, N, ...).

    python scripts/bench_tokenize.py --copies 10 --workers 1,2 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.data.cache import prepare_corpora
from lmpt.data.sources import bundled_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--copies", type=int, default=10, help="times the bundled corpora are concatenated")
    p.add_argument("--workers", default="1,2", help="comma-separated data.tokenize_workers settings")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--json", default=None, help="write the records as JSON to this path")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lmpt-tokbench-") as tmp:
        root = Path(tmp)
        text = root / "corpus.txt"
        bundled = [(bundled_dir() / name).read_text() for name in ("tinyshakespeare.txt", "wikitext-2-valid.txt")]
        text.write_text("\n\n".join(bundled * args.copies))
        tokenizer_cfg = TokenizerConfig(vocab_size=8192)
        seed_data = DataConfig(paths=["bundled:tinyshakespeare.txt"])
        model_file = prepare_corpora(seed_data, tokenizer_cfg, root, root / "tokenizer-cache").tokenizer.path
        rates: dict[int, list[float]] = {int(w): [] for w in args.workers.split(",")}
        for _ in range(args.repeats):
            for workers in rates:
                cache = root / f"cache-{workers}"
                shutil.rmtree(cache, ignore_errors=True)  # a fresh, empty cache every build
                data = DataConfig(paths=[str(text)], tokenize_workers=workers)
                prepared = prepare_corpora(data, TokenizerConfig(model_file=str(model_file)), root, cache)
                meta = json.loads((prepared.cache_dir / "meta.json").read_text())
                rates[workers].append(meta["text_bytes"] / 1e6 / meta["build_seconds"])
        size_mb = text.stat().st_size / 1e6
    records = [
        dict(workers=w, text_mb=size_mb, mb_per_s=statistics.median(r), runs_mb_per_s=r) for w, r in rates.items()
    ]
    for r in records:
        print(
            f"tokenize_workers={r['workers']}: {r['mb_per_s']:.2f} MB/s (median of {len(r['runs_mb_per_s'])}, "
            f"{r['text_mb']:.1f} MB of text)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
