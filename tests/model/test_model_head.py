"""The head runs only on loss-bearing positions, never shifts labels, and the model trains."""

import torch
import torch.nn.functional as F
from model_helpers import VOCAB, random_ids, tiny_model

from lmpt.batch import IGNORE, Batch


def test_token_loss_only_on_labelled_positions_and_unshifted() -> None:
    model = tiny_model("decoder")
    ids = random_ids(2, 10)
    labels = torch.full_like(ids, IGNORE)
    labels[0, [1, 4, 9]] = torch.tensor([5, 6, 7])
    labels[1, 0] = 8
    out = model(Batch(input_ids=ids, labels=labels))
    selected = labels != IGNORE
    assert out.token_loss.shape == (int(selected.sum()),)
    assert out.token_loss.dtype == torch.float32
    full = model.logits(ids)
    expected = F.cross_entropy(full[selected].float(), labels[selected], reduction="none")
    torch.testing.assert_close(out.token_loss, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.token_correct, full[selected].argmax(-1) == labels[selected])
    assert out.token_rows.tolist() == [0, 0, 0, 1]
    # A shifted reading (logits at t-1 for label t) gives a different loss: the model did not shift.
    shifted = F.cross_entropy(full[0, [0, 3, 8]], labels[0, [1, 4, 9]], reduction="none")
    assert not torch.allclose(out.token_loss[:3], shifted, atol=1e-4)


def test_encoder_decoder_loss_uses_decoder_labels() -> None:
    model = tiny_model("encoder-decoder")
    enc, dec = random_ids(2, 8, seed=2), random_ids(2, 5, seed=3)
    labels = torch.full_like(dec, IGNORE)
    labels[:, :3] = dec[:, 1:4]
    out = model(Batch(input_ids=enc, labels=labels, attention="bidirectional", decoder_input_ids=dec))
    assert out.token_loss.shape == (6,)
    assert out.token_rows.tolist() == [0, 0, 0, 1, 1, 1]


def test_sequence_head_and_segments() -> None:
    model = tiny_model("encoder", n_segments=2, n_sequence_classes=2)
    ids = random_ids(3, 8)
    labels = torch.full_like(ids, IGNORE)
    labels[:, 2] = 4
    segments = torch.zeros_like(ids)
    base = model(Batch(input_ids=ids, labels=labels, attention="bidirectional", segment_ids=segments))
    assert base.sequence_logits is not None and base.sequence_logits.shape == (3, 2)
    segments[:, 4:] = 1
    other = model(Batch(input_ids=ids, labels=labels, attention="bidirectional", segment_ids=segments))
    assert other.sequence_logits is not None
    assert not torch.allclose(other.sequence_logits, base.sequence_logits)


def test_sgd_steps_reduce_loss_on_a_fixed_batch() -> None:
    model = tiny_model("decoder").train()
    ids = random_ids(4, 16)
    batch = Batch(input_ids=ids, labels=torch.roll(ids, -1, dims=1))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(5):
        loss = model(batch).token_loss.mean()
        opt.zero_grad()
        loss.backward()
        assert all(p.grad is not None for p in model.parameters())
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.05, losses
    assert abs(losses[0] - torch.log(torch.tensor(float(VOCAB))).item()) < 0.5  # small init: near-uniform start


def test_fused_cpu_head_matches_the_unfused_ops_in_value_and_gradient() -> None:
    """The fused head (blocks of rows, gradient formed in place) gives PyTorch's own cross-entropy to float32
    rounding: loss, top-1, and both gradients, over several blocks and a last partial one, with an excluded id."""
    from lmpt.model import head

    torch.manual_seed(0)
    vocab, d = 1024, 32
    rows = 3 * max(head.MIN_BLOCK_ROWS, head.BLOCK_ELEMENTS // vocab) + 17  # three full blocks and a part
    hidden0, weight0 = torch.randn(rows, d), torch.randn(vocab, d) * 0.2
    targets = torch.randint(1, vocab, (rows,))
    excluded = torch.zeros(vocab, dtype=torch.bool)
    excluded[0] = True
    grad_out = torch.rand(rows)  # per-row weights, as mdlm's 1/t gives them

    def run(loss_of_rows, row_weights=grad_out, **kwargs):
        hidden, weight = hidden0.clone().requires_grad_(), weight0.clone().requires_grad_()
        loss, correct = loss_of_rows(hidden, weight, targets, excluded, **kwargs)
        (loss * row_weights).sum().backward()
        return loss, correct, hidden.grad, weight.grad

    def same(fused, plain):
        for a, b in zip(fused, plain, strict=True):
            torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-5)

    fused, plain = run(head.ChunkedCrossEntropy.apply), run(head.unfused_rows_loss)
    same(fused, plain)
    assert fused[1].any() and not fused[1].all()
    # one weight for every row (a mean): the gradient formed in the forward pass, scaled by it in the backward
    mean = torch.full((rows,), 1.0 / rows)
    same(run(head.rows_loss, mean), run(head.unfused_rows_loss, mean))
    # a graph kept for a second backward (retain_graph): the forward-formed gradient is not scaled twice
    hidden = hidden0.clone().requires_grad_()
    loss, _ = head.rows_loss(hidden, weight0, targets, excluded)
    loss.mean().backward(retain_graph=True)
    first = hidden.grad.clone()
    hidden.grad = None
    loss.mean().backward()
    torch.testing.assert_close(hidden.grad, first, atol=0, rtol=0)
    # the promise of one weight broken: the backward pass computes the gradient again, the same as ever
    same(run(head.rows_loss, grad_out, uniform=True), plain)
    # rows_loss takes the fused path on a CPU in float32, the plain ops under autocast
    loss, _ = head.rows_loss(hidden0.requires_grad_(), weight0, targets)
    assert type(loss.grad_fn).__name__ == "ChunkedCrossEntropyBackward"
    assert loss.grad_fn.grads is not None  # formed in the forward pass: one weight a row was promised
    loss, _ = head.rows_loss(hidden0, weight0, targets, excluded, uniform=False)
    assert loss.grad_fn.grads is None  # mdlm's rows weighed by 1/t: formed in the backward pass
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = head.rows_loss(hidden0, weight0, targets)
    assert type(loss.grad_fn).__name__ != "ChunkedCrossEntropyBackward"
    hidden0.requires_grad_(False)
    with torch.no_grad():  # evaluation: no graph, same figures
        loss, _ = head.rows_loss(hidden0, weight0, targets, excluded)
    torch.testing.assert_close(loss, plain[0], atol=2e-5, rtol=1e-5)
    # no loss-bearing rows: nothing scored, nothing to learn
    empty = torch.zeros(0, d, requires_grad=True)
    loss, correct = head.rows_loss(empty, weight0, targets[:0])
    loss.sum().backward()
    assert loss.shape == correct.shape == (0,) and empty.grad.shape == (0, d)
    # the excluded id gets no probability: making it the target costs infinitely much
    loss, _ = head.rows_loss(hidden0[:2], weight0, torch.zeros(2, dtype=torch.long), excluded)
    assert torch.isinf(loss).all()
