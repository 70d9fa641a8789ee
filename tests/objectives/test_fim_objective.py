"""fim (Bavarian et al. 2022): documents rearranged PSM or SPM at the configured rates, split at uniformly drawn
character positions; taking the sentinels out and putting the parts back rebuilds each document exactly."""

from __future__ import annotations

import pytest
import torch
from hf_files import wordpiece
from objective_helpers import FakeTokenizer, assert_same_batch, batches, five_sigma

from lmpt.batch import IGNORE
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.fim import FimConfig, split_documents
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator
from lmpt.tokenizer.load import load_tokenizer

SEQ_LEN = 128


def restore(document: list[int], sentinels: tuple[int, int, int]) -> tuple[list[int], str]:
    """(the original document, "psm" | "spm") of a rearranged one: sentinels out, parts back in order."""
    pre, suf, mid = sentinels
    assert document[0] == pre and document.count(suf) == 1 and document.count(mid) == 1
    if document[1] == suf:  # SPM: <PRE> <SUF> suffix <MID> prefix middle (PSM with an empty prefix reads the same)
        cut = document.index(mid)
        return document[cut + 1 :] + document[2:cut], "spm"
    s, m = document.index(suf), document.index(mid)
    return document[1:s] + document[m + 1 :] + document[s + 1 : m], "psm"


def documents_of(fim, corpus, n_steps: int, batch_size: int = 16):
    """(original, shown) token lists of every document an eos ends inside both the window and its batch row."""
    eos = fim.special.eos
    for w, batch in batches(fim, corpus, batch_size, n_steps):
        rows = torch.cat([batch.input_ids, batch.labels[:, -1:]], dim=1)
        for original, shown in zip(w.tokens.tolist(), rows.tolist(), strict=True):
            theirs = [d for d, ended in split_documents(shown, eos) if ended]
            ours = [d for d, ended in split_documents(original, eos) if ended][: len(theirs)]
            yield from zip(ours, theirs, strict=True)


def test_sentinels_removed_and_parts_put_back_rebuild_each_document(shakespeare) -> None:
    fim = build_objective(FimConfig(fim_rate=1.0), shakespeare.tokenizer, SEQ_LEN, "auto")
    modes = []
    for original, shown in documents_of(fim, shakespeare.train, n_steps=4):
        if original:
            rebuilt, mode = restore(shown, fim.sentinels)
            assert rebuilt == original
            modes.append(mode)
    assert len(modes) > 50 and {"psm", "spm"} <= set(modes)


def test_rates_of_fim_and_of_spm_among_it() -> None:
    """Rows of whole documents that still fit once rearranged (no truncation), 30 one-character tokens each."""
    fim = build_objective(FimConfig(fim_rate=0.3, spm_rate=0.7), FakeTokenizer(), SEQ_LEN, "auto")
    fim._piece_bytes = torch.ones(200, dtype=torch.long)
    document = list(range(20, 50))
    row = ([*document, 3] * 3 + [0] * SEQ_LEN)[: SEQ_LEN + 1]
    windows = Windows(torch.tensor([row] * 50), torch.zeros(50, dtype=torch.long), None)
    counts = {"plain": 0, "psm": 0, "spm": 0}
    for step in range(20):
        batch = fim.make_batch(windows, generator(0, "objective", step))
        for shown in torch.cat([batch.input_ids, batch.labels[:, -1:]], dim=1).tolist():
            for part, ended in split_documents(shown[: shown.index(0)], 3):
                assert ended
                mode = "plain" if part == document else restore(part, fim.sentinels)[1]
                assert mode == "plain" or restore(part, fim.sentinels)[0] == document
                counts[mode] += 1
    n, rearranged = sum(counts.values()), counts["psm"] + counts["spm"]
    assert n == 20 * 50 * 3
    assert abs(rearranged - 0.3 * n) < five_sigma(n, 0.3)
    # PSM with an empty prefix reads as SPM: the lower split falls in the first character, 1 - (30/31)^2 of them
    looks_spm = 0.7 + 0.3 * (1 - (30 / 31) ** 2)
    assert abs(counts["spm"] - looks_spm * rearranged) < five_sigma(rearranged, looks_spm)


