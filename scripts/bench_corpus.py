"""Scale benchmarks of the data path on a corpus made by scripts/make_corpus.py:

- token-cache build rate (MB of text per second) per format, `data.tokenize_workers` processes, and the
  peak resident memory of the build (the process and its tokenising workers together);
- seconds from launch to the first logged step of `lmpt` on a warm cache, this corpus against the bundled
  one, alternating (corpus, bundled, corpus, ...), medians; the peak resident memory while training;
- the sampler's memory on this corpus, against the int64 permutation it replaced.

The tokenizer is trained once on the bundled tinyshakespeare (vocabulary 8192) and given as
tokenizer.model_file, so only the cache build is timed.

    python scripts/bench_corpus.py --corpus /tmp/lmpt-4gb --formats parquet,jsonl.zst --launches 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.data.cache import prepare_corpora
from lmpt.data.fingerprint import corpus_fingerprint
from lmpt.data.mixture import resolve_sources
from lmpt.data.sampler import StepLayout, WindowSampler

REPO = Path(__file__).resolve().parents[1]
TRAIN = [
    "trainer.max_steps=3",
    "trainer.log_every=1",
    "trainer.eval_every=0",
    "trainer.ckpt_every=0",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.batch_size=8",
    "data.seq_len=256",
    "model.n_layers=2",
    "model.d_model=128",
    "model.n_heads=2",
    "model.ffn_dim=256",
    "trainer.device=cpu",
]


def _tree_rss(root: int) -> int:
    """Resident bytes of `root` and every descendant, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdecimal():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS")), 0)
    return total


class PeakRss:
    """Samples the resident memory of a process tree every 50 ms while in the `with` block."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, _tree_rss(self.pid))

    def __enter__(self) -> PeakRss:
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join()


def build(files: list[Path], text_bytes: int, tokenizer: Path, cache: Path, workers: int) -> dict:
    """Build the token cache of `files` (`text_bytes` of text, decompressed) from nothing; rate and peak memory."""
    data = DataConfig(paths=[str(f) for f in files], tokenize_workers=workers)
    started = time.perf_counter()
    with PeakRss(os.getpid()) as rss:
        prepared = prepare_corpora(data, TokenizerConfig(model_file=str(tokenizer)), files[0].parent, cache)
    seconds = time.perf_counter() - started
    meta = json.loads((prepared.cache_dir / "meta.json").read_text())
    splits = meta["splits"]
    return {
        "format": files[0].parent.name,
        "files": len(files),
        "text_mb": round(text_bytes / 1e6),
        "file_mb": round(meta["text_bytes"] / 1e6),
        "tokens": splits["train"]["n_tokens"] + splits["val"]["n_tokens"],
        "seconds": round(seconds, 1),
        "text_mb_per_s": round(text_bytes / 1e6 / seconds, 2),
        "peak_rss_mb": round(rss.peak / 1e6),
    }


def launch(data_args: list[str], tokenizer: Path, cache: Path, run_dir: Path) -> dict:
    """`lmpt` on a warm cache: seconds until the first step is logged, and the peak memory of the run."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "LMPT_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "2"}
    command = [
        sys.executable,
        "-m",
        "lmpt",
        *TRAIN,
        *data_args,
        f"tokenizer.model_file={tokenizer}",
        f"hydra.run.dir={run_dir}",
    ]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = None
    with PeakRss(process.pid) as rss:
        metrics = run_dir / "metrics.jsonl"
        while process.poll() is None:
            if first is None and metrics.exists() and metrics.read_text().strip():
                first = time.perf_counter() - started
            time.sleep(0.02)
    out = process.stdout.read() if process.stdout else ""
    if process.returncode != 0:
        raise SystemExit(f"lmpt failed:\n{out[-3000:]}")
    assert "reusing token cache" in out, out[-2000:]
    return {"first_step_s": round(first or float("nan"), 2), "peak_rss_mb": round(rss.peak / 1e6)}


def sampler_memory(corpus, window: int) -> dict:
    """Bytes the sampler allocates to seek to far steps (after one warm-up call: numpy's first-call
    allocations are not the sampler's), against the int64 permutation of every window it replaced."""
    WindowSampler(corpus, window, StepLayout(8), seed=1).starts(0)
    tracemalloc.start()
    sampler = WindowSampler(corpus, window, StepLayout(8), seed=1)
    for step in (10**3, 10**6, 10**9):
        sampler.starts(step)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"windows": sampler.n_windows, "sampler_peak_bytes": peak, "permutation_bytes": 8 * sampler.n_windows}


