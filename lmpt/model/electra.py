"""`ElectraModel`: ELECTRA's generator and discriminator (Clark et al. 2020, after google-research/electra's
run_pretraining.py), trained together.

The generator is a small bidirectional encoder (width `generator_size` of the discriminator's, heads of the
discriminator's head width, feed-forward scaled alike, as many layers) trained with MLM on the masked positions.
Its samples replace those positions (Gumbel-max, no gradient through the draw), and the discriminator, an
encoder exactly like mlm's, says at every position whether the token was replaced. One token embedding of the
discriminator's width serves both and the generator's output head (the reference's shared embeddings with
`embedding_size` = the discriminator's hidden size): the generator projects it in to its own width and its MLM
head projects back (dense + GELU + LayerNorm, the reference's `get_token_logits`) before the tied matmul.

State-dict layout: `discriminator.*` is a plain encoder `LanguageModel` (`discriminator_state` strips the prefix,
which is how lmpt-export and downstream tools take the discriminator), `generator.*` and `replaced_head.*`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.errors import LmptError
from lmpt.model.language_model import LanguageModel, matmul_parameters
from lmpt.model.output import ModelOutput
from lmpt.model.stacks import Stack, self_attention_mask

DISCRIMINATOR_PREFIX = "discriminator."


@dataclass
class ElectraOutput(ModelOutput):
    """ModelOutput's token fields hold the generator's MLM losses; the discriminator's are per non-pad position."""

    disc_loss: torch.Tensor | None = None
    """[M] float32 binary cross-entropy of the replaced/original prediction at each non-pad position."""
    disc_correct: torch.Tensor | None = None
    """[M] bool: the prediction (logit > 0 = replaced) is right."""
    replaced: torch.Tensor | None = None
    """[M] bool: the token there was replaced (a sample equal to the original counts as original)."""


