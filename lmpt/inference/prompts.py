"""Turning a user's text with reserved markers ([MASK], <extra_id_N>) into ids the way training saw them:
a marker replaces whole pieces, so the text around it is encoded on its own (no stray word-start piece)."""

from __future__ import annotations

import re

from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.special import MASK

SENTINEL = re.compile(r"<extra_id_(\d+)>")


def encode_marked(tokenizer: Tokenizer, text: str, marker: re.Pattern[str]) -> list[int]:
    """Ids of `text` where each match of `marker` is the reserved piece it spells (one id)."""
    ids: list[int] = []
    position = 0
    for match in marker.finditer(text):
        before = text[position : match.start()].strip()
        if before:
            ids.extend(tokenizer.encode(before))
        ids.append(tokenizer.piece_to_id(match.group(0)))
        position = match.end()
    rest = text[position:].strip()
    if rest:
        ids.extend(tokenizer.encode(rest))
    return ids


MASK_MARKER = re.compile(re.escape(MASK))
