"""Preview examples: real windows through the configured objective, laid out per example.

One generic reading of a Batch row serves every objective: trailing padding dropped, loss positions where
labels are set, and corruption read off the input (mlm/nsp: the selected positions; span/ul2: sentinels)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import DataConfig, TokenizerConfig, settings
from lmpt.config.validate import validate_config
from lmpt.data.cache import default_cache_root, prepare_corpora
from lmpt.data.corpus import TokenCorpus
from lmpt.data.sampler import StepLayout, Windows, gather_windows
from lmpt.data.sampling import training_sampler
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.objectives.checks import split_text
from lmpt.objectives.registry import build_objective, preflight_objective
from lmpt.preview.config import check_preview_config
from lmpt.rng import generator
from lmpt.tokenizer.base import Tokenizer


@dataclass
class PreviewExample:
    """One example as the model sees it. Positions in `labels`, `loss_positions` index the decoder input
    for an encoder-decoder and `input_ids` otherwise; `corrupted_positions` always index `input_ids`."""

    offset: int
    """Corpus offset of the example's window in its split."""
    original_ids: list[int]
    original_text: str
    input_ids: list[int]
    input_pieces: list[str]
    labels: list[int]
    decoder_input_ids: list[int] | None
    target_ids: list[int]
    """The loss-bearing labels in order: what the model must predict."""
    corrupted_positions: list[int]
    corruption: list[str]
    """Per corrupted position: mask, random or kept (mlm/nsp); sentinel (span/ul2)."""
    loss_positions: list[int]
    prefix_len: int | None
    segment_ids: list[int] | None
    sequence_label: int | None
    denoiser: str | None
    source: str | None = None
    """The mixture source the window was drawn from (null when the run has one source)."""
    aligned: bool = False
    """Each label sits at the position whose token it restores (mlm); false: labels follow their positions."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Preview:
    objective: Objective
    tokenizer: Tokenizer
    split: str
    step: int
    seed: int
    examples: list[PreviewExample]

    def to_json(self) -> dict[str, Any]:
        return {
            "objective": self.objective.name,
            "arch": self.objective.arch,
            "attention": self.objective.describe_attention(),
            "settings": OmegaConf.to_container(self.objective.cfg, resolve=True),
            "split": self.split,
            "step": self.step,
            "seed": self.seed,
            "examples": [e.to_json() for e in self.examples],
        }


def build_preview(cfg: DictConfig) -> Preview:
    """Prepare the configured data and objective exactly as `lmpt` does, then make the preview's examples."""
    options = cfg.preview
    check_preview_config(options)
    validate_config(cfg)
    preflight_objective(cfg.objective, cfg.tokenizer, cfg.data.seq_len, cfg.model.arch)
    data_cfg, tokenizer_cfg = settings(cfg.data, DataConfig), settings(cfg.tokenizer, TokenizerConfig)
    data = prepare_corpora(data_cfg, tokenizer_cfg, Path.cwd(), default_cache_root(cfg.data.cache_dir))
    objective = build_objective(cfg.objective, data.tokenizer, cfg.data.seq_len, cfg.model.arch)
    seed = int(cfg.trainer.seed)
    corpus = data.val if options.split == "val" else data.train
    objective.check_corpus(corpus, split_text(data_cfg, options.split))
    if options.split == "train":  # the windows training step `step` draws (batch size n), mixture included
        sampler = training_sampler(data, objective.window_length, StepLayout(options.examples), seed)
        windows = sampler.windows(options.step)
    else:
        windows = preview_windows(corpus, objective.window_length, options.examples)
    objective.plan_run(int(cfg.trainer.max_steps))  # schedules and switches shown as a run of max_steps has them
    batch = objective.batch_at(windows, generator(seed, "objective", options.step, 0, 0), options.step)
    examples = [
        replace(read_example(objective, batch, windows, i), source=data.source_at(options.split, int(start)) or None)
        for i, start in enumerate(windows.starts.tolist())
    ]
    return Preview(objective, data.tokenizer, options.split, options.step, seed, examples)


