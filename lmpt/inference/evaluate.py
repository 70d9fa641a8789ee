"""Loss, perplexity and bits per byte of a trained model on any text (`lmpt-eval RUN data=PATH`; the command is
lmpt.downstream.eval_cli), scored as lmpt.inference.scoring describes, with a progress bar over the windows on a
terminal. The text is read and tokenised as training reads it: documents split by `documents`, each document's
sentences encoded and followed by eos."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.table import Table

from lmpt.config.command_options import require
from lmpt.config.schema import ChoicePll, Control
from lmpt.console import print_whole
from lmpt.data.sources import iter_documents, resolve_paths
from lmpt.errors import LmptError
from lmpt.inference.pll import score_pll
from lmpt.inference.progress import WorkBar
from lmpt.inference.scoring import Text
from lmpt.objectives.measure import TextOptions
from lmpt.objectives.registry import build_objective
from lmpt.objectives.yardstick import perplexity
from lmpt.rundir.trained import RUN_ARGUMENT, Trained
from lmpt.tokenizer.base import Tokenizer
from lmpt.train.metrics import bits_per_byte

PROG = "lmpt-eval"
SUMMARY = (
    "Loss (nats per scored token), perplexity = exp(loss) and bits per byte of a trained model on any text: "
    "decoders by sliding windows, encoders by a fixed seeded masking (or method=pll: pseudo-log-likelihood, each "
    "token scored with only itself masked), encoder-decoders by the run's seeded span corruption. task=FILE.jsonl "
    "instead scores a multiple-choice task (accuracy, byte-normalised accuracy, chance) or minimal pairs (accuracy "
    "overall, per field and paradigm and on equal-length pairs, with 95% intervals) zero-shot."
)
POSITIONALS = [RUN_ARGUMENT]


@dataclass
class EvalOptions:
    data: list[str] | None = None
    """Text to evaluate: files, directories, globs or bundled:NAME, comma-separated (like data.paths)."""
    held_out: bool = False
    """Instead of data: the run's own held-out windows, batched and drawn as its validation made them, measured as
    its objective measures them: the figures the run logged at its last evaluation (val_loss, val_bits_per_token,
    fim's val_fim_*, ...), here in fp32 with the final weights, on the run's own text (its data paths read where the
    run started them, from any folder; text changed since RUN/text.json recorded it is refused)."""
    allow_changed_text: bool = False
    """held_out=true: measure the run's data paths' text even where it differs from the text the run recorded (another
    file, one appended to), with a warning; false: refuse."""
    task: str | None = None
    """Instead of data: a task scored zero-shot, a .jsonl file of multiple-choice {"context", "choices", "label"} or
    minimal-pair {"sentence_good", "sentence_bad"} records, or bundled:NAME (e.g. blimp-fast; docs/tasks.md)."""
    method: str = "auto"
    """auto (the architecture's own measure) or pll (encoders: pseudo-log-likelihood, every token scored with only
    itself masked; reports pseudo-perplexity)."""
    seq_len: int | None = None
    """Window length in tokens; null = the run's data.seq_len."""
    stride: int | None = None
    """Decoders: tokens each window advances and scores; null = seq_len // 2 (1 = most context, slowest)."""
    batch_size: int = 8
    """Windows per forward pass."""
    seed: int = 0
    """Seed of the masking / span corruption of encoders and encoder-decoders."""
    documents: str | None = None
    """How the text splits into documents (auto, blank_line, wikitext, line, file, stories); null = the run's
    setting."""
    text_field: str | None = None
    """Field holding the text in .jsonl records; null = the run's setting."""
    device: str = "cpu"
    """cpu, cuda or auto."""
    json: bool = False
    """Print one JSON object instead of a table."""
    within_word: bool = False
    """Minimal pairs on an encoder: when a token is scored, also mask the rest of its word (PLL-word-l2r)."""
    control: Control = Control.none
    """task= only: scratch also scores the task on the run's architecture freshly initialised (seeded as the run was),
    the same way, and reports the gain over that untrained control with its paired 95% interval (twice the
    scoring); none: the run's model alone."""
    choice_pll: ChoicePll = ChoicePll.conditional
    """Multiple choice on an encoder: conditional (mask only the choice's tokens, one at a time, the context read
    whole: log P(choice | context), as decoders are scored) or whole (every token of context + choice: the filled
    text's pseudo-log-likelihood, about 18x the work on the bundled cloze task)."""


def read_text(patterns: list[str], documents: str, text_field: str, tokenizer: Tokenizer) -> Text:
    """The text of `patterns` as training would tokenise it."""
    files = resolve_paths(patterns, Path.cwd())
    ids: list[int] = []
    n_bytes = n_docs = 0
    for doc in iter_documents(files, documents, text_field):
        for sentence in tokenizer.encode_batch(doc):
            ids.extend(sentence)
        ids.append(tokenizer.special.eos)
        n_bytes += sum(len(s.encode("utf-8")) for s in doc)
        n_docs += 1
    if not ids:
        raise LmptError(f"data={','.join(patterns)} holds no text to evaluate")
    return Text(ids, n_bytes, n_docs)


def evaluate_text(trained: Trained, o: EvalOptions) -> dict:
    """The numbers lmpt-eval prints, as a dict: the text scored as the run's objective measures held-out text
    (Objective.measure: sliding windows for a decoder's likelihood, the diffusion bound for mdlm, ...)."""
    cfg = trained.config
    seq_len = o.seq_len if o.seq_len is not None else int(cfg.data.seq_len)
    require(2 <= seq_len <= trained.model.max_seq_len, f"seq_len={seq_len} must be in [2, {trained.model.max_seq_len}]")
    stride = o.stride if o.stride is not None else max(1, seq_len // 2)
    require(1 <= stride <= seq_len, f"stride={stride} must be in [1, seq_len={seq_len}]")
    require(o.batch_size >= 1, f"batch_size={o.batch_size} must be at least 1")
    require(o.method in ("auto", "pll"), f"method={o.method} is unknown: use auto or pll")
    objective = build_objective(cfg.objective, trained.tokenizer, seq_len, trained.arch)
    measure = objective.measure
    require(
        o.method != "pll" or measure.pseudo_likelihood,
        f"method=pll scores encoders trained to fill masks (mlm, nsp, clm-then-mlm) and {objective.name} is measured "
        f"otherwise ({measure.kind}): leave method=auto",
    )
    require(
        objective.target_length <= trained.model.max_seq_len,
        f"seq_len={seq_len} makes targets of {objective.target_length} tokens, beyond the model's max_seq_len",
    )
    documents = o.documents or str(cfg.data.documents)
    text_field = o.text_field or str(cfg.data.text_field)
    text = read_text(o.data or [], documents, text_field, trained.tokenizer)
    device = trained.model.head_weight.device
    options = TextOptions(seq_len, stride, o.batch_size, o.seed, device)
    with torch.inference_mode(), WorkBar("scoring windows", hidden=o.json) as bar:
        if o.method == "pll":
            score = score_pll(trained, text, seq_len, o.batch_size, device, bar)
            method = f"pseudo-log-likelihood (each token masked alone), seq_len {seq_len}"
        else:
            score = measure.score_text(trained.model, text.tokens, options, bar)
            method = measure.describe(options)
    loss = score.nats / max(score.tokens, 1)
    n_bytes = score.bytes or text.bytes  # a measure that scores every token counts the text's own bytes
    likelihood = measure.likelihood if o.method == "auto" else None
    return {
        "arch": trained.arch,
        "objective": trained.objective_name,
        "method": method,
        "documents": text.documents,
        "text_tokens": len(text.tokens),
        "text_bytes": text.bytes,
        "scored_tokens": score.tokens,
        "scored_bytes": n_bytes,
        "windows": score.windows,
        "nats": score.nats,
        "loss": loss,
        "perplexity": perplexity(loss),
        "accuracy": score.accuracy if score.accuracy is not None else score.correct / max(score.tokens, 1),
        "bits_per_byte": bits_per_byte(score.nats, n_bytes),
        **({"pseudo_perplexity": math.exp(loss)} if o.method == "pll" else {}),
        **(
            {"likelihood": likelihood, "bits_per_token": loss / math.log(2), "bits_per_token_stderr": score.stderr_bits}
            if likelihood
            else {}
        ),
    }


def evaluate_held_out(trained: Trained, allow_changed_text: bool = False) -> dict:
    """The run's own validation figures recomputed from its final weights: its held-out windows (the run's data,
    tokenizer, trainer.batch_size x trainer.eval_batches, seed) through its objective's measure, as training's
    evaluation computes them (lmpt.train.evaluation), in fp32 on one process. The data is the run's own text
    (lmpt.rundir.text.recorded_text): changed text is refused unless `allow_changed_text`."""
    from omegaconf import OmegaConf

    from lmpt.config.schema import DataConfig, TokenizerConfig, settings
    from lmpt.data.cache import default_cache_root, prepare_corpora
    from lmpt.data.sampling import hold_unique_tokens, validation_sets
    from lmpt.rundir.text import recorded_text
    from lmpt.train.batches import validation_batches, yardstick_batches
    from lmpt.train.distributed import Distributed
    from lmpt.train.evaluation import Evaluator
    from lmpt.train.metrics import held_out_sizes, with_bits_per_byte
    from lmpt.train.precision import Precision

    cfg = trained.config
    data_cfg = settings(OmegaConf.merge(OmegaConf.structured(DataConfig), cfg.data), DataConfig)
    launch_dir = Path.cwd()
    if trained.run_dir is not None:
        reading = recorded_text(trained.run_dir, data_cfg, allow_changed_text, "allow_changed_text=true")
        reading.tell()
        launch_dir = reading.text.launch_dir
    data = prepare_corpora(
        data_cfg,
        settings(OmegaConf.merge(OmegaConf.structured(TokenizerConfig), cfg.tokenizer), TokenizerConfig),
        launch_dir,
        default_cache_root(cfg.data.get("cache_dir")),
        tokenizer=trained.tokenizer,
    )
    data = hold_unique_tokens(data, cfg.data.get("unique_tokens"))
    objective = build_objective(cfg.objective, trained.tokenizer, int(cfg.data.seq_len), trained.arch)
    n_batches = int(cfg.trainer.eval_batches)
    sets = validation_sets(data, objective.window_length, int(cfg.trainer.batch_size), n_batches)
    model = objective.inference_predictor(trained.model)
    device = model.head_weight.device
    evaluate = Evaluator(model, model, objective, Precision("fp32", device), Distributed())
    batches = validation_batches(sets, objective, int(cfg.trainer.seed), n_batches)
    with torch.no_grad():
        figures = evaluate(batches, yardstick_batches(sets, objective, n_batches))
    sizes = held_out_sizes(batches, trained.tokenizer.piece_bytes(), objective.scored_tokens)
    figures = with_bits_per_byte(figures, sizes, objective.measure)  # val_bpb, as training logs it
    return {"arch": trained.arch, "objective": trained.objective_name, "held_out_windows": n_batches, **figures}


def render(result: dict) -> None:
    table = Table(title=f"lmpt-eval: {result['objective']} {result['arch']}", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("method", result["method"]),
        (
            "documents / tokens / bytes",
            f"{result['documents']:,} / {result['text_tokens']:,} / {result['text_bytes']:,}",
        ),
        ("scored tokens / their bytes", f"{result['scored_tokens']:,} / {result['scored_bytes']:,}"),
        ("loss (nats/token)", f"{result['loss']:.4f}"),
        ("pseudo-perplexity" if "pseudo_perplexity" in result else "perplexity", f"{result['perplexity']:.2f}"),
        *([(f"bits per token ({result['likelihood']})", _with_stderr(result))] if "bits_per_token" in result else []),
        ("bits per byte", f"{result['bits_per_byte']:.4f}"),
        ("token accuracy", f"{result['accuracy']:.4f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    print_whole(table)


def _with_stderr(result: dict) -> str:
    """Bits per token, with its standard error where it has one (a bound)."""
    stderr = result["bits_per_token_stderr"]
    return f"{result['bits_per_token']:.4f}" + (f" ± {stderr:.4f}" if stderr else "")


def render_held_out(result: dict) -> None:
    """The run's validation figures recomputed, one row each."""
    table = Table(title=f"lmpt-eval held_out=true: {result['objective']} {result['arch']}", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in result.items():
        if not name.startswith("val_") or name.endswith("_stderr"):
            continue
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
        stderr = result.get(f"{name}_stderr")
        if stderr:  # a bound's spread over its passes of masks; an exact likelihood has none to show
            shown += f" ± {stderr:.4f}"
        table.add_row(name, shown)
    print_whole(table)
