"""Train a tokenizer once per (corpus, settings) and cache it; later runs reuse it. A SentencePiece model, or the
byte-level BPE backend (GPT-2 style), trained by the `tokenizers` library with lmpt's reserved tokens first: lossless
for any text (every byte has a token, no normalisation, spaces kept), loaded as an HfTokenizer from the
tokenizer.json it writes."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

from tokenizers import Tokenizer as FastTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from lmpt.config.schema import TokenizerConfig
from lmpt.console import info
from lmpt.errors import LmptError
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.load import load_tokenizer
from lmpt.tokenizer.sentencepiece import train_sentencepiece
from lmpt.tokenizer.special import BOS, EOS, PAD, UNK, SpecialTokens

MODEL_NAME = "tokenizer.model"
_CACHE_VERSION = 2  # bump when training changes so old cached tokenizers are not reused


def tokenizer_key(cfg: TokenizerConfig, corpus_fingerprint: str) -> str:
    """Cache key of the tokenizer trained on a corpus with these settings."""
    settings = {k: v for k, v in asdict(cfg).items() if k not in ("model_file", "path")}
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
    """The serialized tokenizer (SentencePiece .model or byte-level tokenizer.json) trained on a seeded sample
    of the sentences of `documents`."""
    reserved = SpecialTokens(cfg.num_sentinels).first_ordinary
    if cfg.vocab_size is None or cfg.vocab_size <= reserved:
        raise LmptError(
            f"tokenizer.vocab_size={cfg.vocab_size} leaves no room after {reserved} reserved tokens: raise it"
        )
    sentences = sample_sentences(_sentences(documents), cfg.max_sentences, cfg.seed)
    if cfg.backend == "bytelevel":
        return train_bytelevel(cfg, sentences)
    return train_sentencepiece(cfg, sentences)


def model_name(backend: str) -> str:
    """The file a trained tokenizer is cached as: tokenizer.model (SentencePiece) or tokenizer.json."""
    return "tokenizer.json" if backend == "bytelevel" else MODEL_NAME


def _commit(tmp_dir: Path, final_dir: Path, name: str) -> None:
    """Rename `tmp_dir` into place; when another process got there first, keep the winner's."""
    try:
        os.rename(tmp_dir, final_dir)
    except OSError:
        if not (final_dir / name).is_file():
            raise
        shutil.rmtree(tmp_dir, ignore_errors=True)


def known_tokenizer(
    cfg: TokenizerConfig, corpus_fingerprint: str, cache_root: Path, quiet: bool = False
) -> Tokenizer | None:
    """The pretrained file of `cfg.path` (hf) or `cfg.model_file`, else the one cached for this corpus and these
    settings; None when it must be trained first. `quiet`: no line about the reuse (a dry run's look-up)."""
    if cfg.backend == "hf":
        assert cfg.path is not None, "validation asks tokenizer=hf for its path"
        return load_tokenizer(cfg.path, "tokenizer.path", cfg.num_sentinels)
    if cfg.model_file:
        return load_tokenizer(cfg.model_file)
    path = Path(cache_root) / "tokenizers" / tokenizer_key(cfg, corpus_fingerprint) / model_name(cfg.backend)
    if not path.is_file():
        return None
    if not quiet:
        info(f"reusing tokenizer {path}")
    return load_tokenizer(path)


def prepare_tokenizer(
    cfg: TokenizerConfig,
    documents: Callable[[], Iterator[list[str]]],
    corpus_fingerprint: str,
    cache_root: Path,
) -> Tokenizer:
    """The tokenizer for this run: the pretrained file of `cfg.path` (hf) or `cfg.model_file`, else the one
    cached for this corpus and these settings, else one trained now on `documents()` (training text only)
    and cached."""
    found = known_tokenizer(cfg, corpus_fingerprint, cache_root)
    if found is not None:
        return found
    key = tokenizer_key(cfg, corpus_fingerprint)
    final_dir = Path(cache_root) / "tokenizers" / key
    name = model_name(cfg.backend)
    kind = "byte-level BPE" if cfg.backend == "bytelevel" else f"SentencePiece {cfg.model_type}"
    info(f"training a {kind} tokenizer ({cfg.vocab_size} pieces) on the training text")
    started = time.perf_counter()
    model = train_model(cfg, documents)
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=final_dir.parent))
    (tmp_dir / name).write_bytes(model)
    settings = {**asdict(cfg), "corpus_fingerprint": corpus_fingerprint}
    (tmp_dir / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    _commit(tmp_dir, final_dir, name)
    info(f"trained tokenizer in {time.perf_counter() - started:.1f}s -> {final_dir / name}")
    return load_tokenizer(final_dir / name)


def reserved_pieces(num_sentinels: int) -> list[str]:
    """lmpt's reserved tokens in id order (pad 0, unk 1, bos 2, eos 3, then mask ... sentinels)."""
    return [PAD, UNK, BOS, EOS, *SpecialTokens.user_defined_pieces(num_sentinels)]


def train_bytelevel(cfg: TokenizerConfig, sentences: list[str]) -> bytes:
    """tokenizer.json of a byte-level BPE with `cfg.vocab_size` tokens trained on `sentences`."""
    assert cfg.vocab_size is not None, "a trained tokenizer has a configured size"
    tok = FastTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        special_tokens=reserved_pieces(cfg.num_sentinels),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(sentences, trainer, length=len(sentences))
    return tok.to_str().encode("utf-8")
