"""Lossless text (issue 14, point 3): byte-level BPE and SentencePiece with tokenizer.lossless=true give back
exactly the text they encoded: random Unicode strings, code with tabs and runs of spaces, empty lines."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from lmpt.config.schema import TokenizerConfig
from lmpt.data.sources import bundled_dir, iter_documents
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.train import prepare_tokenizer

CODE = "def f(x):\n    return x  *  2"
FIXED = [
    CODE,
    "class A:\n\tdef g(self):\n\t\treturn {'a':  1}\n\n\n# end\n",
    "\n\n\nempty lines above\n\n",
    "  leading and trailing  ",
    "\t \t",
    "",
    "Ünïcödé e\u0301 ﬁ ① Ｆｕｌｌ 漢字 😀 \u200b",
    "12345 0.25 1e-9",
]
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?()[]{}<>-_=+*/\\'\"#",
    " \t\n\r\x0b\x0c",
    "àéîõüßçñøåæœ",
    "αβγδεζηθλμπσω",
    "абвгдеёжзий",
    "漢字仮名カタカナ한국어",
    "😀🚀🧪👍🏽",
    "\u0301\u0308\u200b\u200d\ufeff",
    "ﬁ①Ｆｕｌ²½",
]
MAX_CODEPOINT = 0x10FFFF


def random_strings(seed: int, n: int, exclude: str = "") -> Iterator[str]:
    """Strings mixing scripts, whitespace runs, combining marks and arbitrary code points (no surrogates)."""
    rng = random.Random(seed)
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(0, 40)):
            if rng.random() < 0.15:
                c = chr(rng.randint(1, MAX_CODEPOINT))
                c = c if not 0xD800 <= ord(c) <= 0xDFFF else " "
            else:
                c = rng.choice(rng.choice(ALPHABETS))
            chars.append(c * rng.choice([1, 1, 1, 2, 4]))
        yield "".join(c for c in "".join(chars) if c not in exclude)


def documents() -> Iterator[list[str]]:
    docs = iter_documents([bundled_dir() / "tinyshakespeare.txt"], "blank_line", "text")
    yield from (doc for i, doc in enumerate(docs) if i < 1500)
    yield [f"In {year} and {year + 1} the play ran {year % 97} nights." for year in range(1590, 1640)] * 20


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lossless")


def _roundtrip_failures(tok: Tokenizer, texts: list[str]) -> list[tuple[str, str]]:
    return [(x, y) for x in texts if (y := tok.decode(tok.encode(x))) != x][:3]


def test_bytelevel_is_lossless_and_cached(cache: Path) -> None:
    cfg = TokenizerConfig(backend="bytelevel", vocab_size=600, num_sentinels=8)
    tok = prepare_tokenizer(cfg, documents, "corpus", cache)
    assert (
        tok.path.name == "tokenizer.json" and tok.vocab_size == 600 and tok.special.reserved_ids() == tuple(range(18))
    )
    assert _roundtrip_failures(tok, [*FIXED, *random_strings(0, 300)]) == []
    again = prepare_tokenizer(cfg, lambda: iter(()), "corpus", cache)  # no text: it must come from the cache
    assert again.fingerprint == tok.fingerprint


def test_sentencepiece_lossless_options(cache: Path) -> None:
    cfg = TokenizerConfig(vocab_size=600, num_sentinels=8, lossless=True, split_digits=True)
    tok = prepare_tokenizer(cfg, documents, "corpus", cache)
    # U+2581 is SentencePiece's own space mark: the one character it cannot give back (README)
    assert _roundtrip_failures(tok, [*FIXED, *random_strings(1, 300, exclude="\u2581")]) == []
    folding = prepare_tokenizer(TokenizerConfig(vocab_size=600, num_sentinels=8), documents, "corpus", cache)
    assert folding.decode(folding.encode(CODE)) == "def f(x): return x * 2"  # the default folds whitespace
    longest_number = lambda t: max(len(t.decode([i]).strip()) for i in t.encode("1603 1610"))
    assert longest_number(tok) == 1 and longest_number(folding) > 1  # split_digits