def preview_windows(corpus: TokenCorpus, window_length: int, n: int) -> Windows:
    """n validation windows starting at documents evenly spread over the held-out text; they depend on
    neither the objective nor the step, so every objective is shown the same text."""
    if corpus.n_tokens < window_length:
        raise LmptError(
            f"the val text has {corpus.n_tokens} tokens, fewer than one window of {window_length}: "
            "add text or lower data.seq_len"
        )
    firsts = [corpus.doc_span(corpus.doc_of(k * corpus.n_tokens // n))[0] for k in range(n)]
    starts = np.minimum(np.asarray(firsts, dtype=np.int64), corpus.n_tokens - window_length)
    return gather_windows(corpus, starts, window_length)


def _used_length(row: torch.Tensor, pad: int) -> int:
    """Length of `row` without its trailing padding."""
    used = (row != pad).nonzero()
    return int(used[-1]) + 1 if used.numel() else 0


def read_example(objective: Objective, batch: Batch, windows: Windows, i: int) -> PreviewExample:
    """Row i of `batch`, with what it was made from."""
    tokenizer, special = objective.tokenizer, objective.special
    batch, aligned = objective.preview_view(batch)
    n = _used_length(batch.input_ids[i], special.pad)
    input_ids = batch.input_ids[i, :n]
    if batch.decoder_input_ids is not None:
        m = int((batch.labels[i] != IGNORE).sum())  # targets are left-aligned, IGNORE after
        labels, decoder_input_ids = batch.labels[i, :m], batch.decoder_input_ids[i, :m].tolist()
    else:
        labels, decoder_input_ids = batch.labels[i, :n], None
    loss_positions = (labels != IGNORE).nonzero().flatten().tolist()

    denoiser = None
    window = windows.tokens[i]
    if batch.example_kinds is not None:
        chosen = objective.denoisers[int(batch.example_kinds[i])]  # type: ignore[attr-defined]
        denoiser, window = chosen.label, window[: chosen.raw_length]
    if aligned:  # mlm/nsp: labels hold the original token at each selected position
        original = torch.where(labels != IGNORE, labels, input_ids)
        corrupted = loss_positions
        corruption = [_replacement(int(input_ids[p]), int(original[p]), special.mask) for p in corrupted]
    else:
        original = window
        is_sentinel = torch.isin(input_ids, special.sentinel_table())
        if batch.prefix_len is not None:  # a decoder's targets follow the prefix: their sentinels are targets
            is_sentinel[int(batch.prefix_len[i]) :] = False
        corrupted = is_sentinel.nonzero().flatten().tolist()
        corruption = ["sentinel"] * len(corrupted)

    original_ids = original.tolist()
    ids = input_ids.tolist()
    return PreviewExample(
        offset=int(windows.starts[i]),
        original_ids=original_ids,
        original_text=tokenizer.decode(original_ids),
        input_ids=ids,
        input_pieces=[tokenizer.id_to_piece(t) for t in ids],
        labels=labels.tolist(),
        decoder_input_ids=decoder_input_ids,
        target_ids=labels[loss_positions].tolist(),
        corrupted_positions=corrupted,
        corruption=corruption,
        loss_positions=loss_positions,
        prefix_len=int(batch.prefix_len[i]) if batch.prefix_len is not None else None,
        segment_ids=batch.segment_ids[i, :n].tolist() if batch.segment_ids is not None else None,
        sequence_label=int(batch.sequence_labels[i]) if batch.sequence_labels is not None else None,
        denoiser=denoiser,
        aligned=aligned,
    )


def _replacement(shown: int, original: int, mask: int) -> str:
    """What BERT's corruption did to a selected token."""
    if shown == mask:
        return "mask"
    return "kept" if shown == original else "random"
