"""The values a config key may take where the choice is a fixed list: one place, read by the config's checks
and by the layers that act on the value."""

from __future__ import annotations

ARCHITECTURES = ("decoder", "encoder", "encoder-decoder")
"""model.arch: the three stacks one Block assembles into (auto: the objective's own)."""
ARCHS = ("auto", *ARCHITECTURES)
PRECISIONS = (None, "fp32", "bf16", "fp16")
PROGRESS = ("auto", "rich", "plain", "tqdm")
SCHEDULES = ("cosine", "linear", "constant", "inverse_sqrt", "wsd")
TOKENIZER_BACKENDS = ("sentencepiece", "bytelevel", "hf")
DOCUMENT_MODES = ("auto", "blank_line", "wikitext", "line", "file")
"""data.documents: how text splits into documents."""
FLAVOURS = ("llama", "t5")
"""model.flavour: Llama-style blocks, or T5 v1.1's (encoder-decoder only)."""
FINETUNE_MODES = ("full", "probe")
"""downstream.mode and lmpt-finetune's mode: every weight trained, or a linear probe on frozen features."""
DOWNSTREAM_WEIGHTS = ("last", "best")
"""downstream.weights: the final model, or RUN/best (the lowest val_loss)."""
CONTROLS = ("scratch", "none")
"""downstream.control, lmpt-finetune's and lmpt-eval's control: scratch (the run's architecture freshly initialised is
fine-tuned or scored beside the run's model, the same way) or none."""
