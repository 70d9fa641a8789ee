"""A run says when its held-out loss calls for it (issue 63, point 17): worse than a uniform guess over the
vocabulary, or rising while training loss falls (a small text memorised), each once."""

from __future__ import annotations

import math
from pathlib import Path

from runner import run_lmpt

from lmpt.train.evaluation import HeldOutWatch

REPO = Path(__file__).resolve().parents[2]


def test_each_warning_is_said_once_when_its_figures_show_it() -> None:
    watch = HeldOutWatch(vocab_size=400, epochs_per_step=0.5)
    assert watch.consider(10, 3.0, 4.0) == []
    assert watch.consider(20, 2.5, 3.0) == []  # both falling: learning
    assert watch.consider(30, 2.55, 2.8) == []  # within the noise of its best
    rising = watch.consider(40, 2.9, 2.0)
    assert len(rising) == 1 and "rose from 2.500 at step 20 to 2.900 at step 40" in rising[0]
    assert "training loss fell from 3.000 to 2.000" in rising[0] and "seen its text 20 times" in rising[0]
    assert watch.consider(50, 3.5, 1.5) == []  # said once
    worse = watch.consider(60, math.log(400) + 0.1, 1.0)
    assert len(worse) == 1 and "worse than a uniform guess over the 400 pieces (5.991)" in worse[0]
    assert watch.consider(70, 9.0, 0.5) == [] and watch.consider(80, None, 0.5) == []


def test_held_out_rising_while_training_falls_is_not_said_when_training_rises_too() -> None:
    watch = HeldOutWatch(vocab_size=400)
    watch.consider(10, 2.0, 2.0)
    assert watch.consider(20, 2.5, 2.5) == []  # both rising: a bad step or schedule, not memorising


def test_a_run_on_six_paragraphs_says_it_memorises_them(tmp_path: Path) -> None:
    stories = (REPO / "lmpt" / "corpora" / "tinystories-prefix.txt").read_text(encoding="utf-8").split("\n\n")
    (tmp_path / "six.txt").write_text("\n\n".join(stories[:6]), encoding="utf-8")
    keys = ["data=text", "data.paths=[six.txt]", "data.val_fraction=0.3", "tokenizer.vocab_size=400"]
    keys += ["data.seq_len=32", "trainer.batch_size=8", "trainer.max_steps=150", "trainer.eval_every=25"]
    done = run_lmpt(*keys, "trainer.progress=plain", "trainer.sample_tokens=0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if "held-out loss rose from" in line]
    assert len(said) == 1 and "the model memorises its training text" in said[0], done.stdout[-2000:]
