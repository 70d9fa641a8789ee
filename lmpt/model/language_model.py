"""`LanguageModel`: one of the three stacks plus the tied output head, which runs only on
loss-bearing positions, and an optional sequence-classification head on position 0."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lmpt.batch import Batch
from lmpt.config.schema import ModelConfig
from lmpt.model.block import flavour
from lmpt.model.head import RowsLoss, compiled_rows_loss, rows_loss, token_losses
from lmpt.model.mtp import MultiTokenPrediction
from lmpt.model.output import ModelOutput
from lmpt.model.stacks import Decoder, Encoder, EncoderDecoder, Stack, self_attention_mask


def matmul_parameters(stack: Stack) -> int:
    """Parameters of a stack's Linear layers (norms excluded): the N_mm of the FLOPs formula."""
    return sum(m.weight.numel() for m in stack.modules() if isinstance(m, nn.Linear))


class LanguageModel(nn.Module):
    """A decoder, encoder or encoder-decoder with the token-embedding matrix as its output head (the t5
    flavour: an untied `lm_head`, as T5 v1.1). A decoder may carry `mtp_depth` multi-token prediction modules
    (lmpt.model.mtp), used in training only."""

    def __init__(
        self,
        cfg: ModelConfig,
        arch: str,
        vocab_size: int,
        pad_id: int,
        n_segments: int = 0,
        n_sequence_classes: int = 0,
        mtp_depth: int = 0,
    ) -> None:
        super().__init__()
        self.arch = arch
        self.vocab_size = vocab_size
        self.pad_id = pad_id
        self.d_model = int(cfg.d_model)
        self.max_seq_len = int(cfg.max_seq_len)
        bodies: dict[str, type[Decoder | EncoderDecoder]] = {
            "decoder": Decoder,
            "encoder": Encoder,
            "encoder-decoder": EncoderDecoder,
        }
        self.body: Decoder | EncoderDecoder = bodies[arch](cfg, vocab_size, pad_id, n_segments)
        self.lm_head: nn.Linear | None = None
        if flavour(cfg) == "t5":
            self.lm_head = nn.Linear(cfg.d_model, vocab_size, bias=False)
            nn.init.normal_(self.lm_head.weight, mean=0.0, std=cfg.init_std)
        self.sequence_head: nn.Sequential | None = None
        self.loss_of_rows: RowsLoss = rows_loss
        if n_sequence_classes > 0:
            first, last = nn.Linear(cfg.d_model, cfg.d_model), nn.Linear(cfg.d_model, n_sequence_classes)
            self.sequence_head = nn.Sequential(first, nn.Tanh(), last)
            for layer in (first, last):
                nn.init.normal_(layer.weight, mean=0.0, std=cfg.init_std)
                nn.init.zeros_(layer.bias)
        self.mtp = MultiTokenPrediction(cfg, mtp_depth) if mtp_depth > 0 else None

    def compile_parts(self, backend: str = "inductor") -> None:
        """torch.compile the stack in place (parameter names unchanged) and the head with a dynamic row count;
        the gather of loss-bearing rows between them stays eager, so the head stays sparse."""
        self.body.compile(backend=backend)
        self.loss_of_rows = compiled_rows_loss(backend)

    @property
    def head_weight(self) -> torch.Tensor:
        """[V, d] output projection: the token embedding (tied), or the t5 flavour's own lm_head."""
        return self.body.embed.tokens.weight if self.lm_head is None else self.lm_head.weight

    def _check_length(self, *ids: torch.Tensor | None) -> None:
        for t in ids:
            if t is not None and t.shape[1] > self.max_seq_len:
                raise ValueError(f"sequence of {t.shape[1]} tokens exceeds model.max_seq_len={self.max_seq_len}")

    def hidden_states(self, batch: Batch) -> torch.Tensor:
        """Final-norm hidden states [B, S, d] at the positions `batch.labels` refers to."""
        self._check_length(batch.input_ids, batch.decoder_input_ids)
        if isinstance(self.body, EncoderDecoder):
            if batch.decoder_input_ids is None:
                raise ValueError("an encoder-decoder batch needs decoder_input_ids")
            return self.body(
                batch.input_ids, batch.decoder_input_ids, batch.segment_ids, batch.input_padded, batch.decoder_padded
            )
        return self.body(
            batch.input_ids,
            batch.attention,
            batch.prefix_len,
            batch.document_ids,
            batch.segment_ids,
            batch.input_padded,
        )

    def forward(self, batch: Batch) -> ModelOutput:
        """Per-token float32 cross-entropy on positions whose label is not IGNORE. Labels are taken as
        given (already shifted by the objective); the head never sees the other positions."""
        hidden = self.hidden_states(batch)
        token_loss, token_correct, rows = token_losses(hidden, self.head_weight, batch.labels, self.loss_of_rows)
        sequence_logits = None
        if self.sequence_head is not None:
            # The encoder-decoder classifies from the decoder's first position, the others from the input's.
            sequence_logits = self.sequence_head(hidden[:, 0]).float()
        mtp_loss, mtp_correct = self._multi_token(hidden, batch)
        return ModelOutput(
            token_loss=token_loss,
            token_correct=token_correct,
            token_rows=rows,
            sequence_logits=sequence_logits,
            mtp_token_loss=mtp_loss,
            mtp_token_correct=mtp_correct,
        )

    def _multi_token(self, hidden: torch.Tensor, batch: Batch) -> tuple[tuple[torch.Tensor, ...], ...]:
        """The multi-token prediction modules' per-depth losses (none without modules or mtp_labels); their blocks
        attend as the main stack's do (same mask, same rotary positions)."""
        if self.mtp is None or batch.mtp_labels is None:
            return (), ()
        body: Any = self.body
        mask, causal = self_attention_mask(
            batch.input_ids, batch.attention, self.pad_id, batch.prefix_len, batch.document_ids, batch.input_padded
        )
        rope, mask, causal = body.stack.positions(hidden.shape[1], mask, causal)
        return self.mtp(
            hidden,
            batch.labels,
            batch.mtp_labels,
            body.embed,
            self.pad_id,
            rope,
            mask,
            causal,
            self.head_weight,
            self.loss_of_rows,
        )

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Full causal logits [B, S, V] of a decoder (sampling, evaluation)."""
        if not isinstance(self.body, Decoder) or isinstance(self.body, Encoder):
            raise ValueError(f"logits() needs a decoder, this model is a {self.arch}")
        self._check_length(input_ids)
        return self.body(input_ids, "causal") @ self.head_weight.t()

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Parameter count (a tied head counted once); non_embedding drops token and segment embeddings."""
        total = sum(p.numel() for p in self.parameters())
        if non_embedding:
            total -= sum(p.numel() for p in self.body.embed.parameters())
        return total

    def flops_per_example(self, seq_len: int, target_len: int = 0, head_fraction: float = 1.0) -> float:
        """Training FLOPs (forward + backward) for one example, per docs BENCHMARKS.md:
        6 N_mm + 12 L d S per token, tied head counted as a matmul on `head_fraction` of the positions
        that run it (an MLM head runs only on selected tokens). Encoder-decoder: the encoder per input
        token (seq_len), the decoder with cross-attention per target token (target_len); cross-attention
        keys/values are projected once per input token and attend over seq_len keys. Multi-token prediction
        modules add, per position and depth, their projection, their block and the head (lmpt.model.mtp)."""
        d, head = self.d_model, 6.0 * self.d_model * self.vocab_size * head_fraction
        if isinstance(self.body, EncoderDecoder):
            enc, dec = self.body.encoder, self.body.decoder
            cross_kv = sum(b.cross_attn.kv.weight.numel() for b in dec.layers if b.cross_attn is not None)
            encoder = seq_len * (6.0 * (matmul_parameters(enc) + cross_kv) + 12.0 * len(enc.blocks) * d * seq_len)
            dec_attention = 12.0 * len(dec.blocks) * d * (target_len + seq_len)
            decoder = target_len * (6.0 * (matmul_parameters(dec) - cross_kv) + dec_attention + head)
            return encoder + decoder
        stack = self.body.stack
        mtp = 0.0 if self.mtp is None else self.mtp.flops_per_token(seq_len, head)
        return seq_len * (6.0 * matmul_parameters(stack) + 12.0 * len(stack.blocks) * d * seq_len + head + mtp)
