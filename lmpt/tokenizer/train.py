"""Train a SentencePiece tokenizer once per (corpus, settings) and cache it; later runs reuse it."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import sentencepiece as spm

from lmpt.config.schema import TokenizerConfig
from lmpt.console import info
from lmpt.errors import LmptError
from lmpt.tokenizer.special import SpecialTokens
from lmpt.tokenizer.tokenizer import Tokenizer

MODEL_NAME = "tokenizer.model"
_CACHE_VERSION = 2  # bump when training changes so old cached tokenizers are not reused
_TOO_LARGE = re.compile(r"value <= (\d+)")


def tokenizer_key(cfg: TokenizerConfig, corpus_fingerprint: str) -> str:
    """Cache key of the tokenizer trained on a corpus with these settings."""
    settings = {k: v for k, v in asdict(cfg).items() if k != "model_file"}
    payload = json.dumps({"v": _CACHE_VERSION, "corpus": corpus_fingerprint, **settings}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _sentences(documents: Callable[[], Iterator[list[str]]]) -> Iterator[str]:
    for doc in documents():
        yield from doc


def sample_sentences(sentences: Iterator[str], limit: int, seed: int) -> list[str]:
    """Up to `limit` sentences drawn uniformly (reservoir sampling, corpus order kept) by a generator seeded
    with `seed`: the same corpus and seed give the same sample in any process. SentencePiece's own sampling
    is unseeded, so it never samples."""
    rng = random.Random(seed)
    kept: list[tuple[int, str]] = []
    for i, sentence in enumerate(sentences):
        if i < limit:
            kept.append((i, sentence))
        else:
            j = rng.randrange(i + 1)
            if j < limit:
                kept[j] = (i, sentence)
    return [sentence for _, sentence in sorted(kept)]


def train_model(cfg: TokenizerConfig, documents: Callable[[], Iterator[list[str]]]) -> bytes:
    """The serialized SentencePiece model trained on the sentences of `documents`."""
    if cfg.model_type not in ("unigram", "bpe"):
        raise LmptError(f"tokenizer.model_type={cfg.model_type} is unknown: use unigram or bpe")
    reserved = SpecialTokens(cfg.num_sentinels).first_ordinary
    if cfg.vocab_size <= reserved:
        raise LmptError(
            f"tokenizer.vocab_size={cfg.vocab_size} leaves no room after {reserved} reserved tokens: raise it"
        )
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sample_sentences(_sentences(documents), cfg.max_sentences, cfg.seed)),
            model_writer=model,
            vocab_size=cfg.vocab_size,
            model_type=cfg.model_type,
            character_coverage=cfg.character_coverage,
            byte_fallback=cfg.byte_fallback,
            pad_id=0,
            unk_id=1,
            bos_id=2,
            eos_id=3,
            user_defined_symbols=SpecialTokens.user_defined_pieces(cfg.num_sentinels),
            input_sentence_size=0,  # sampled above, with a seed
            shuffle_input_sentence=False,
            num_threads=cfg.threads,  # part of the settings: the trained model depends on the thread count
            minloglevel=2,
        )
    except RuntimeError as e:
        message = str(e)
        if "Vocabulary size too high" in message:
            found = _TOO_LARGE.search(message)
            most = f" (at most ~{found.group(1)})" if found else ""
            raise LmptError(
                f"tokenizer.vocab_size={cfg.vocab_size} is larger than this corpus supports{most}: "
                "lower tokenizer.vocab_size"
            ) from None
        if "Increase vocab_size" in message:
            raise LmptError(
                f"tokenizer.vocab_size={cfg.vocab_size} is too small for the characters of this corpus: "
                "raise it or lower tokenizer.character_coverage"
            ) from None
        raise LmptError(f"training the tokenizer failed: {message.splitlines()[-1]}") from None
    return model.getvalue()


def _commit(tmp_dir: Path, final_dir: Path) -> None:
    """Rename `tmp_dir` into place; when another process got there first, keep the winner's."""
    try:
        os.rename(tmp_dir, final_dir)
    except OSError:
        if not (final_dir / MODEL_NAME).is_file():
            raise
        shutil.rmtree(tmp_dir, ignore_errors=True)


def prepare_tokenizer(
    cfg: TokenizerConfig,
    documents: Callable[[], Iterator[list[str]]],
    corpus_fingerprint: str,
    cache_root: Path,
) -> Tokenizer:
    """The tokenizer for this run: `cfg.model_file` when set, else the one cached for this corpus and
    these settings, else one trained now on `documents()` (training text only) and cached."""
    if cfg.model_file:
        return Tokenizer.load(cfg.model_file)
    key = tokenizer_key(cfg, corpus_fingerprint)
    final_dir = Path(cache_root) / "tokenizers" / key
    if (final_dir / MODEL_NAME).is_file():
        info(f"reusing tokenizer {final_dir / MODEL_NAME}")
        return Tokenizer.load(final_dir / MODEL_NAME)
    info(f"training a {cfg.model_type} tokenizer ({cfg.vocab_size} pieces) on the training text")
    started = time.perf_counter()
    model = train_model(cfg, documents)
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=final_dir.parent))
    (tmp_dir / MODEL_NAME).write_bytes(model)
    settings = {**asdict(cfg), "corpus_fingerprint": corpus_fingerprint}
    (tmp_dir / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    _commit(tmp_dir, final_dir)
    info(f"trained tokenizer in {time.perf_counter() - started:.1f}s -> {final_dir / MODEL_NAME}")
    return Tokenizer.load(final_dir / MODEL_NAME)
