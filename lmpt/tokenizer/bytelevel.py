"""The byte-level BPE backend (GPT-2 style), trained by the `tokenizers` library with lmpt's reserved tokens
first: lossless for any text (every byte has a token, no normalisation, spaces kept), loaded as an
HfTokenizer from the tokenizer.json it writes."""

from __future__ import annotations

from tokenizers import Tokenizer as FastTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from lmpt.config.schema import TokenizerConfig
from lmpt.tokenizer.special import BOS, EOS, PAD, UNK, SpecialTokens


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
