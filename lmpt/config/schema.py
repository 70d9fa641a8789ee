"""Typed schemas of the config groups (each objective's is beside it in lmpt/objectives/). The string under each field
is its documentation (`lmpt --help` and the README's configuration reference are built from it). The values a key
may take where the choice is a fixed list are here too, in one place, read by the config's checks and by the layers
that act on the value."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from omegaconf import MISSING, OmegaConf

from lmpt.config.quality_schema import QualityConfig


class Choice(str, Enum):
    """A key's fixed list of values: the config names a member by its name, which is its value (OmegaConf reads an
    Enum field by member name and refuses any other at composition, naming the allowed ones). A member compares,
    hashes, formats and serialises as that string, so code below the config reads it as one."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    def __repr__(self) -> str:
        return repr(str(self.value))


class TokenizerBackend(Choice):
    sentencepiece = "sentencepiece"
    bytelevel = "bytelevel"
    hf = "hf"


class ModelType(Choice):
    unigram = "unigram"
    bpe = "bpe"


class Flavour(Choice):
    """model.flavour: Llama-style blocks, or T5 v1.1's (encoder-decoder only)."""

    llama = "llama"
    t5 = "t5"


class Schedule(Choice):
    cosine = "cosine"
    linear = "linear"
    constant = "constant"
    inverse_sqrt = "inverse_sqrt"
    wsd = "wsd"


class DocumentMode(Choice):
    """data.documents: how text splits into documents. blank_line: a blank line ends one (its lines kept whole);
    wikitext: a ` = Title = ` heading starts one; line: every line is one; file: the whole file is one; stories:
    blank lines separate a story's paragraphs and a story ends where a line is followed directly by another, with no
    blank line between (TinyStories); auto: wikitext when a heading is among the first lines, else blank_line.
    wikitext, line and stories split lines into sentences."""

    auto = "auto"
    blank_line = "blank_line"
    wikitext = "wikitext"
    line = "line"
    file = "file"
    stories = "stories"


class Verify(Choice):
    stat = "stat"
    full = "full"


class PrecisionName(Choice):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


class Strategy(Choice):
    ddp = "ddp"
    fsdp = "fsdp"


class Progress(Choice):
    auto = "auto"
    rich = "rich"
    plain = "plain"
    tqdm = "tqdm"


class FinetuneMode(Choice):
    """downstream.mode and lmpt-finetune's mode: every weight trained, or a linear probe on frozen features."""

    full = "full"
    probe = "probe"


class Weights(Choice):
    """downstream.weights: the final model, or RUN/best (the lowest val_loss)."""

    last = "last"
    best = "best"


class Control(Choice):
    """downstream.control, lmpt-finetune's and lmpt-eval's control: scratch (the run's architecture freshly
    initialised is fine-tuned or scored beside the run's model, the same way) or none."""

    scratch = "scratch"
    none = "none"


class ChoicePll(Choice):
    """lmpt-eval's choice_pll: how an encoder scores a multiple-choice choice (lmpt.downstream.likelihood)."""

    conditional = "conditional"
    whole = "whole"


class AdjustLr(Choice):
    original = "original"
    match_rms_adamw = "match_rms_adamw"


ARCHITECTURES = ("decoder", "encoder", "encoder-decoder")
"""model.arch: the three stacks one Block assembles into (auto: the objective's own). A string checked at start-up,
not a Choice: encoder-decoder cannot name a member."""
ARCHS = ("auto", *ARCHITECTURES)
DOCUMENT_MODES = tuple(DocumentMode)
FLAVOURS = tuple(Flavour)
FINETUNE_MODES = tuple(FinetuneMode)
CONTROLS = tuple(Control)


@dataclass
class TokenizerConfig:
    backend: TokenizerBackend = TokenizerBackend.sentencepiece
    """sentencepiece or bytelevel (trained on the training text, cached), or hf (a pretrained tokenizer.json)."""
    path: str | None = None
    """hf: a tokenizer.json, or a directory holding one (GPT-2, Llama 3, SmolLM, ModernBERT style)."""
    model_file: str | None = None
    """sentencepiece: an existing .model with lmpt's reserved layout; null trains one on the training text."""
    vocab_size: int | None = 4096
    """Vocabulary size of a trained tokenizer, reserved tokens included (null for hf: the file decides)."""
    model_type: ModelType = ModelType.unigram
    """sentencepiece: the algorithm, unigram or bpe."""
    character_coverage: float = 0.9995
    """sentencepiece: share of characters the vocabulary must cover; the rest fall back to bytes."""
    byte_fallback: bool = True
    """sentencepiece: spell unknown characters as UTF-8 bytes instead of <unk>."""
    lossless: bool = False
    """sentencepiece: keep text as written, decode(encode(x)) == x (no NFKC, no whitespace folding; byte fallback)."""
    split_digits: bool = False
    """sentencepiece: split every number into single digits."""
    num_sentinels: int = 100
    """Span sentinels <extra_id_0> ... reserved for span corruption (hf: added when the file has none)."""
    max_sentences: int = 2000000
    """Most sentences sampled from the corpus to train the tokenizer."""
    seed: int = 0
    """Seed of the sentence sample the tokenizer is trained on (the same corpus and settings give the same file)."""
    threads: int = 4
    """Threads that train a SentencePiece tokenizer; part of its identity (the result depends on the count)."""


