"""Which Hugging Face tensor holds which lmpt weight: one table per architecture (`llama_layout`,
`t5_layout`) that export reads one way (lmpt -> transformers) and `model.init_from` the other.

lmpt fuses projections (q, k and v in one `qkv` matrix; gate and up in one `gate_up`), so an entry names a
row block of an lmpt tensor: `rows` None means the whole tensor."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lmpt.errors import LmptError
from lmpt.model.attention import Attention
from lmpt.model.language_model import LanguageModel
from lmpt.model.stacks import Decoder, EncoderDecoder, Stack


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
    for i, block in enumerate(body.stack.layers):
        hf, ours = f"model.layers.{i}", f"body.stack.blocks.{i}"
        layout += _attention(f"{hf}.self_attn", "{}_proj", f"{ours}.attn", block.attn)
        layout += _mlp(f"{hf}.mlp", ("gate_proj", "up_proj", "down_proj"), f"{ours}.mlp", block.mlp.down.in_features)
        layout += [
            HfTensor(f"{hf}.input_layernorm.weight", f"{ours}.attn_norm.weight"),
            HfTensor(f"{hf}.post_attention_layernorm.weight", f"{ours}.mlp_norm.weight"),
        ]
    return layout + [HfTensor("model.norm.weight", "body.stack.norm.weight")]


def _attention(hf: str, pattern: str, ours: str, attn: Attention) -> list[HfTensor]:
    """q, k, v and o of one attention: row blocks of lmpt's fused `qkv` (or `q` and `kv` when cross)."""
    d, kv = attn.o.in_features, attn.kv_dim
    name = lambda p: f"{hf}.{pattern.format(p)}.weight"
    if attn.cross:
        qkv = [
            HfTensor(name("q"), f"{ours}.q.weight"),
            HfTensor(name("k"), f"{ours}.kv.weight", slice(0, kv)),
            HfTensor(name("v"), f"{ours}.kv.weight", slice(kv, 2 * kv)),
        ]
    else:
        qkv = [
            HfTensor(name("q"), f"{ours}.qkv.weight", slice(0, d)),
            HfTensor(name("k"), f"{ours}.qkv.weight", slice(d, d + kv)),
            HfTensor(name("v"), f"{ours}.qkv.weight", slice(d + kv, d + 2 * kv)),
        ]
    return [*qkv, HfTensor(name("o"), f"{ours}.o.weight")]


def _mlp(hf: str, names: tuple[str, str, str], ours: str, ffn: int) -> list[HfTensor]:
    """gate, up and down of a gated feed-forward: gate and up are row blocks of lmpt's fused `gate_up`."""
    gate, up, down = names
    return [
        HfTensor(f"{hf}.{gate}.weight", f"{ours}.gate_up.weight", slice(0, ffn)),
        HfTensor(f"{hf}.{up}.weight", f"{ours}.gate_up.weight", slice(ffn, 2 * ffn)),
        HfTensor(f"{hf}.{down}.weight", f"{ours}.down.weight"),
    ]


def _t5_stack(hf: str, ours: str, stack: Stack) -> list[HfTensor]:
    assert stack.relative_bias is not None
    layout = []
    for i, block in enumerate(stack.layers):
        layer, mine = f"{hf}.block.{i}.layer", f"{ours}.blocks.{i}"
        layout += _attention(f"{layer}.0.SelfAttention", "{}", f"{mine}.attn", block.attn)
        layout.append(HfTensor(f"{layer}.0.layer_norm.weight", f"{mine}.attn_norm.weight"))
        if i == 0:  # T5 keeps the stack's one position-bias table in its first layer
            bias = f"{layer}.0.SelfAttention.relative_attention_bias.weight"
            layout.append(HfTensor(bias, f"{ours}.relative_bias.table.weight"))
        mlp = 1
        if block.cross_attn is not None:
            layout += _attention(f"{layer}.1.EncDecAttention", "{}", f"{mine}.cross_attn", block.cross_attn)
            layout.append(HfTensor(f"{layer}.1.layer_norm.weight", f"{mine}.cross_norm.weight"))
            mlp = 2
        ffn = block.mlp.down.in_features
        layout += _mlp(f"{layer}.{mlp}.DenseReluDense", ("wi_0", "wi_1", "wo"), f"{mine}.mlp", ffn)
        layout.append(HfTensor(f"{layer}.{mlp}.layer_norm.weight", f"{mine}.mlp_norm.weight"))
    return layout + [HfTensor(f"{hf}.final_layer_norm.weight", f"{ours}.norm.weight")]


def t5_layout(model: LanguageModel) -> list[HfTensor]:
    """The tensors of a T5ForConditionalGeneration (T5 v1.1: shared embedding, untied lm_head) for an
    encoder-decoder of the t5 flavour."""
    body = model.body
    if not isinstance(body, EncoderDecoder) or body.encoder.relative_bias is None or model.lm_head is None:
        raise ValueError(f"only a t5-flavour encoder-decoder has a T5 layout, not this {model.arch}")
    return [
        HfTensor("shared.weight", "body.embed.tokens.weight"),
        *_t5_stack("encoder", "body.encoder", body.encoder),
        *_t5_stack("decoder", "body.decoder", body.decoder),
        HfTensor("lm_head.weight", "lm_head.weight"),
    ]


def to_hf(layout: list[HfTensor], state: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """lmpt's `state` under the Hugging Face names of `layout` (contiguous CPU copies in `dtype`)."""
    out = {}
    for entry in layout:
        tensor = state[entry.lmpt_name].detach()
        tensor = tensor if entry.rows is None else tensor[entry.rows]
        out[entry.hf_name] = tensor.to("cpu", dtype).contiguous().clone()
    return out


def fits(have: tuple[int, ...], need: tuple[int, ...], grows: bool) -> bool:
    """Whether a source tensor of shape `have` fills lmpt's `need`: equal, or (`grows`: a vocabulary-sized
    tensor under a tokenizer that extends the source's) fewer rows, the rest keeping their fresh values."""
    return have == need or (grows and have[1:] == need[1:] and have[0] <= need[0])


def from_hf(
    layout: list[HfTensor],
    state: dict[str, torch.Tensor],
    hf: dict[str, torch.Tensor],
    origin: str,
    growable: frozenset[str] = frozenset(),
) -> None:
    """Copy the Hugging Face tensors `hf` into lmpt's `state` (in place). The first tensor that is missing or
    whose shape differs from what lmpt's model needs is named in an LmptError; nothing is copied then. Tensors
    of lmpt names in `growable` may have fewer rows in `hf` (see `fits`)."""
    for entry in layout:
        target = state[entry.lmpt_name]
        need = tuple(target.shape if entry.rows is None else target[entry.rows].shape)
        if entry.hf_name not in hf:
            raise LmptError(f"{origin} has no tensor {entry.hf_name} (lmpt's model needs one of shape {list(need)})")
        if not fits(tuple(hf[entry.hf_name].shape), need, entry.rows is None and entry.lmpt_name in growable):
            raise LmptError(
                f"{origin}: {entry.hf_name} has shape {list(hf[entry.hf_name].shape)}, lmpt's model needs "
                f"{list(need)} ({entry.lmpt_name}): the sizes do not fit"
            )
    with torch.no_grad():
        for entry in layout:
            target = state[entry.lmpt_name]
            target = target if entry.rows is None else target[entry.rows]
            source = hf[entry.hf_name]
            (target if source.shape == target.shape else target[: source.shape[0]]).copy_(source)