def test_split_points_are_uniform_over_characters_moved_back_to_a_token_boundary(shakespeare) -> None:
    tok = shakespeare.tokenizer
    fim = build_objective(FimConfig(), tok, SEQ_LEN, "auto")
    short, long = tok.encode("a")[-1], max(tok.encode("Citizen"), key=lambda i: len(tok.id_to_piece(i)))
    a, b = tok.piece_byte_count(tok.id_to_piece(short)), tok.piece_byte_count(tok.id_to_piece(long))
    assert b > a  # characters 0..a+b: 0..a-1 -> boundary 0, a..a+b-1 -> 1, a+b -> 2
    gen, draws = generator(7), 4000
    counts = torch.zeros(3)
    for _ in range(draws // 2):
        for point in fim.split_points([short, long], gen):
            counts[point] += 1
    for boundary, share in enumerate([a / (a + b + 1), b / (a + b + 1), 1 / (a + b + 1)]):
        assert abs(counts[boundary] - share * draws) < five_sigma(draws, share)


def test_loss_on_every_token_and_nothing_rearranged_at_rate_zero(shakespeare) -> None:
    fim = build_objective(FimConfig(fim_rate=0.5), shakespeare.tokenizer, SEQ_LEN, "auto")
    clm = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    never = build_objective(FimConfig(fim_rate=0.0), shakespeare.tokenizer, SEQ_LEN, "auto")
    for w, batch in batches(fim, shakespeare.train, 8, 2):
        assert torch.equal(batch.labels[:, :-1], batch.input_ids[:, 1:]) and (batch.labels != IGNORE).all()
        assert_same_batch(
            fim.make_batch(w, generator(0, "objective", 0)), fim.make_batch(w, generator(0, "objective", 0))
        )
        assert_same_batch(never.make_batch(w, generator(1)), clm.make_batch(w, generator(1)))
    small = build_objective(FimConfig(fim_rate=1.0), FakeTokenizer(), 8, "auto")
    small._piece_bytes = torch.ones(200, dtype=torch.long)  # FakeTokenizer has no pieces: one character each
    padded = Windows(torch.tensor([[20, 3, 0, 0, 0, 0, 0, 0, 0]]), torch.zeros(1, dtype=torch.long), None)
    batch = small.make_batch(padded, generator(3))
    shown = batch.input_ids[0].tolist()
    assert sorted(shown[:4]) == sorted([20, *small.sentinels]) and shown[4] == 3 and shown[5:] == [0, 0, 0]
    assert batch.labels[0].tolist()[4:] == [IGNORE] * 4  # the padding after the document never carries loss


@pytest.mark.parametrize(
    ("settings", "arch", "num_sentinels", "message"),
    [
        ({"fim_rate": 1.5}, "auto", 8, r"objective.fim_rate=1.5 must be in \[0, 1\]"),
        ({"spm_rate": -0.1}, "auto", 8, r"objective.spm_rate=-0.1 must be in \[0, 1\]"),
        ({}, "encoder", 8, "objective fim cannot train an encoder"),
        ({}, "auto", 2, "needs 3 reserved sentinel tokens .* has room for 2"),
    ],
)
def test_bad_settings_are_refused(settings: dict, arch: str, num_sentinels: int, message: str) -> None:
    with pytest.raises(LmptError, match=message):
        build_objective(FimConfig(**settings), FakeTokenizer(num_sentinels=num_sentinels), SEQ_LEN, arch)


def test_a_pretrained_tokenizer_gets_room_for_the_sentinels_or_is_refused(tmp_path) -> None:
    """tokenizer=hf: a file without <extra_id_N> pieces gets tokenizer.num_sentinels of them added; with none added
    (num_sentinels=0) it has no room for the three FIM sentinels, and fim refuses it."""
    path = wordpiece(tmp_path / "wp")
    with_room = load_tokenizer(path, "tokenizer.path", num_sentinels=3)
    fim = build_objective(FimConfig(), with_room, SEQ_LEN, "auto")
    assert fim.sentinels == tuple(with_room.piece_to_id(f"<extra_id_{i}>") for i in range(3))
    with pytest.raises(LmptError, match="has room for 0: set tokenizer.num_sentinels=3 or more"):
        build_objective(FimConfig(), load_tokenizer(path, "tokenizer.path", num_sentinels=0), SEQ_LEN, "auto")


def test_a_pretrained_tokenizers_own_fim_tokens_are_the_sentinels(tmp_path) -> None:
    path = wordpiece(tmp_path / "wp", extra_special=("<fim_prefix>", "<fim_suffix>", "<fim_middle>"))
    tok = load_tokenizer(path, "tokenizer.path", num_sentinels=0)
    fim = build_objective(FimConfig(), tok, SEQ_LEN, "auto")
    assert fim.sentinels == tuple(tok.piece_to_id(p) for p in ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"))
    assert set(fim.sentinels) <= set(tok.special.reserved_ids()) and "its own <fim_prefix>" in fim.describe_attention()