@dataclass
class ModelConfig:
    name: str = MISSING
    """Size preset: micro (data-constrained CPU studies), tiny, small, base or large."""
    arch: str = "auto"
    """auto (the objective's natural one), decoder, encoder or encoder-decoder."""
    d_model: int = 128
    """Width of the residual stream."""
    n_layers: int = 4
    """Blocks per stack (an encoder-decoder has this many in the encoder)."""
    n_decoder_layers: int | None = None
    """Blocks in the decoder of an encoder-decoder; null = n_layers."""
    n_heads: int = 4
    """Attention heads per block."""
    n_kv_heads: int | None = None
    """Key/value heads (grouped-query attention: each serves n_heads/n_kv_heads query heads); null = n_heads."""
    flavour: Flavour = Flavour.llama
    """llama (rotary positions, SwiGLU, tied head) or t5 (encoder-decoders only: T5 v1.1's relative position
    buckets, gated-GELU, unscaled attention, untied head; exports as T5ForConditionalGeneration)."""
    ffn_dim: int = 384
    """Hidden width of the SwiGLU feed-forward."""
    max_seq_len: int = 1024
    """Longest sequence the model accepts."""
    dropout: float = 0.0
    """Dropout on attention outputs, MLP outputs and embeddings."""
    norm_eps: float = 1e-6
    """Epsilon of RMSNorm."""
    rope_theta: float = 10000.0
    """Base of the rotary position frequencies."""
    init_std: float = 0.02
    """Standard deviation of the weight initialisation."""
    activation_checkpointing: bool = False
    """Recompute each block's activations in backward instead of storing them (less memory, ~1/3 more compute)."""
    init_from: str | None = None
    """Start a new stage from these weights: an lmpt run directory or checkpoint, or a local Hugging Face
    LlamaForCausalLM / EuroBertForMaskedLM directory. Its architecture keys are adopted unless set explicitly;
    optimizer and schedule start fresh; data and objective may change."""
    stage: int = 1
    """Training stage of this run, recorded by lmpt: 1 from scratch, the source's stage + 1 with init_from."""


@dataclass
class OptimizerConfig:
    name: str = MISSING
    """adamw, adafactor or muon."""
    lr: float = 1e-3
    """Peak learning rate."""
    weight_decay: float = 0.1
    """Decoupled weight decay (never applied to norms, biases or embeddings)."""


@dataclass
class AdamWConfig(OptimizerConfig):
    name: str = "adamw"
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    """Adam's (beta1, beta2)."""
    eps: float = 1e-8
    """Adam's epsilon."""
    fused: bool | None = None
    """Use the fused kernel; null = wherever the device supports it."""


@dataclass
class AdafactorConfig(OptimizerConfig):
    name: str = "adafactor"
    lr: float = 1e-2
    weight_decay: float = 0.0
    beta2_decay: float = -0.8
    """Exponent of the second-moment decay schedule."""
    eps: float = 1e-3
    """Epsilon relative to the parameter scale."""


@dataclass
class SchedulerConfig:
    name: Schedule = Schedule.cosine
    """cosine, linear, constant, inverse_sqrt or wsd (warmup-stable-decay)."""
    warmup_steps: int = 20
    """Steps of linear warm-up from zero."""
    min_lr_ratio: float = 0.3
    """Final learning rate as a fraction of the peak (cosine, linear, wsd)."""
    decay_fraction: float = 0.2
    """wsd: fraction of the run spent decaying at the end."""


@dataclass
class SourceConfig:
    name: str = ""
    """Label of the source: per-source validation metrics (val_loss/NAME) and lmpt-preview name it."""
    paths: list[str] = field(default_factory=list)
    """This source's training text (files, directories, globs, any format data.paths reads)."""
    weight: float = 1.0
    """Share of training windows drawn from this source, relative to the other sources' weights (> 0)."""
    val_paths: list[str] = field(default_factory=list)
    """This source's held-out text; empty = hold out data.val_fraction of its documents."""
    documents: DocumentMode | None = None
    """How this source's text files split into documents; null = data.documents."""


