"""electra: the generator's masking on real text, the replaced/original labels (a sample equal to the original is
original, as in google-research/electra), the loss composition and the settings refused at start-up."""

from __future__ import annotations

import pytest
import torch
from objective_helpers import FakeTokenizer, assert_same_batch, batches, five_sigma, windows

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.errors import LmptError
from lmpt.objectives.electra import ElectraConfig
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN = 128
TINY = ModelConfig(name="test", d_model=32, n_layers=2, n_heads=2, ffn_dim=64, max_seq_len=SEQ_LEN)


def electra(tokenizer, **settings: object):
    return build_objective(ElectraConfig(**settings), tokenizer, SEQ_LEN, "auto")


def collect(objective, corpus, n_steps: int = 16, batch_size: int = 16) -> tuple[torch.Tensor, ...]:
    tokens, inputs, labels = [], [], []
    for w, batch in batches(objective, corpus, batch_size, n_steps):
        assert batch.attention == "bidirectional" and batch.sample_seed is not None
        tokens.append(w.tokens.flatten())
        inputs.append(batch.input_ids.flatten())
        labels.append(batch.labels.flatten())
    return torch.cat(tokens), torch.cat(inputs), torch.cat(labels)


def test_every_selected_token_is_masked_at_the_rate(shakespeare) -> None:
    """ELECTRA's generator input: 15% of the ordinary tokens, every one [MASK] by default; the rest untouched."""
    special = shakespeare.tokenizer.special
    objective = electra(shakespeare.tokenizer)
    assert objective.arch == "encoder" and objective.perplexity_of == "gen_loss"
    tokens, inputs, labels = collect(objective, shakespeare.train)
    eligible = tokens >= special.first_ordinary
    selected = labels != IGNORE
    n = int(eligible.sum())
    assert abs(int(selected.sum()) - 0.15 * n) < five_sigma(n, 0.15)
    assert bool((eligible | ~selected).all())
    assert torch.equal(labels[selected], tokens[selected])
    assert bool((inputs[selected] == special.mask).all())
    assert torch.equal(inputs[~selected], tokens[~selected])


def test_mask_token_frac_keeps_the_rest_unchanged(shakespeare) -> None:
    """objective.mask_token_frac=0.85 is the released code's pretrain_helpers.mask: 85% [MASK], 15% kept."""
    special = shakespeare.tokenizer.special
    tokens, inputs, labels = collect(electra(shakespeare.tokenizer, mask_token_frac=0.85), shakespeare.train)
    selected = labels != IGNORE
    n = int(selected.sum())
    masked = int((inputs[selected] == special.mask).sum())
    assert abs(masked - 0.85 * n) < five_sigma(n, 0.85)
    assert torch.equal(inputs[selected & (inputs != special.mask)], tokens[selected & (inputs != special.mask)])


def test_batches_and_sample_seeds_are_functions_of_the_coordinates(shakespeare) -> None:
    objective = electra(shakespeare.tokenizer)
    w = windows(shakespeare.train, SEQ_LEN, 4, step=3)
    first = objective.make_batch(w, generator(0, "objective", 3, 0, 0))
    again = objective.make_batch(w, generator(0, "objective", 3, 0, 0))
    assert_same_batch(first, again)
    assert first.sample_seed == again.sample_seed
    other = objective.make_batch(w, generator(0, "objective", 3, 1, 0))
    assert other.sample_seed != first.sample_seed


def tiny_model(objective):
    torch.manual_seed(0)
    return objective.build_model(TINY, 256).eval()


def masked_batch(tokens: torch.Tensor, selected: torch.Tensor, mask_id: int, seed: int = 7) -> Batch:
    inputs = torch.where(selected, torch.full_like(tokens, mask_id), tokens)
    labels = torch.where(selected, tokens, torch.full_like(tokens, IGNORE))
    return Batch(input_ids=inputs, labels=labels, attention="bidirectional", sample_seed=seed)


