"""An offline word tokenizer for datatrove's steps. datatrove assigns English to spaCy (`SpaCyTokenizer("en")`:
spaCy is a large install) and its NLTK fallback loads the punkt model, which NLTK downloads from the network on
first use. lmpt-prepare must run offline, so every datatrove step that splits words (the Gopher filters, the MinHash
signature, decontamination) is given this tokenizer instead: datatrove's `load_word_tokenizer` accepts a
WordTokenizer object in place of a language code for exactly this."""

from __future__ import annotations

import regex
from datatrove.utils.word_tokenizers import WordTokenizer

# a word: letters and digits (with inner apostrophes or hyphens), or one run of other non-space characters
_WORD = regex.compile(r"[\p{L}\p{N}]+(?:['’\-][\p{L}\p{N}]+)*|[^\s\p{L}\p{N}]+")
_SENTENCE = regex.compile(r"[^\n]+?(?:[.!?…]+[\"'”’)\]]*(?=\s|$)|$)", regex.MULTILINE)


class LocalWordTokenizer(WordTokenizer):
    """Words by a Unicode regex, sentences at terminal punctuation or a line end: no model, no download."""

    def __init__(self) -> None:
        super().__init__("en")

    def word_tokenize(self, text: str) -> list[str]:
        return _WORD.findall(text)

    def sent_tokenize(self, text: str) -> list[str]:
        return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(m.start(), m.end()) for m in _SENTENCE.finditer(text) if m.group().strip()]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalWordTokenizer)  # one tokenizer: datatrove caches it by key

    def __hash__(self) -> int:
        return hash(LocalWordTokenizer)


WORDS = LocalWordTokenizer()