def generator_config(cfg: ModelConfig, generator_size: float) -> ModelConfig:
    """The generator's sizes: width round(d_model * size), heads of the discriminator's head width (at least one),
    ffn_dim scaled by the same fraction, plain multi-head attention; refuses a width that cannot make heads."""
    head_dim = int(cfg.d_model) // int(cfg.n_heads)
    width = round(int(cfg.d_model) * generator_size)
    heads = max(1, width // head_dim)
    if width < 2 or width % heads != 0 or (width // heads) % 2 != 0:
        raise LmptError(
            f"objective.generator_size={generator_size:g} gives a generator {width} wide, which cannot be split into "
            f"heads of even width (model.d_model={cfg.d_model}, head width {head_dim}): choose a size whose width "
            f"is a multiple of {head_dim}, or an even width below it"
        )
    sizes = {
        "d_model": width,
        "n_heads": heads,
        "n_kv_heads": None,
        "ffn_dim": max(1, round(cfg.ffn_dim * generator_size)),
    }
    return cast(ModelConfig, OmegaConf.merge(cfg, sizes))  # a run's ModelConfig or a stored run's node alike


def _init_linear(layer: nn.Linear, std: float) -> None:
    nn.init.normal_(layer.weight, mean=0.0, std=std)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)


class Generator(nn.Module):
    """The small MLM encoder over the shared embedding: projection in (none when as wide), a Stack, and the MLM head's
    transform back to the embedding width."""

    def __init__(self, cfg: ModelConfig, d_embed: int) -> None:
        super().__init__()
        width, std = int(cfg.d_model), float(cfg.init_std)
        self.project_in = nn.Linear(d_embed, width, bias=False) if width != d_embed else None
        self.stack = Stack(cfg, int(cfg.n_layers), cross=False)
        transform = nn.Linear(width, d_embed)
        self.head_transform = nn.Sequential(transform, nn.GELU(), nn.LayerNorm(d_embed))
        for layer in (self.project_in, transform):
            if layer is not None:
                _init_linear(layer, std)

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Embedded inputs [B,S,d_embed] -> final hidden states [B,S,width]."""
        x = embedded if self.project_in is None else self.project_in(embedded)
        return self.stack(x, mask, False)


def gumbel_sample(logits: torch.Tensor, allowed: torch.Tensor, seed: int, temperature: float) -> torch.Tensor:
    """One draw per row of `logits` [N,V] from softmax(logits / temperature) restricted to `allowed` [V] ids, by the
    Gumbel-max trick as the reference's `sample_from_softmax`, its uniform noise seeded by `seed` alone."""
    gen = torch.Generator(device=logits.device)
    gen.manual_seed(seed)
    uniform = torch.rand(logits.shape, generator=gen, device=logits.device)
    gumbel = -torch.log(-torch.log(uniform + 1e-9) + 1e-9)
    scaled = (logits.float() / temperature).masked_fill(~allowed, float("-inf"))
    return (scaled + gumbel).argmax(dim=-1)


class ElectraModel(nn.Module):
    """Generator -> sample -> discriminator in one forward; see the module docstring."""

    samplable: torch.Tensor

    def __init__(
        self,
        cfg: ModelConfig,
        vocab_size: int,
        pad_id: int,
        samplable: torch.Tensor,
        generator_size: float,
        temperature: float,
    ) -> None:
        super().__init__()
        self.arch = "encoder"
        self.vocab_size, self.pad_id, self.temperature = vocab_size, pad_id, float(temperature)
        self.d_model, self.max_seq_len = int(cfg.d_model), int(cfg.max_seq_len)
        self.discriminator = LanguageModel(cfg, "encoder", vocab_size, pad_id)
        self.generator = Generator(generator_config(cfg, generator_size), self.d_model)
        first, last = nn.Linear(self.d_model, self.d_model), nn.Linear(self.d_model, 1)
        self.replaced_head = nn.Sequential(first, nn.GELU(), last)
        for layer in (first, last):
            _init_linear(layer, float(cfg.init_std))
        self.register_buffer("samplable", samplable.bool(), persistent=False)

    @property
    def embedding(self) -> nn.Embedding:
        """The one token embedding: the discriminator's input, the generator's input and its output head."""
        return self.discriminator.body.embed.tokens

    def compile_parts(self, backend: str = "inductor") -> None:
        """torch.compile both stacks in place (parameter names unchanged); heads and sampling stay eager."""
        self.generator.stack.compile(backend=backend)
        self.discriminator.body.compile(backend=backend)

    def generator_logits(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits [N,V] float32 at the N positions whose label is set, in row-major order; the selection [B,S])."""
        self.discriminator._check_length(batch.input_ids)
        mask, _ = self_attention_mask(batch.input_ids, "bidirectional", self.pad_id)
        hidden = self.generator(self.discriminator.body.embed(batch.input_ids), mask)
        selected = batch.labels != IGNORE
        rows = self.generator.head_transform(hidden[selected])
        return (rows @ self.embedding.weight.t()).float(), selected

    def forward(self, batch: Batch) -> ElectraOutput:
        """Generator MLM losses at the masked positions, then the discriminator's replaced-token losses at every
        non-pad position of the input with the generator's samples in place of the masked tokens."""
        if batch.sample_seed is None:
            raise ValueError("an electra batch needs sample_seed (made by the electra objective)")
        logits, selected = self.generator_logits(batch)
        targets = batch.labels[selected]
        token_loss = F.cross_entropy(logits, targets, reduction="none")
        with torch.no_grad():
            token_correct = logits.gather(1, targets[:, None])[:, 0] >= logits.amax(dim=-1)
            sampled = gumbel_sample(logits, self.samplable, batch.sample_seed, self.temperature)
            original = torch.where(selected, batch.labels, batch.input_ids)
            corrupted = original.masked_scatter(selected, sampled)
            replaced = corrupted != original  # a sample equal to the original is labelled original
        real = batch.input_ids != self.pad_id
        hidden = self.discriminator.body(corrupted)
        replaced_logits = self.replaced_head(hidden[real]).squeeze(-1).float()
        targets_d = replaced[real]
        disc_loss = F.binary_cross_entropy_with_logits(replaced_logits, targets_d.float(), reduction="none")
        return ElectraOutput(
            token_loss=token_loss,
            token_correct=token_correct,
            token_rows=selected.nonzero()[:, 0],
            disc_loss=disc_loss,
            disc_correct=(replaced_logits.detach() > 0) == targets_d,
            replaced=targets_d,
        )

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Parameter count (the shared embedding once); non_embedding drops the token embedding."""
        total = sum(p.numel() for p in self.parameters())
        return total - (self.embedding.weight.numel() if non_embedding else 0)

    def flops_parts(self, seq_len: int, head_fraction: float = 1.0) -> dict[str, float]:
        """Training FLOPs of one example by network, as LanguageModel.flops_per_example counts them: the
        discriminator at every position (its replaced-token head included; its tied MLM head never runs), the
        generator at every position (projection in and stack) and its MLM head (transform and tied matmul) on
        `head_fraction` of the positions."""
        gen = self.generator
        d, width = self.d_model, int(gen.stack.norm.normalized_shape[0])
        replaced_head = 6.0 * sum(m.weight.numel() for m in self.replaced_head if isinstance(m, nn.Linear))
        discriminator = self.discriminator.flops_per_example(seq_len, 0, head_fraction=0.0) + seq_len * replaced_head
        project_in = 0 if gen.project_in is None else gen.project_in.weight.numel()
        stack = 6.0 * (matmul_parameters(gen.stack) + project_in) + 12.0 * len(gen.stack.blocks) * width * seq_len
        head = 6.0 * (width * d + d * self.vocab_size) * head_fraction
        return {"discriminator": discriminator, "generator": seq_len * (stack + head)}

    def flops_per_example(self, seq_len: int, target_len: int = 0, head_fraction: float = 1.0) -> float:
        """Training FLOPs of one example: the sum of `flops_parts` (the generator's head on `head_fraction`)."""
        return sum(self.flops_parts(seq_len, head_fraction).values())


def discriminator_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The discriminator's weights out of an ElectraModel state dict, as a plain encoder LanguageModel's."""
    return {k.removeprefix(DISCRIMINATOR_PREFIX): v for k, v in state.items() if k.startswith(DISCRIMINATOR_PREFIX)}