def test_a_sampled_token_equal_to_the_original_is_labelled_original() -> None:
    """The generator may only sample id 50 here: masked positions whose original is 50 get it back and are
    labelled original (0); masked positions holding 60 become 50 and are replaced (1); unmasked ones original."""
    tokenizer = FakeTokenizer(vocab_size=200)
    objective = electra(tokenizer)
    model = tiny_model(objective)
    only = torch.zeros_like(model.samplable)
    only[50] = True
    model.samplable = only
    tokens = torch.tensor([[50, 60, 50, 60, 70, 80, 90, 50]])
    selected = torch.tensor([[True, True, True, True, False, False, False, False]])
    out = model(masked_batch(tokens, selected, tokenizer.special.mask))
    assert out.replaced.tolist() == [False, True, False, True, False, False, False, False]
    _, stats = objective.loss(out, masked_batch(tokens, selected, tokenizer.special.mask))
    assert float(stats["replaced_frac"][0]) == 2 and int(stats["replaced_frac"][1]) == 8


def test_generator_samples_follow_its_softmax_over_ordinary_ids() -> None:
    from lmpt.model.electra import gumbel_sample

    allowed = torch.tensor([False, True, True, True])
    logits = torch.log(torch.tensor([[0.7, 0.1, 0.3, 0.6]])).expand(20000, 4)  # id 0 barred: 1/10, 3/10, 6/10
    draws = gumbel_sample(logits, allowed, seed=5, temperature=1.0)
    assert torch.equal(draws, gumbel_sample(logits, allowed, seed=5, temperature=1.0))
    counts = torch.bincount(draws, minlength=4)
    assert int(counts[0]) == 0
    for token, p in ((1, 0.1), (2, 0.3), (3, 0.6)):
        assert abs(int(counts[token]) - 20000 * p) < five_sigma(20000, p), (token, counts)


def test_reserved_and_padding_rows_are_never_sampled() -> None:
    tokenizer = FakeTokenizer(vocab_size=200)
    samplable = electra(tokenizer).samplable(256)
    assert not bool(samplable[200:].any())
    assert not bool(samplable[list(tokenizer.special.reserved_ids())].any())
    assert int(samplable.sum()) == len(tokenizer.special.ordinary_ids(200))


@pytest.mark.parametrize("disc_weight", [50.0, 3.0])
def test_loss_is_generator_mlm_plus_weighted_discriminator_bce(disc_weight: float, shakespeare) -> None:
    objective = build_objective(ElectraConfig(disc_weight=disc_weight), shakespeare.tokenizer, 64, "auto")
    torch.manual_seed(0)
    model = objective.build_model(TINY, 1024).train()
    batch = objective.make_batch(windows(shakespeare.train, 64, 4, step=0), generator(0, "objective", 0, 0, 0))
    out = model(batch)
    loss, stats = objective.loss(out, batch)
    logits, selected = model.generator_logits(batch)
    gen = torch.nn.functional.cross_entropy(logits, batch.labels[selected])
    real = batch.input_ids != shakespeare.tokenizer.special.pad
    assert out.disc_loss.numel() == int(real.sum())
    disc = out.disc_loss.mean()
    torch.testing.assert_close(loss, gen + disc_weight * disc)
    torch.testing.assert_close(stats["gen_loss"][0] / stats["gen_loss"][1], gen)
    torch.testing.assert_close(stats["disc_loss"][0] / stats["disc_loss"][1], disc)
    assert 0 < float(stats["replaced_frac"][0]) <= int(selected.sum())
    assert float(stats["disc_acc"][0]) <= int(real.sum())


def test_generator_width_beyond_the_discriminator_is_refused() -> None:
    tokenizer = FakeTokenizer()
    with pytest.raises(LmptError, match=r"objective.generator_size=1.5 makes the generator wider"):
        electra(tokenizer, generator_size=1.5)
    for size in (0.0, -0.25):
        with pytest.raises(LmptError, match=r"objective.generator_size=.* must be positive"):
            electra(tokenizer, generator_size=size)
    with pytest.raises(LmptError, match=r"objective.disc_weight"):
        electra(tokenizer, disc_weight=-1.0)
    with pytest.raises(LmptError, match=r"objective.temperature"):
        electra(tokenizer, temperature=0.0)
    with pytest.raises(LmptError, match="cannot train a decoder"):
        build_objective(ElectraConfig(), tokenizer, SEQ_LEN, "decoder")
    assert electra(tokenizer, generator_size=1.0).generator_size == 1.0