@dataclass
class DataConfig:
    paths: list[str] = field(default_factory=lambda: ["bundled:tinyshakespeare.txt"])
    """Training text: files, directories, globs (.txt/.md/.text, .jsonl, each also .gz/.zst, .parquet, a Hugging Face
    save_to_disk folder's .arrow); `bundled:NAME` for a shipped corpus."""
    val_paths: list[str] = field(default_factory=list)
    """Held-out text; empty = hold out `val_fraction` of the training documents."""
    sources: list[SourceConfig] = field(default_factory=list)
    """A weighted mixture (data=mixture): several sources, each with its paths and weight, instead of `paths`."""
    val_fraction: float = 0.05
    """Share of documents held out for validation when `val_paths` is empty."""
    text_field: str = "text"
    """Field (JSONL) or column (parquet, arrow) holding each record's text."""
    documents: DocumentMode = DocumentMode.auto
    """How text splits into documents: auto, blank_line, wikitext, line, file or stories (blank lines between a
    story's paragraphs, none between two stories); jsonl, parquet, arrow: one per record."""
    unique_tokens: int | None = None
    """Train on the first N tokens of the training text only, the same tokens for every objective and seed, so the
    data stays fixed while the budget grows (the start line states the epochs); null = all of it."""
    seq_len: int = 128
    """Model input length in tokens (128, BERT's first-phase length: the tiny default run reaches a given held-out
    quality sooner at 128 than at 256, docs/benchmarks.md)."""
    num_workers: int = 0
    """DataLoader worker processes making batches."""
    tokenize_workers: int = 0
    """Processes tokenising the corpus into the cache; 0 = every core."""
    shard_docs: int = 16384
    """Documents per token-cache shard: the unit a killed build keeps (sealed) and that lmpt-prepare's
    prepare.shard=i/N divides; the tokens do not depend on it."""
    cache_dir: str | None = None
    """Where tokenizers and token caches live; null = $LMPT_CACHE_DIR or ~/.cache/lmpt."""
    verify: Verify = Verify.stat
    """stat: a file whose path, size and modification time are unchanged keeps its recorded content hash (a warm
    launch reads no text); full: hash every byte again (a changed file gets a new cache)."""
    allow_changed_text: bool = False
    """On resume: go on, with a warning, when the run's text differs from the text it recorded at its start
    (RUN/text.json: another file, or one appended to), and record the new text as the run's; false: refuse. Holds
    for one launch (the run's config keeps false); lmpt-eval RUN held_out=true takes it as allow_changed_text=true."""
    name: str | None = None
    """data=hf: the dataset to stream through `datasets`, a Hugging Face Hub name (HuggingFaceFW/fineweb-edu) or a
    local parquet or JSONL file, a folder of them, or a save_to_disk folder; null = read data.paths."""
    subset: str | None = None
    """data=hf: the dataset's configuration (the Hub's subset, e.g. sample-10BT); null = its default."""
    split: str = "train"
    """data=hf: the split streamed; data.val_fraction of its documents is held out for validation."""
    revision: str | None = None
    """data=hf: a Hub branch, tag or commit; null = main. The Hub's commit it resolves to when the run starts is
    in the token cache's key (a local dataset keeps the text given here as a label)."""
    max_tokens: str | None = None
    """data=hf: take at most this many tokens from the stream (50M; k, M, G or B, T scale), counted with the
    run's tokenizer, one eos a document included, before the quality stage; null = the whole split."""


