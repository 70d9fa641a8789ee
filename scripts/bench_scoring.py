"""Zero-shot scoring time of a decoder against an encoder of the same size (issue 31: an encoder's PLL scoring within
3x of a decoder's on the cloze task), both built in this process with random weights (the weights do not change the
time) on a tokenizer trained on the bundled Tiny Shakespeare:

- bundled:shakespeare-cloze by lmpt.downstream.multiple_choice (encoders: one text's masked copies at a time), and
  the same texts' PLL batched across texts (lmpt.inference.sentence_pll), what minimal pairs use;
- bundled:blimp-fast by lmpt.downstream.minimal_pairs (encoders batched across sentences).

Each figure is the median wall time over --repeats; the ratio is encoder / decoder on the same task. The machine is
taken as it is (threads: torch's setting, or --threads).

    python scripts/bench_scoring.py --model tiny --batch-size 64 --json bench_scoring.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
from lmpt.config.schema import DataConfig, ModelConfig, TokenizerConfig  # noqa: E402
from lmpt.data.cache import prepare_corpora  # noqa: E402
from lmpt.downstream.choice_tasks import read_choice_task  # noqa: E402
from lmpt.downstream.minimal_pairs import evaluate_pairs  # noqa: E402
from lmpt.downstream.multiple_choice import DELIMITER, evaluate_choices  # noqa: E402
from lmpt.downstream.pair_tasks import read_pairs  # noqa: E402
from lmpt.inference.progress import WorkBar  # noqa: E402
from lmpt.inference.sentence_pll import framed_ids, text_plls  # noqa: E402
from lmpt.model import build_model  # noqa: E402
from lmpt.rundir.trained import Trained  # noqa: E402


def build(model: str, arch: str, objective: str, tokenizer, device: str) -> Trained:
    """A randomly initialised model of preset `model` (conf/model/NAME.yaml) as a Trained run."""
    preset = OmegaConf.load(REPO / "conf" / "model" / f"{model}.yaml")
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), {k: v for k, v in preset.items() if k != "defaults"})
    torch.manual_seed(0)
    network = build_model(cfg, arch, tokenizer.vocab_size, tokenizer.special.pad).to(device).eval()
    return Trained(network, tokenizer, OmegaConf.create({}), arch, objective, Path("in-process"))


def timed(work: Callable[[], object], repeats: int) -> float:
    """Median seconds of `work` over `repeats` calls."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def batched_cloze(trained: Trained, texts: list[str], batch_size: int) -> None:
    """The cloze texts' PLL batched across texts (what an encoder's multiple choice could do)."""
    device = trained.model.head_weight.device
    with torch.inference_mode(), WorkBar("", hidden=True) as bar:
        text_plls(trained, [framed_ids(trained, t) for t in texts], batch_size, device, bar)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a preset of conf/model/")
    parser.add_argument("--batch-size", type=int, default=64, help="rows (choices, or masked copies) per pass")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N questions / pairs")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("LMPT_CACHE_DIR", str(Path(tmp) / "cache"))
        data = DataConfig(paths=["bundled:tinyshakespeare.txt"])
        tokenizer = prepare_corpora(data, TokenizerConfig(), REPO, Path(os.environ["LMPT_CACHE_DIR"])).tokenizer
    questions = read_choice_task("bundled:shakespeare-cloze")[: args.limit]
    pairs = read_pairs("bundled:blimp-fast")[: args.limit]
    cloze_texts = [q.context.rstrip() + DELIMITER + c for q in questions for c in q.choices]
    models = {"decoder": build(args.model, "decoder", "clm", tokenizer, args.device),
              "encoder": build(args.model, "encoder", "mlm", tokenizer, args.device)}  # fmt: skip
    b = args.batch_size
    tasks: dict[str, Callable[[Trained], Callable[[], object]]] = {
        "shakespeare-cloze (multiple_choice)": lambda t: lambda: evaluate_choices(t, questions, b, True),
        "shakespeare-cloze (PLL batched across texts)": lambda t: lambda: batched_cloze(t, cloze_texts, b),
        "blimp-fast (minimal_pairs)": lambda t: lambda: evaluate_pairs(t, pairs, b, True),
    }
    rows = []
    for task, work in tasks.items():
        seconds = {arch: timed(work(trained), args.repeats) for arch, trained in models.items() if
                   arch == "encoder" or "batched" not in task}  # fmt: skip
        rows.append({"task": task, **{f"{arch}_s": s for arch, s in seconds.items()}})
    decoder_cloze = rows[0]["decoder_s"]
    for row in rows:
        row["decoder_s"] = row.get("decoder_s", decoder_cloze)  # the batched PLL is set against the cloze decoder
        row["encoder_over_decoder"] = row["encoder_s"] / row["decoder_s"]
    record = {"model": args.model, "batch_size": b, "limit": args.limit, "questions": len(questions),
              "pairs": len(pairs), "threads": torch.get_num_threads(), "device": args.device,
              "cpu": platform.processor() or platform.machine(), "torch": torch.__version__, "rows": rows}  # fmt: skip
    table = Table(title=f"zero-shot scoring, {args.model} models, batch {b}, {record['threads']} thread(s)")
    for column in ("task", "decoder s", "encoder s", "encoder / decoder"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for row in rows:
        table.add_row(row["task"], f"{row['decoder_s']:.2f}", f"{row['encoder_s']:.2f}",
                      f"{row['encoder_over_decoder']:.1f}x")  # fmt: skip
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
