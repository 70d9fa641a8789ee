"""Speed features train the same model: activation checkpointing, the compile-friendly head, fused
projections that still split into Llama's layout."""

import torch
from model_helpers import PAD, VOCAB, random_ids, tiny_config

from lmpt.batch import IGNORE, Batch
from lmpt.model import build_model


def _build(arch: str, **cfg: object):
    torch.manual_seed(0)
    return build_model(tiny_config(**cfg), arch, VOCAB, PAD).train()


def _mlm_batch(seed: int, keep: float) -> Batch:
    ids = random_ids(2, 16, seed=seed)
    labels = ids.clone()
    drop = torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed)) > keep
    labels[drop] = IGNORE
    return Batch(input_ids=ids, labels=labels, attention="bidirectional")


def _loss_and_grads(model, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Loss and gradients by parameter name."""
    model.zero_grad(set_to_none=True)
    loss = model(batch).token_loss.mean()
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_activation_checkpointing_gives_the_same_loss_and_gradients() -> None:
    for arch in ("decoder", "encoder-decoder"):
        plain, recomputed = _build(arch), _build(arch, activation_checkpointing=True)
        recomputed.load_state_dict(plain.state_dict())
        ids = random_ids(2, 12)
        fields = dict(decoder_input_ids=random_ids(2, 6, seed=5)) if arch == "encoder-decoder" else {}
        labels = random_ids(2, 6 if fields else 12, seed=3)
        batch = Batch(input_ids=ids, labels=labels, attention="causal", **fields)
        loss_a, grads_a = _loss_and_grads(plain, batch)
        loss_b, grads_b = _loss_and_grads(recomputed, batch)
        torch.testing.assert_close(loss_b, loss_a, rtol=0, atol=1e-6)
        assert grads_a.keys() == grads_b.keys() and len(grads_a) == len(list(plain.parameters()))
        for name, grad in grads_a.items():
            torch.testing.assert_close(grads_b[name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_activation_checkpointing_is_off_in_eval_and_without_grad() -> None:
    model = _build("decoder", activation_checkpointing=True).eval()
    batch = Batch(input_ids=random_ids(1, 8), labels=random_ids(1, 8, seed=2))
    with torch.no_grad():
        assert model(batch).token_loss.shape == (8,)


def test_compiled_model_matches_eager_without_recompiling() -> None:
    """aot_eager traces exactly what inductor would compile (dynamo + autograd) in a fraction of the time.
    The head stays sparse when compiled: batches with different target counts share one graph."""
    import torch._dynamo

    torch._dynamo.reset()
    model, compiled = _build("encoder"), _build("encoder")
    compiled.compile_parts(backend="aot_eager")
    batches = [_mlm_batch(seed, keep) for seed, keep in ((1, 0.15), (2, 0.3), (3, 0.5))]
    assert len({int((b.labels != IGNORE).sum()) for b in batches}) == 3  # a different target count each
    with torch._dynamo.config.patch(error_on_recompile=True):
        for batch in batches:
            eager_out, compiled_out = model(batch), compiled(batch)
            torch.testing.assert_close(compiled_out.token_loss, eager_out.token_loss, rtol=1e-5, atol=1e-5)
            assert torch.equal(compiled_out.token_correct, eager_out.token_correct)
            assert torch.equal(compiled_out.token_rows, eager_out.token_rows)
            _, eager_grads = _loss_and_grads(model, batch)
            _, compiled_grads = _loss_and_grads(compiled, batch)
            for name, grad in eager_grads.items():
                torch.testing.assert_close(compiled_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    assert compiled.state_dict().keys() == model.state_dict().keys()  # compiled in place: the same names
    torch._dynamo.reset()


def test_fused_projections_split_into_the_unfused_layout() -> None:
    model = _build("encoder-decoder")
    block = model.body.decoder.blocks[0]
    parts = block.attn.split_projections()
    assert [w.shape for w in parts.values()] == [(32, 32)] * 4
    torch.testing.assert_close(torch.cat([parts["q"], parts["k"], parts["v"]]), block.attn.qkv.weight)
    cross = block.cross_attn.split_projections()
    torch.testing.assert_close(torch.cat([cross["k"], cross["v"]]), block.cross_attn.kv.weight)
    gate, up = block.mlp.gate_up.weight.chunk(2)
    x = torch.randn(3, 32)
    expected = block.mlp.down(torch.nn.functional.silu(x @ gate.t()) * (x @ up.t()))
    torch.testing.assert_close(block.mlp(x), expected)