@dataclass
class TrainerConfig:
    max_steps: int = 200
    """Optimizer steps to train for (derived from `budget` when one is set: giving both is refused)."""
    budget: str | None = None
    """Train for an amount of compute instead of max_steps: e.g. 3e12flops (the model's FLOP count), 2Mtokens
    (non-padding input tokens) or 5min (training time). The schedule spans it, the run ends when it is spent,
    a resumed run counts what earlier launches spent; null = train for max_steps."""
    batch_size: int = 16
    """Sequences per micro-batch (per device)."""
    grad_accum: int = 1
    """Micro-batches accumulated per optimizer step."""
    amp: bool = False
    """Mixed precision: bf16 autocast where supported, fp16 with a GradScaler on CUDA without bf16."""
    precision: PrecisionName | None = None
    """fp32, bf16 or fp16; overrides `amp` when set."""
    device: str = "auto"
    """auto, cpu, cuda or mps."""
    strategy: Strategy = Strategy.ddp
    """Under torchrun: ddp (replicate the model) or fsdp (shard parameters, gradients and optimizer state)."""
    compile: bool = False
    """torch.compile the model's stack and its sparse output head (the first steps are slow while it compiles)."""
    deterministic: bool = False
    """Use deterministic kernels (bitwise reproducible on CUDA, slower)."""
    seed: int = 1337
    """Seed of every random draw: data windows, corruption, initialisation, dropout."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this value; 0 disables."""
    max_nonfinite_steps: int = 10
    """Consecutive steps with a non-finite loss or gradient (each skipped) after which the run stops."""
    log_every: int = 10
    """Steps between logged training metrics."""
    eval_every: int = 100
    """Steps between validations (and at the end); 0 = only at the end."""
    eval_batches: int = 8
    """Validation batches per process per evaluation (always the same held-out windows)."""
    ckpt_every: int = 100
    """Steps between checkpoints (and at the end); 0 = only at the end."""
    ckpt_minutes: float = 30.0
    """Also checkpoint when this many minutes passed since the last one (grace periods are not guaranteed); 0 = off."""
    keep_last: int = 2
    """Committed checkpoints kept; older ones are pruned after each commit."""
    keep_best: bool = True
    """Also keep the weights of the evaluation with the lowest val_loss in RUN/best (model.safetensors and best.json);
    needs eval_every > 0. Give RUN/best to lmpt-eval, -finetune or -export to use them."""
    resume: str = "auto"
    """auto: continue from the run directory's newest checkpoint; never; or a run directory / checkpoint path."""
    progress: Progress = Progress.auto
    """Console output: auto (live display on a terminal, plain lines otherwise), rich, plain or tqdm."""
    tensorboard: bool = False
    """Also log metrics to TensorBoard (run_dir/tensorboard; needs the tensorboard package)."""
    wandb: bool = False
    """Also log metrics to Weights & Biases (needs the wandb package); a resumed run continues the same W&B run."""
    wandb_project: str = "lmpt"
    """W&B project of the run."""
    dry_run: bool = False
    """Print the plan (config tree, parameters, tokens, FLOPs, estimated time) and exit without training."""
    sample_tokens: int = 48
    """Tokens generated from the final model as a sample (decoders); 0 = none."""


@dataclass(kw_only=True)
class FinetuneRecipe:
    """How a task is fine-tuned, one schema for a run's `downstream` section and `lmpt-finetune` (its options,
    lmpt.downstream.options.FinetuneOptions): each key means the same and defaults the same in both."""

    mode: FinetuneMode = FinetuneMode.probe
    """How the fine-tuned tasks train: probe (the pre-trained body frozen, a linear head trained on its features:
    fast) or full (every weight trains)."""
    seeds: int = 3
    """Fine-tuning runs per task from the same pre-trained weights (figures are mean and std over them); each seed
    fixes head init, shuffling and dropout."""
    epochs: int = 3
    """Passes over a task's training examples per seed."""
    max_train_examples: int | None = None
    """At most this many training examples per task (a sample drawn from the seed; GLUE's MNLI and QQP hold about
    400k); null: every example. The task's record states the cap."""
    batch_size: int = 32
    """Examples per forward pass, fine-tuning and multiple-choice scoring alike."""
    control: Control = Control.scratch
    """scratch: every task is also scored on the run's architecture freshly initialised (zero-shot tasks scored, and
    fine-tuned tasks fine-tuned, the same way with the same recipe search, seeds and data, with a bag-of-words
    floor), and each figure's gain over that untrained control is recorded with its paired 95% interval (logged as
    downstream/NAME/accuracy_gain after training; a zero-shot task costs twice the scoring); none: the run's model
    alone."""


