"""The mask builders against hand-written expectations."""

import torch

from lmpt.model.attention import (
    allow_self,
    causal_mask,
    combine_masks,
    document_mask,
    key_padding_mask,
    prefix_mask,
)


def test_causal_mask_is_lower_triangular() -> None:
    m = causal_mask(3)
    assert m.shape == (1, 1, 3, 3)
    assert m[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_prefix_mask_bidirectional_over_prefix_causal_after() -> None:
    m = prefix_mask(torch.tensor([2, 0]), 4)
    assert m.shape == (2, 1, 4, 4)
    assert m[0, 0].tolist() == [
        [True, True, False, False],
        [True, True, False, False],
        [True, True, True, False],
        [True, True, True, True],
    ]
    assert torch.equal(m[1, 0], causal_mask(4)[0, 0])


def test_document_mask_is_causal_within_documents() -> None:
    m = document_mask(torch.tensor([[0, 0, 1, 1]]))
    assert m[0, 0].tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [False, False, True, False],
        [False, False, True, True],
    ]


def test_key_padding_and_combine() -> None:
    pad = key_padding_mask(torch.tensor([[5, 6, 0]]), pad_id=0)
    assert pad.shape == (1, 1, 1, 3)
    both = combine_masks(causal_mask(3), None, pad)
    assert both is not None
    assert both[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert combine_masks(None, None) is None


def test_allow_self_only_fills_the_diagonal() -> None:
    m = allow_self(torch.zeros(1, 1, 3, 3, dtype=torch.bool))
    assert torch.equal(m[0, 0], torch.eye(3, dtype=torch.bool))
