"""Pretrained-style tokenizer files built here with the `tokenizers` library (nothing comes from a hub): a
GPT-2-style byte-level BPE (<|endoftext|> only) and a BERT-style WordPiece ([PAD] [UNK] [CLS] [SEP] [MASK])."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from lmpt.data.sources import bundled_dir


def _lines(n: int = 4000) -> list[str]:
    text = (bundled_dir() / "tinyshakespeare.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()][:n]


def gpt2_style(directory: Path, vocab_size: int = 700) -> Path:
    """directory/tokenizer.json: byte-level BPE whose one special token, <|endoftext|>, is last (as GPT-2's)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 1, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(_lines(), trainer)
    tok.add_special_tokens(["<|endoftext|>"])
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    return directory / "tokenizer.json"


def wordpiece(directory: Path, vocab_size: int = 600, extra_special: tuple[str, ...] = ()) -> Path:
    """directory/tokenizer.json: a lower-casing WordPiece with BERT's specials at 0-4 and its [CLS] A [SEP]
    post-processor; `extra_special` are further special tokens (e.g. T5-style sentinels)."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *extra_special]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(_lines(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    return directory / "tokenizer.json"