@dataclass
class DownstreamConfig(FinetuneRecipe):
    tasks: list[str] = field(default_factory=list)
    """The tasks scored when training ends, each by its kind (docs/downstream.md): a .jsonl file or bundled:NAME of
    multiple-choice questions or minimal pairs, scored zero-shot (as `lmpt-eval RUN task=...`); a folder holding
    train.jsonl and dev.jsonl (test.jsonl optional), bundled:NAME of one, regression:FOLDER or glue:NAME@DIR,
    fine-tuned (as `lmpt-finetune`). Each logs its figures to metrics.jsonl as downstream/NAME/FIGURE."""
    choice_tasks: list[str] = field(default_factory=list)
    """Old form of `tasks` for zero-shot tasks, accepted for a while (read after `tasks`, with a note)."""
    classification_tasks: list[str] = field(default_factory=list)
    """Old form of `tasks` for fine-tuned tasks, accepted for a while (read after `tasks` and choice_tasks, with a
    note)."""
    lr: str = "fixed"
    """The classification tasks' fine-tuning learning rate: fixed (the mode's: 1e-2 probe, 1e-4 full), search
    (lmpt-finetune's default: the rate, and an encoder's pooling, picked on a slice held back from the training split,
    the pre-trained model and its scratch control alike; lmpt-study's default scale searches), or a number."""
    weights: Weights = Weights.last
    """Which weights the tasks score when training ends: last (the final model) or best (RUN/best: the evaluation
    with the lowest val_loss; needs trainer.eval_every > 0 and trainer.keep_best). One rule for every run of a
    comparison: lmpt-study's default scale scores best."""
    score_every: int = 0
    """Steps between curve points during training (a multiple of trainer.eval_every; and at the last step); 0 = only
    when training ends. Each choice task is scored zero-shot on its fast subset, logged as curve/NAME/FIGURE (never
    mixed with the downstream/... figures that rank runs). Classification tasks are not: fine-tuning is too costly."""
    curve_items: int = 500
    """Items of a choice task's fast subset (score_every): its bundled NAME-fast twin when lmpt ships one, else the
    task itself, then at most this many items drawn with a fixed seed: the same items at every step and in every run."""


OLD_TASK_KEYS = ("choice_tasks", "classification_tasks")
"""The downstream section's task lists before `tasks`: read after it, in this order."""


def folded_tasks(flat: dict[str, Any]) -> dict[str, Any]:
    """A flattened config (`{"downstream.tasks": [...], ...}`) with the old task keys folded into downstream.tasks:
    a run recorded with them and one composed with `tasks` compare as the same experiment."""
    old = [f"downstream.{key}" for key in OLD_TASK_KEYS]
    if not any(key in flat for key in ["downstream.tasks", *old]):
        return flat
    tasks = [task for key in ["downstream.tasks", *old] for task in flat.get(key) or []]
    return {**{k: v for k, v in flat.items() if k not in old}, "downstream.tasks": tasks}


@dataclass
class LmptConfig:
    tokenizer: TokenizerConfig = MISSING
    objective: Any = MISSING
    model: ModelConfig = MISSING
    optimizer: Any = MISSING
    scheduler: SchedulerConfig = MISSING
    data: DataConfig = MISSING
    trainer: TrainerConfig = MISSING
    downstream: DownstreamConfig = MISSING
    quality: QualityConfig = MISSING


Schema = TypeVar("Schema")


def settings(section: object, schema: type[Schema]) -> Schema:
    """The composed config `section` as the plain `schema` dataclass instance it holds (`OmegaConf.to_object`; an
    instance already, as a RunSpec's sections are, as it is), typed: what code below the config layer takes instead
    of a config node."""
    value = section if isinstance(section, schema) else OmegaConf.to_object(section)
    if not isinstance(value, schema):
        raise TypeError(f"the config section holds a {type(value).__name__}, not a {schema.__name__}")
    return value


@dataclass
class MuonConfig(OptimizerConfig):
    name: str = "muon"
    lr: float = 0.04
    """Muon's peak learning rate, for the 2-D matrices inside the blocks (attention and MLP projections). This,
    momentum 0.9 and adamw_lr 2e-2 were tuned on the default run (the tiny model, ~400k tokens; docs/benchmarks.md):
    sweep them for bigger models and longer runs."""
    weight_decay: float = 0.0
    """Muon's decoupled weight decay (scaled by its learning rate, as torch.optim.Muon applies it)."""
    momentum: float = 0.9
    """Muon's momentum."""
    nesterov: bool = True
    """Nesterov momentum in Muon."""
    ns_steps: int = 5
    """Newton-Schulz iterations that orthogonalise each Muon update."""
    adjust_lr_fn: AdjustLr | None = AdjustLr.original
    """How Muon scales its learning rate by matrix shape: original (Keller Jordan's sqrt(max(1, rows/cols))) or
    match_rms_adamw (Moonshot's 0.2 sqrt(max(rows, cols)): AdamW's learning rate and decay then carry over)."""
    adamw_lr: float = 2e-2
    """AdamW's peak learning rate, for embeddings, the output head, norms, biases and the t5 lm_head / nsp head."""
    adamw_betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    """AdamW's (beta1, beta2)."""
    adamw_eps: float = 1e-8
    """AdamW's epsilon."""
    adamw_weight_decay: float = 0.0
    """AdamW's decoupled weight decay (never applied to norms, biases or embeddings)."""
