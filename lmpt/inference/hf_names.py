"""Which Hugging Face tensor holds which lmpt weight: one table (`llama_layout`) that export reads one way
(lmpt -> transformers) and `model.init_from` the other (transformers -> lmpt).

lmpt fuses projections (q, k and v in one `qkv` matrix; gate and up in one `gate_up`), so an entry names a
row block of an lmpt tensor: `rows` None means the whole tensor."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lmpt.errors import LmptError
from lmpt.model.language_model import LanguageModel
from lmpt.model.stacks import Decoder


@dataclass(frozen=True)
class HfTensor:
    """One Hugging Face tensor and where it lives in lmpt's state dict."""

    hf_name: str
    lmpt_name: str
    rows: slice | None = None


def llama_layout(model: LanguageModel) -> list[HfTensor]:
    """The tensors of a LlamaForCausalLM (decoder) or EuroBertForMaskedLM (encoder) with tied embeddings, in
    the order transformers lists them. Both use Llama's names: `model.layers.{i}.self_attn.q_proj` and so on."""
    body = model.body
    if not isinstance(body, Decoder) or body.embed.segments is not None:
        raise ValueError(f"a {model.arch} with segment embeddings has no Llama layout")
    layout = [HfTensor("model.embed_tokens.weight", "body.embed.tokens.weight")]
    for i, block in enumerate(body.stack.blocks):
        hf, ours = f"model.layers.{i}", f"body.stack.blocks.{i}"
        d, kv = block.attn.o.in_features, block.attn.kv_dim
        ffn = block.mlp.down.in_features
        layout += [
            HfTensor(f"{hf}.self_attn.q_proj.weight", f"{ours}.attn.qkv.weight", slice(0, d)),
            HfTensor(f"{hf}.self_attn.k_proj.weight", f"{ours}.attn.qkv.weight", slice(d, d + kv)),
            HfTensor(f"{hf}.self_attn.v_proj.weight", f"{ours}.attn.qkv.weight", slice(d + kv, d + 2 * kv)),
            HfTensor(f"{hf}.self_attn.o_proj.weight", f"{ours}.attn.o.weight"),
            HfTensor(f"{hf}.mlp.gate_proj.weight", f"{ours}.mlp.gate_up.weight", slice(0, ffn)),
            HfTensor(f"{hf}.mlp.up_proj.weight", f"{ours}.mlp.gate_up.weight", slice(ffn, 2 * ffn)),
            HfTensor(f"{hf}.mlp.down_proj.weight", f"{ours}.mlp.down.weight"),
            HfTensor(f"{hf}.input_layernorm.weight", f"{ours}.attn_norm.weight"),
            HfTensor(f"{hf}.post_attention_layernorm.weight", f"{ours}.mlp_norm.weight"),
        ]
    return layout + [HfTensor("model.norm.weight", "body.stack.norm.weight")]


def to_hf(layout: list[HfTensor], state: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """lmpt's `state` under the Hugging Face names of `layout` (contiguous CPU copies in `dtype`)."""
    out = {}
    for entry in layout:
        tensor = state[entry.lmpt_name].detach()
        tensor = tensor if entry.rows is None else tensor[entry.rows]
        out[entry.hf_name] = tensor.to("cpu", dtype).contiguous().clone()
    return out


def from_hf(layout: list[HfTensor], state: dict[str, torch.Tensor], hf: dict[str, torch.Tensor], origin: str) -> None:
    """Copy the Hugging Face tensors `hf` into lmpt's `state` (in place). The first tensor that is missing or
    whose shape differs from what lmpt's model needs is named in an LmptError; nothing is copied then."""
    for entry in layout:
        target = state[entry.lmpt_name]
        need = tuple(target.shape if entry.rows is None else target[entry.rows].shape)
        if entry.hf_name not in hf:
            raise LmptError(f"{origin} has no tensor {entry.hf_name} (lmpt's model needs one of shape {list(need)})")
        if tuple(hf[entry.hf_name].shape) != need:
            raise LmptError(
                f"{origin}: {entry.hf_name} has shape {list(hf[entry.hf_name].shape)}, lmpt's model needs "
                f"{list(need)} ({entry.lmpt_name}): the sizes do not fit"
            )
    with torch.no_grad():
        for entry in layout:
            target = state[entry.lmpt_name]
            (target if entry.rows is None else target[entry.rows]).copy_(hf[entry.hf_name])
