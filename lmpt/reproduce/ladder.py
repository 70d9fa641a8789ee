"""A reproduction's model ladder: a model of each width, its shape following from the width (a layer and a head per
32 dimensions, a feed-forward of 3 widths), its parameters counted the ways papers count them (with and without the
embedding), its training FLOPs a token as lmpt counts them (clm's, and mdlm's with its head on the masked positions
alone), and compute-optimal sizing (Hoffmann et al. 2022's about 20 tokens a parameter)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lmpt.errors import LmptError
from lmpt.objectives.mdlm import MdlmConfig
from lmpt.reproduce.reproduction import DIFFUSION

TOKENS_PER_PARAMETER = 20.0
"""Compute-optimal training: about 20 tokens a parameter (Hoffmann et al. 2022, "Training Compute-Optimal Large
Language Models", Table 3's fits), the sizing the data-constrained and diffusion-scaling papers follow."""
MAX_EMBEDDING_SHARE = 0.95
"""A width whose token embedding would hold more of the model's parameters than this is refused: too small for the
tokenizer (a lookup table with a sliver of a transformer on top)."""


@dataclass(frozen=True)
class Shape:
    """A ladder rung: its width, the vocabulary and context it is trained with, and the shape that follows."""

    width: int
    vocab: int = 2048
    seq_len: int = 128

    @property
    def label(self) -> str:
        """Its name in run labels and tables: micro at width 64 (that model's shape), else wWIDTH."""
        return "micro" if self.width == 64 else f"w{self.width}"

    @property
    def layers(self) -> int:
        return max(1, self.width // 32)

    @property
    def heads(self) -> int:
        return max(1, self.width // 32)

    @property
    def ffn(self) -> int:
        return 3 * self.width

    @property
    def matmul_parameters(self) -> int:
        """Parameters of the blocks' matrices: the non-embedding parameters (norms aside)."""
        return self.layers * (4 * self.width**2 + 3 * self.width * self.ffn)

    @property
    def parameters(self) -> int:
        """Parameters with the tied embedding (norms aside)."""
        return self.vocab * self.width + self.matmul_parameters

    @property
    def flops_per_token(self) -> float:
        """Training FLOPs a token of clm, as lmpt counts them: 6 N_mm + 12 L d S + the head's 6 d V."""
        return (
            6.0 * self.matmul_parameters
            + 12.0 * self.layers * self.width * self.seq_len
            + 6.0 * self.width * self.vocab
        )

    def keys(self) -> tuple[str, ...]:
        """The lmpt keys of this shape (on the micro model's defaults, whose positions reach 512)."""
        keys = (
            "model=micro",
            f"model.d_model={self.width}",
            f"model.n_layers={self.layers}",
            f"model.n_heads={self.heads}",
            f"model.ffn_dim={self.ffn}",
        )
        return keys + ((f"model.max_seq_len={self.seq_len}",) if self.seq_len > 512 else ())


def training_flops(shape: Shape, objective: str) -> float:
    """Training FLOPs a token of `objective` (clm or mdlm) as lmpt counts them (lmpt.train.metrics.training_flops):
    mdlm's head runs on its masked positions alone, on average a share (1 + eps) / 2 of them (lmpt.objectives.mdlm's
    expected_loss_fraction)."""
    if objective != DIFFUSION:
        return shape.flops_per_token
    unmasked = 1.0 - (1.0 + MdlmConfig.eps) / 2.0
    return shape.flops_per_token - 6.0 * shape.width * shape.vocab * unmasked


def check_ladder(widths: Sequence[int], vocab: int = 2048, seq_len: int = 128) -> list[Shape]:
    """The ladder's shapes; a width too small for the tokenizer refused in one line."""
    shapes = []
    for width in widths:
        if width < 1:
            raise LmptError(f"ladder width {width} must be at least 1")
        shape = Shape(width, vocab, seq_len)
        if width % shape.heads or (width // shape.heads) % 2:
            raise LmptError(
                f"ladder width {width} gives {shape.heads} head(s) (one per 32 dimensions) of {width / shape.heads:g} "
                "dimensions, which lmpt cannot build (a head holds a whole, even number): give a multiple of 32, or "
                "an even width below 64"
            )
        share = vocab * width / shape.parameters
        if share > MAX_EMBEDDING_SHARE:
            raise LmptError(
                f"ladder width {width} is too small for the {vocab:,}-piece tokenizer: its embedding would hold "
                f"{share:.1%} of its {shape.parameters:,} parameters; give wider models"
            )
        shapes.append(shape)
    return shapes


def optimal_tokens(parameters: float) -> float:
    """The training tokens at which a model of `parameters` is compute-optimal."""
    return TOKENS_PER_PARAMETER * parameters


def optimal_parameters(tokens: float) -> float:
    """The parameters compute-optimal for `tokens` training tokens."""
    return tokens / TOKENS_PER_PARAMETER
