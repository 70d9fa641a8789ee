"""The options of `lmpt-finetune` (and of lmpt.downstream.finetune.finetune): a typed dataclass whose field docstrings
are the `--help` text, the recipe a run's downstream section shares and what only lmpt-finetune sets, with the task's
files under `data.` (lmpt.downstream.labelled_files.TaskData); the name a task is recorded under (`labelled_name`), a
bundled task's files brought in (`with_task_files`), and what each mode trains, as the console says it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from lmpt.config.command_options import require
from lmpt.config.schema import FinetuneRecipe, PrecisionName
from lmpt.downstream.bundled import BUNDLED_PREFIX, SPLITS, task_folder
from lmpt.downstream.labelled_files import TaskData

MODE_MEANINGS = {
    "probe": "the pre-trained body frozen, a linear head trained on its features",
    "full": "every weight trained",
}
"""What each fine-tuning mode (lmpt.config.schema.FINETUNE_MODES) trains, as the console says it."""


@dataclass
class FinetuneOptions(FinetuneRecipe):
    """How to fine-tune and score one task: the recipe a run's downstream section shares (FinetuneRecipe), and what
    only lmpt-finetune sets."""

    data: TaskData
    task: str | None = None
    """Name of the task in the record RUN/downstream/TASK.json; null = the train file's name (its folder's name
    when the file is called train.*). bundled:NAME fine-tunes on a task shipped in lmpt/tasks/NAME/ (its train, dev
    and test .jsonl, no data.* files needed), named NAME, as downstream.classification_tasks reads it. glue runs
    GLUE's nine tasks from data.dir, glue:rte,mrpc,sts-b some of them (names as GLUE's folders or Hugging Face's
    configs, any case)."""
    wnli_in_score: bool = False
    """task=glue: count WNLI in the GLUE score (BERT's table left it out: every model scored its majority class)."""
    regression: bool = False
    """The label is a number to predict (STS-B's similarity): one output trained by mean squared error, scored by
    Pearson and Spearman correlation and MSE, beside a ridge-regression floor. false = classes."""
    seed: int = 0
    """First seed: the runs use seed, seed+1, ..., seed+seeds-1."""
    max_steps: int | None = None
    """Stop each seed after this many optimizer steps (null = epochs decide)."""
    lr: str | float | None = "search"
    """Peak learning rate (linear warm-up, then linear decay to 0): search (picked from lr_grid by accuracy, a
    regression's by Pearson, on a slice held back from the training split, never dev; encoders also pick first or
    mean pooling), a number, or null = 1e-4 for full, 1e-2 for probe."""
    lr_grid: list[float] | None = None
    """lr=search: the learning rates tried; null = 1e-4, 3e-4, 1e-3, 3e-3 (full) or 1e-3, 3e-3, 1e-2, 3e-2 (probe)."""
    search_fraction: float = 0.15
    """lr=search: share of the training split held back (drawn from `seed`) to score each candidate recipe on; at
    least 100 training examples must remain."""
    search_epochs: int = 1
    """lr=search: passes over the rest of the training split per candidate, one seed each (capped by max_steps);
    the chosen recipe then trains on the whole training split for `epochs`, every seed."""
    warmup: float = 0.1
    """Fraction of the steps spent warming up the learning rate."""
    weight_decay: float = 0.01
    """AdamW's decoupled weight decay (never on norms, biases or embeddings)."""
    seq_len: int | None = None
    """Longest input in tokens (longer texts are cut, the longer of a pair first); null = the run's data.seq_len."""
    pooling: str = "auto"
    """What the head reads: auto, first or mean (encoder), last (decoder), encoder_mean or decoder_first
    (encoder-decoder). auto = mean, last, encoder_mean; with lr=search an encoder's auto picks first or mean."""
    dropout: float = 0.1
    """Dropout on the pooled representation before the head."""
    device: str = "cpu"
    """cpu, cuda or auto."""
    precision: PrecisionName | None = None
    """fp32, bf16 or fp16; null = amp decides (as trainer.precision)."""
    amp: bool = False
    """Mixed precision as training picks it (bf16 where supported, fp16 on older GPUs) when precision is null."""
    compile: bool = False
    """torch.compile the model as training does (model.compile_parts)."""
    json: bool = False
    """Print one JSON object instead of a table."""


def labelled_name(options: FinetuneOptions) -> str:
    """`task=`, else the train file's name without its suffixes (its folder's when the file is train.*)."""
    if options.task:
        return options.task
    path = Path(options.data.train or "")
    stem = path.name.split(".")[0]
    return path.resolve().parent.name if stem.lower() in ("train", "training") else stem


def with_task_files(o: FinetuneOptions) -> FinetuneOptions:
    """`o` with its task's files: task=bundled:NAME brings lmpt/tasks/NAME/'s (and the name NAME), read as
    downstream.classification_tasks reads it; otherwise data.train and data.dev must be given."""
    files = {split: getattr(o.data, split) for split in SPLITS}
    if o.task is not None and o.task.startswith(BUNDLED_PREFIX):
        given = [f"data.{split}" for split, path in files.items() if path is not None]
        require(not given, f"task={o.task} brings its own files: drop {', '.join(given)} (or drop task=)")
        name, data = task_folder(o.task, "task")
        return dataclasses.replace(
            o, task=name, data=dataclasses.replace(o.data, train=data.train, dev=data.dev, test=data.test)
        )
    missing = [f"data.{split}=..." for split in SPLITS[:2] if files[split] is None]
    require(not missing, f"lmpt-finetune needs {', '.join(missing)} (or task=bundled:NAME): see `lmpt-finetune --help`")
    return o
