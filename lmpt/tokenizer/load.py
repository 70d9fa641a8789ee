"""Load a tokenizer file, picking the backend from it: a SentencePiece `.model` or a Hugging Face
`tokenizer.json`."""

from __future__ import annotations

from pathlib import Path

from lmpt.errors import LmptError
from lmpt.tokenizer.base import Tokenizer, remedy
from lmpt.tokenizer.hf import HfTokenizer, tokenizer_json_path
from lmpt.tokenizer.sentencepiece import SentencePieceTokenizer


def load_tokenizer(path: Path | str, what: str = "tokenizer.model_file", num_sentinels: int = 0) -> Tokenizer:
    """The tokenizer in `path`: a SentencePiece .model (lmpt's reserved layout), or a tokenizer.json or a
    directory holding one (a Hugging Face fast tokenizer; `num_sentinels` are added where it has none of
    its own: 0 for a file lmpt stored, which already holds every role). `what` names the setting to fix, or is
    RUN_FILE for a run directory's own copy (a broken one means the run directory is damaged)."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = tokenizer_json_path(path, what)
    if not path.is_file():
        raise LmptError(f"tokenizer file not found: {path}: {remedy(what)}")
    if path.suffix == ".json":
        return HfTokenizer(path, path.read_bytes(), num_sentinels, what)
    return SentencePieceTokenizer(path, path.read_bytes(), what)