def warm_prepare(cases: dict[str, DataConfig], tokenizer: Path, cache: Path, repeats: int) -> dict:
    """Median seconds of the data stage of a warm launch (resolve the paths, fingerprint, open the cache),
    in process, alternating the cases: the part of start-up that could grow with the corpus."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, data in cases.items():
            started = time.perf_counter()
            prepared = prepare_corpora(data, TokenizerConfig(model_file=str(tokenizer)), REPO, cache)
            times[name].append(time.perf_counter() - started)
            assert prepared.reused
    return {name: round(statistics.median(t), 4) for name, t in times.items()}


def fingerprint_times(files: list[Path], text_bytes: int, memo: Path) -> dict:
    """Seconds to fingerprint every file of the whole corpus: the first time (every byte hashed) and on a
    warm launch (path, size and modification time only)."""
    data = DataConfig(paths=[str(f) for f in files])
    sources = resolve_sources(data, files[0].parent)
    started = time.perf_counter()
    corpus_fingerprint(data, sources, memo)
    cold = time.perf_counter() - started
    started = time.perf_counter()
    corpus_fingerprint(data, sources, memo)
    warm = time.perf_counter() - started
    total = sum(f.stat().st_size for f in files)
    return {
        "files": len(files),
        "file_gb": round(total / 1e9, 2),
        "text_gb": round(text_bytes / 1e9, 2),
        "first_hash_s": round(cold, 2),
        "warm_s": round(warm, 4),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, required=True, help="make_corpus.py output (parquet/, jsonl.zst/)")
    p.add_argument("--formats", default="parquet,jsonl.zst")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--launches", type=int, default=3)
    p.add_argument("--build-shards", type=int, default=None, help="shards of each format to build (default: all)")
    args = p.parse_args(argv)
    results: dict = {"builds": [], "launches": {}}
    with tempfile.TemporaryDirectory(prefix="lmpt-corpusbench-") as tmp:
        root = Path(tmp)
        seed = DataConfig(paths=["bundled:tinyshakespeare.txt"])
        tokenizer = prepare_corpora(seed, TokenizerConfig(vocab_size=8192), root, root / "tok").tokenizer.path
        made = json.loads((args.corpus / "corpus.json").read_text())
        formats = args.formats.split(",")
        text_bytes = sum(made["shard_text_bytes"][: args.build_shards])
        shards = {fmt: sorted((args.corpus / fmt).glob(f"shard-*.{fmt}")) for fmt in formats}
        for fmt in formats:
            record = build(shards[fmt][: args.build_shards], text_bytes, tokenizer, root / "cache", args.workers)
            results["builds"].append(record)
            print(json.dumps(record), flush=True)
        built = shards[formats[0]][: args.build_shards]
        data = DataConfig(paths=[str(f) for f in built])
        prepared = prepare_corpora(data, TokenizerConfig(model_file=str(tokenizer)), root, root / "cache")
        results["sampler"] = sampler_memory(prepared.train, 257)
        print(json.dumps(results["sampler"]), flush=True)
        results["fingerprint"] = fingerprint_times(shards[formats[0]], made["text_bytes"], root / "memo")
        print(json.dumps(results["fingerprint"]), flush=True)
        bundled = DataConfig(paths=["bundled:tinyshakespeare.txt"], documents="blank_line")  # as data=shakespeare
        prepare_corpora(bundled, TokenizerConfig(model_file=str(tokenizer)), root, root / "cache")  # warm it too
        results["warm_prepare_s"] = warm_prepare({"corpus": data, "bundled": bundled}, tokenizer, root / "cache", 7)
        print(json.dumps(results["warm_prepare_s"]), flush=True)
        cases = {
            "corpus": ["data=text", "data.paths=[" + ",".join(map(str, built)) + "]"],
            "bundled": ["data=shakespeare"],
        }
        for i in range(args.launches):
            for name, data_args in cases.items():
                record = launch(data_args, tokenizer, root / "cache", root / f"run-{name}-{i}")
                results["launches"].setdefault(name, []).append(record)
                print(name, json.dumps(record), flush=True)
    summary = {
        name: {
            "median_first_step_s": statistics.median(r["first_step_s"] for r in runs),
            "max_peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        }
        for name, runs in results["launches"].items()
    }
    results["summary"] = summary
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
