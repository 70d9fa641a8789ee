"""Training on parquet, jsonl.zst, a Hugging Face save_to_disk directory and txt.gz is training on the same text
as .txt: the same losses, step for step (tokens equal per format: tests/data/readers/test_formats.py)."""

from __future__ import annotations

from pathlib import Path

from corpus_files import lines, paragraphs, write_format
from golden import BASE, describe, run
from runner import train_losses, val_losses

FORMATS = ("parquet", "jsonl.zst", "hf", "txt.gz")
STEPS = ["trainer.max_steps=4", "trainer.ckpt_every=0", "trainer.eval_every=0", "data.documents=line"]


def test_training_on_every_format_matches_training_on_txt(tmp_path: Path) -> None:
    texts = paragraphs()
    parts = [texts[i :: len(FORMATS)] for i in range(len(FORMATS))]
    formats = [
        write_format(tmp_path / "formats", f"part{i}", fmt, part)
        for i, (fmt, part) in enumerate(zip(FORMATS, parts, strict=True))
    ]
    plain = []
    for i, part in enumerate(parts):
        plain.append(tmp_path / "plain" / f"part{i}.txt")
        plain[-1].parent.mkdir(exist_ok=True)
        plain[-1].write_bytes(lines(part))
    runs = {}
    for name, paths in (("formats", formats), ("plain", plain)):
        data = "data.paths=[" + ",".join(str(p) for p in paths) + "]"
        result = run(tmp_path / f"run-{name}", [*BASE, *STEPS, data])
        assert result.returncode == 0, describe(result)
        runs[name] = tmp_path / f"run-{name}"
    assert len(train_losses(runs["formats"])) == 4
    assert train_losses(runs["formats"]) == train_losses(runs["plain"])
    assert val_losses(runs["formats"]) == val_losses(runs["plain"])
