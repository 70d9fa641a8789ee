"""Tokenizer training time and encoding rate, SentencePiece against the `tokenizers` library, on ~100 MB.

The text is the files of --source (default /work/shared/data, else lmpt's bundled corpora) replicated into
one file of --mb megabytes under --workdir. Each tokenizer is trained once through lmpt's own trainer
(lmpt.tokenizer.train.train_model: seeded sample of at most max_sentences lines, the same settings a run
uses), then encodes the whole file in batches of lines (lmpt's Tokenizer.encode_batch, all cores).
Settings run one after another in one invocation: compare them with each other, and say how loaded the
machine was (`uptime` is printed before and after).

    python scripts/bench_tokenizers.py --mb 100 --vocab 8192 --json /tmp/tokbench.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from lmpt.config.schema import TokenizerConfig
from lmpt.data.sources import bundled_dir
from lmpt.tokenizer.load import load_tokenizer
from lmpt.tokenizer.train import model_name, train_model

SETTINGS = {
    "sentencepiece unigram": dict(backend="sentencepiece", model_type="unigram"),
    "sentencepiece unigram lossless": dict(backend="sentencepiece", model_type="unigram", lossless=True),
    "sentencepiece bpe": dict(backend="sentencepiece", model_type="bpe"),
    "tokenizers byte-level bpe": dict(backend="bytelevel"),
}
_BATCH = 10_000


def build_text(source: Path, mb: int, out: Path) -> Path:
    """`out`: the source files' text repeated until it holds `mb` megabytes."""
    files = sorted(source.glob("*.txt")) if source.is_dir() else []
    text = (
        "\n".join(p.read_text(encoding="utf-8") for p in files) or (bundled_dir() / "tinyshakespeare.txt").read_text()
    )
    copies = -(-mb * 1_000_000 // len(text.encode("utf-8")))
    with open(out, "w", encoding="utf-8") as f:
        for _ in range(copies):
            f.write(text)
    return out


def lines(path: Path) -> Iterator[list[str]]:
    """The file as one 'document' per batch of non-blank lines (lmpt trains on sentences = lines)."""
    batch: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                batch.append(line.rstrip("\n"))
                if len(batch) == _BATCH:
                    yield batch
                    batch = []
    if batch:
        yield batch


def measure(name: str, cfg: TokenizerConfig, text: Path, workdir: Path) -> dict:
    started = time.perf_counter()
    model = train_model(cfg, lambda: lines(text))
    train_s = time.perf_counter() - started
    path = workdir / f"{name.replace(' ', '-')}-{model_name(cfg.backend)}"
    path.write_bytes(model)
    tok = load_tokenizer(path)
    n_tokens = 0
    started = time.perf_counter()
    for batch in lines(text):
        n_tokens += sum(len(ids) for ids in tok.encode_batch(batch, threads=os.cpu_count() or 1))
    encode_s = time.perf_counter() - started
    mb = text.stat().st_size / 1e6
    record = dict(
        tokenizer=name,
        text_mb=round(mb, 1),
        train_s=round(train_s, 1),
        encode_s=round(encode_s, 1),
        encode_mb_per_s=round(mb / encode_s, 2),
        bytes_per_token=round(mb * 1e6 / n_tokens, 3),
        max_sentences=cfg.max_sentences,
        vocab_size=cfg.vocab_size,
        threads=cfg.threads,
    )
    print(json.dumps(record), flush=True)
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=int, default=100, help="megabytes of text to build")
    p.add_argument("--source", default="/work/shared/data", help="directory of .txt files to replicate")
    p.add_argument("--workdir", default="/tmp/lmpt-tokbench", help="where the text and models are written")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--threads", type=int, default=TokenizerConfig.threads, help="tokenizer.threads")
    p.add_argument("--only", default=",".join(SETTINGS), help="comma-separated subset of: " + ", ".join(SETTINGS))
    p.add_argument("--json", default=None, help="write the records as JSON to this path")
    args = p.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    text = build_text(Path(args.source), args.mb, workdir / "text.txt")
    print(
        f"{text.stat().st_size / 1e6:.1f} MB in {text}; cores: {os.cpu_count()}; "
        f"load: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}",
        flush=True,
    )
    records = []
    for name in args.only.split(","):
        cfg = TokenizerConfig(vocab_size=args.vocab, threads=args.threads, **SETTINGS[name])
        records.append(measure(name, cfg, text, workdir))
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
