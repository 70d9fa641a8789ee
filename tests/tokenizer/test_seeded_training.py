"""Tokenizer training is seeded (issue 14, point 1): on a corpus above tokenizer.max_sentences, two fresh
processes train byte-identical models; the seed is what decides the sample."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lmpt.tokenizer.train import sample_sentences

REPO = Path(__file__).resolve().parents[2]
TRAIN = """
import sys
from pathlib import Path
from lmpt.config.schema import TokenizerConfig
from lmpt.data.sources import bundled_dir, iter_documents
from lmpt.tokenizer.train import train_model
cfg = TokenizerConfig(vocab_size=600, num_sentinels=8, max_sentences=1500, seed=int(sys.argv[2]))
docs = lambda: iter_documents([bundled_dir() / "tinyshakespeare.txt"], "blank_line", "text")
Path(sys.argv[1]).write_bytes(train_model(cfg, docs))
"""


def _train_in_fresh_process(out: Path, seed: int) -> bytes:
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", TRAIN, str(out), str(seed)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return out.read_bytes()


def test_two_fresh_processes_train_byte_identical_models(tmp_path: Path) -> None:
    # tinyshakespeare has ~32,000 non-blank lines: far above max_sentences=1500, so the sample matters
    first = _train_in_fresh_process(tmp_path / "a.model", seed=0)
    second = _train_in_fresh_process(tmp_path / "b.model", seed=0)
    other_seed = _train_in_fresh_process(tmp_path / "c.model", seed=1)
    assert first == second, "the same corpus, settings and seed trained two different tokenizers"
    assert other_seed != first, "another seed drew the same sample: the corpus was not sampled"


def test_sample_is_uniform_ordered_and_seeded() -> None:
    sentences = [f"s{i}" for i in range(10_000)]
    a = sample_sentences(iter(sentences), 500, seed=3)
    assert a == sample_sentences(iter(sentences), 500, seed=3)
    assert a != sample_sentences(iter(sentences), 500, seed=4)
    assert len(a) == 500 and len(set(a)) == 500
    indices = [int(s[1:]) for s in a]
    assert indices == sorted(indices), "the sample keeps corpus order"
    assert sum(i >= 5_000 for i in indices) in range(200, 300), "the second half is as likely as the first"
    assert sample_sentences(iter(sentences[:100]), 500, seed=3) == sentences[:100]
