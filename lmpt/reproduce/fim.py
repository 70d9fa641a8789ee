"""Fill-in-the-middle for free (Bavarian et al. 2022): a model trained with 50% of its documents rearranged has the
same left-to-right test loss as one trained with none, and a far lower FIM loss; and whether what it costs at lmpt's
scale is the text its sentinels take (a share that falls as documents lengthen) rather than capacity.

The grid: corpora whose documents differ in length by orders of magnitude (the scale's, or any `corpus=` lmpt
reads), a ladder of model widths (lmpt.reproduce.ladder), token budgets, seeds; in each cell the same decoder trained
as clm and as fim (fim_rate 0.5, spm_rate 0.5) on the same batches of tokens, step for step. clm is fim at fim_rate
0, which makes clm's batches bit for bit (tests/objectives/test_measure.py), so both runs log the same yardsticks on
the same held-out windows: the left-to-right bits per token (val_bits_per_token) and the FIM loss (val_fim_psm_loss,
val_fim_spm_loss: every held-out document rearranged at the same split points in every run, the loss on the middle).
The seed fixes a run's initial weights and its windows, so clm and fim of one seed differ in the objective alone: the
differences are paired by seed. What each corpus's documents are, and the share of fim's input positions that hold
sentinels, are measured from the text (lmpt.reproduce.fim_inputs)."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from matplotlib.figure import Figure
from scipy import stats

from lmpt.config.schema import TokenizerConfig
from lmpt.downstream.figures import ACCURACY, ACCURACY_GAIN, metric_key
from lmpt.errors import LmptError
from lmpt.objectives.fim import FimConfig
from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.prepare.step import composed_run, prepare, training_tokens
from lmpt.report.markdown import markdown_table
from lmpt.reproduce.fim_inputs import FimInputs, measure_inputs
from lmpt.reproduce.ladder import Shape, check_ladder
from lmpt.reproduce.reproduction import (
    AR,
    CONF_DATA,
    Findings,
    FinishedRun,
    PlannedRun,
    Reproduction,
    Scale,
    corpus_keys,
    interval,
    numbers,
    spans,
)
from lmpt.reproduce.verdict import ClaimVerdict, Condition, Evidence, below, combined, judge, within_margin

FIM50 = "fim"
"""The two arms, as the runs' names and the tables call them: the paper's autoregressive control (fim at fim_rate 0,
clm batch for batch) and its FIM-50% models."""
ARMS = {AR: ("objective=fim", "objective.fim_rate=0.0"), FIM50: ("objective=fim",)}
FIM_RATE, SPM_RATE = FimConfig.fim_rate, FimConfig.spm_rate
"""The FIM arm's rates: the objective's defaults, the paper's FIM-50% with PSM and SPM both trained."""
NAMED_WIDTHS = {"micro": 64, "tiny": 128}
"""Model groups the ladder also takes by name: their shapes are the ladder's at these widths."""
MARGIN = 1.0
""""For free" in percent of clm's left-to-right bits per token: the 95% interval of fim's paired difference inside
+-1% of clm's figure."""
MEASURED_STEPS = 100
"""Training steps of each fim seed whose batches the sentinel share is counted over (the run's first)."""
MIN_STEPS = 20
"""The fewest optimizer steps a budget may buy."""
MAX_EPOCHS = 4.0
"""Passes over a corpus a budget may take: past about 4, repeated text is no longer nearly as good as new
(Muennighoff et al. 2023); the paper's runs read their 100B tokens about once."""
LONG_DOCUMENTS = 1000.0
"""Mean tokens a document from which a corpus's documents are the paper's kind: code files and web pages of thousands
of tokens."""
PAPER_SMALLEST = 50e6
PAPER_LARGEST = 6.9e9
PAPER_TOKENS = 100e9
PAPER_CONTEXT = 2048
PAPER_VOCAB = "about 50k BPE pieces (GPT-3's, with Codex's whitespace tokens for code)"
"""The paper's conditions: model sizes (non-embedding parameters), training tokens a model, context, vocabulary."""
ZORRO = "zorro-fast"


def corpus_label(corpus: str) -> str:
    """A corpus's name in run names and tables: a data group's own name, a path's file or folder name."""
    if (CONF_DATA / f"{corpus}.yaml").is_file():
        return corpus
    stem = Path(corpus.rstrip("/*")).stem or "text"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)


@dataclass(frozen=True)
class Cell:
    """One (corpus, model, budget) cell: its runs paired by seed."""

    corpus: str
    shape: Shape
    tokens: int
    clm: dict[int, FinishedRun]
    fim: dict[int, FinishedRun]

    @property
    def seeds(self) -> list[int]:
        return sorted(set(self.clm) & set(self.fim))

    def values(self, arm: str, key: str) -> list[float]:
        runs = self.clm if arm == AR else self.fim
        return [runs[s].last(key) for s in self.seeds]

    @property
    def costs(self) -> list[float]:
        """fim's left-to-right cost per seed, in percent of clm's bits per token."""
        return [
            100 * (f - c) / c
            for c, f in zip(self.values(AR, BITS_PER_TOKEN), self.values(FIM50, BITS_PER_TOKEN), strict=True)
        ]

    def fim_loss(self, form: str) -> tuple[list[float], list[float]]:
        """The FIM loss (bits per middle token) of clm and of fim per seed, `form` psm or spm."""
        key = f"val_fim_{form}_loss"
        return [v / math.log(2) for v in self.values(AR, key)], [v / math.log(2) for v in self.values(FIM50, key)]

    @property
    def name(self) -> str:
        return _cell_name(self.shape, self.tokens)


class FimForFree(Reproduction):
    name: ClassVar[str] = "fim"
    title: ClassVar[str] = "fill-in-the-middle for free (Bavarian et al. 2022), and what it costs on short documents"
    paper: ClassVar[str] = (
        'Bavarian, Jun, Tezak, Schulman, McLeavey, Tworek and Chen (2022), "Efficient Training of Language Models to '
        'Fill in the Middle", arXiv:2207.14255'
    )
    claim: ClassVar[str] = (
        'Figure 1 and section 4.2 ("FIM-for-free"): models trained with 50% of their documents in FIM form reach the '
        "same left-to-right test loss as models trained with none, at every size from 50M to 6.9B parameters, and "
        "(the stronger form) their learning curves match throughout training. Figure 2: the FIM models' FIM test loss, "
        "in PSM and SPM form, is far lower. Asked beside it (lmpt issue 62): where FIM costs, does the cost fall "
        "toward zero as documents lengthen, in proportion to the share of positions its sentinels take?"
    )
    papers_figures: ClassVar[str] = (
        "The paper shows its result as curves, not a table: in Figure 1 the left-to-right test loss of FIM-50% and "
        "autoregressive models of 50M to 6.9B parameters lie on one power law in non-embedding compute, the gap "
        "smaller than the spread of one curve; in Figure 2 the FIM models' FIM loss sits well below the "
        "autoregressive models' at every size. Its models read 100B tokens of code files or web pages, documents of "
        "thousands of tokens, in a 2,048-token context; each rearranged document adds three sentinels, so at most "
        f"{1.5 / PAPER_CONTEXT:.2%} of the positions of a context holding one document are sentinels."
    )
    cost_note: ClassVar[str] = (
        "scale=laptop is what 2 CPU cores finish in about 90 minutes (the plan states its time before anything "
        "starts; `max_minutes` refuses a longer one); scale=paper plans the paper's smallest model on long documents "
        "in its 2,048-token context, for a GPU (`device=gpu`) or SLURM (`launcher=slurm`): the dry run prints its "
        "runs, FLOPs (lmpt's count and the paper's 6ND) and GPU-hours. Every grid key is one key away: "
        "`corpus=[...]` (a data group or a path to text of your own), `ladder=[...]` (widths, or micro and tiny), "
        "`budgets=[...]` (training tokens), `seeds=N`, and `slots=N` on a machine with more cores."
    )
    grid_keys: ClassVar[tuple[str, ...]] = ("corpus", "ladder", "budgets")
    scales: ClassVar[dict[Scale, dict[str, Any]]] = {
        Scale.laptop: {
            "corpus": ["shakespeare", "tinystories", "wikitext"],
            "ladder": ["micro", "tiny"],
            "budgets": ["300000", "1000000"],
            "seeds": 3,
            "seq_len": 512,
            "batch_size": 4,
            "eval_batches": 8,
            "keys": [],
        },
        Scale.paper: {
            "corpus": ["wikitext"],
            "ladder": ["512"],
            "budgets": ["1.1e9"],
            "seeds": 3,
            "seq_len": PAPER_CONTEXT,
            "batch_size": 32,
            "eval_batches": 4,
            "keys": ["trainer.precision=bf16"],  # the GPU-hours are at bf16's peak
        },
    }
    """laptop: the three bundled corpora, whose documents are tens, hundreds and thousands of tokens long
    (docs/data.md), micro and tiny, two budgets, windows of 512 (a window holds a story whole, or a long piece of an
    article); paper:
    width 512 (lmpt.reproduce.ladder: the paper's smallest size or just above it) at about 20 tokens a parameter
    (compute-optimal), in the paper's 2,048-token context, on long documents (WikiText's bundled articles plan it; a
    launch needs a `corpus=` the budget reads at most MAX_EPOCHS times), in bf16. Besides the grid keys: each scale's
    window length, windows a step, held-out batches and the run keys it adds."""

    def __init__(self, scale: Scale = Scale.laptop, seeds: int | None = None, **given: list[str]) -> None:
        super().__init__(scale, seeds, **given)
        setting = self.scales[self.scale]
        self.seq_len = int(setting["seq_len"])
        self.batch_size = int(setting["batch_size"])
        self.eval_batches = int(setting["eval_batches"])
        self.run_keys = tuple(setting["keys"])
        self.vocab = int(TokenizerConfig.vocab_size or 0)
        self.corpora: dict[str, tuple[str, ...]] = {}
        for corpus in self.grid["corpus"]:
            label = corpus_label(corpus)
            if label in self.corpora:
                raise LmptError(f"corpus=[{','.join(self.grid['corpus'])}] names {label} twice: give each text once")
            self.corpora[label] = corpus_keys(corpus)
        widths = [NAMED_WIDTHS.get(raw, None) or _width(raw) for raw in self.grid["ladder"]]
        if len(set(widths)) < len(widths):
            raise LmptError(f"ladder=[{','.join(self.grid['ladder'])}] names a width twice: give each model once")
        self.shapes = check_ladder(sorted(widths), self.vocab, self.seq_len)
        budgets = sorted({int(b) for b in numbers(self, "budgets", float, least=1)})
        least = MIN_STEPS * self.tokens_per_step
        if budgets[0] < least:
            raise LmptError(
                f"budgets={budgets[0]:g} buys fewer than {MIN_STEPS} optimizer steps of {self.tokens_per_step:,} "
                f"tokens: give budgets of at least {least:,} tokens"
            )
        self.budgets = budgets
        self._inputs: dict[tuple[str, int], FimInputs] = {}

    @property
    def tokens_per_step(self) -> int:
        """Training tokens an optimizer step reads: batch_size windows of seq_len."""
        return self.batch_size * self.seq_len

    def steps(self, tokens: int) -> int:
        return round(tokens / self.tokens_per_step)

    def runs(self) -> list[PlannedRun]:
        planned = []
        for corpus, data_keys in self.corpora.items():
            for shape in self.shapes:
                label = model_label(shape)
                rate = (
                    label if self.seq_len == 128 else f"{label}@{self.seq_len}"
                )  # the model on longer windows, as its tables name it
                for tokens in self.budgets:
                    steps = self.steps(tokens)
                    trained = steps * self.tokens_per_step
                    keys = (
                        *data_keys,
                        *shape.keys(),
                        f"data.seq_len={self.seq_len}",
                        f"trainer.batch_size={self.batch_size}",
                        f"trainer.max_steps={steps}",
                        f"trainer.eval_every={max(1, steps // 3)}",
                        f"trainer.eval_batches={self.eval_batches}",
                        "trainer.sample_tokens=0",
                        f"downstream.tasks=[bundled:{ZORRO}]",  # grammar beside the untrained control
                        *self.run_keys,
                    )
                    for seed in range(self.seeds):
                        for arm, arm_keys in ARMS.items():
                            planned.append(
                                PlannedRun(
                                    f"{corpus}-{label}-{_count(tokens)}-{arm}-seed{seed}",
                                    (*arm_keys, *keys, f"trainer.seed={seed}"),
                                    {
                                        "corpus": corpus,
                                        "model": rate,
                                        "width": shape.width,
                                        "tokens": tokens,
                                        "objective": arm,
                                        "seed": seed,
                                    },
                                    shape.flops_per_token * trained,
                                    6.0 * shape.matmul_parameters * trained,
                                )
                            )
        return planned

    def check_text(self) -> None:
        """Refuse, before any run starts, a corpus the largest budget would read more than MAX_EPOCHS times (its text
        tokenised into lmpt's cache, as the runs would)."""
        needed = max(self.budgets) / MAX_EPOCHS
        for corpus, data_keys in self.corpora.items():
            keys = (*data_keys, f"data.seq_len={self.seq_len}")
            prepare(keys)
            held = training_tokens(keys)
            if held < needed:
                raise LmptError(
                    f"corpus {corpus} holds {held:,} training tokens and budgets={max(self.budgets):g} would read it "
                    f"{max(self.budgets) / held:.1f} times, more than {MAX_EPOCHS:g}: give a text of at least "
                    f"{math.ceil(needed):,} tokens (corpus=PATH) or smaller budgets"
                )

    def inputs(self, corpus: str, seed: int, run: FinishedRun) -> FimInputs:
        """The measured text and sentinel share of `corpus` for the fim run of `seed` (its first batches)."""
        if (corpus, seed) not in self._inputs:
            self._inputs[corpus, seed] = measure_inputs(run.planned.keys, MEASURED_STEPS)
        return self._inputs[corpus, seed]

    def analyse(self, finished: list[FinishedRun]) -> Findings:
        planned = self.runs()
        cells = self._cells(finished)
        done = {r.planned.name for r in finished}
        missing = [r for r in planned if r.name not in done]
        measured = {
            corpus: {s: self.inputs(corpus, s, c.fim[s]) for c in cells if c.corpus == corpus for s in c.seeds}
            for corpus in self.corpora
        }
        shares = {corpus: [m.sentinel_share for m in by_seed.values()] for corpus, by_seed in measured.items()}
        lengths = {
            corpus: next(iter(by_seed.values())).mean_document for corpus, by_seed in measured.items() if by_seed
        }
        corpus_tokens = {corpus: next(iter(by_seed.values())).tokens for corpus, by_seed in measured.items() if by_seed}
        conditions = self._conditions(lengths, shares, corpus_tokens, planned)
        general = [
            c for c in conditions if c.name in ("non-embedding parameters", "tokens per non-embedding parameter")
        ]
        context = [c for c in conditions if c.name == "context length"]
        claims = []
        for corpus in self.corpora:
            mine = [c for c in cells if c.corpus == corpus]
            long = [c for c in conditions if c.name == f"document length: {corpus}"]
            claims.append(self._free(corpus, mine, lengths.get(corpus), missing, [*general, *long, *context]))
        claims.append(self._fim_loss(cells, missing, general))
        if len(self.corpora) >= 2:
            claims.append(self._falls(cells, lengths, missing))
            claims.append(self._proportional(cells, measured, missing))
        sections = [
            ("The grid", self._grid_note(planned, measured)),
            ("Left to right: fim's cost by document length", self._cost_table(cells, lengths, shares)),
            ("Is the cost the text the sentinels take?", self._share_table(cells, measured, lengths)),
            ("The FIM loss: the same held-out windows rearranged, bits per middle token", self._fim_table(cells)),
            (
                "Zorro beside the untrained control (not in the paper: whether FIM costs grammar)",
                "Zorro's fast subset (minimal pairs in a child's vocabulary; ties counted wrong), scored zero-shot by "
                "each sentence's log-likelihood after each run, beside the same decoder untrained (its gain).\n\n"
                + self._zorro_table(cells),
            ),
            ("Every run", self._every_run(finished, measured)),
        ]
        return Findings(claims, conditions, self._headline(cells, lengths), sections, self._plot(cells, measured))

    def _cells(self, finished: list[FinishedRun]) -> list[Cell]:
        """Every (corpus, model, budget) with at least one seed whose two arms both completed."""
        by: dict[tuple[str, int, int, str], dict[int, FinishedRun]] = {}
        for r in finished:
            labels = r.planned.labels
            key = (labels["corpus"], labels["width"], labels["tokens"], labels["objective"])
            by.setdefault(key, {})[labels["seed"]] = r
        cells = []
        for corpus in self.corpora:
            for shape in self.shapes:
                for tokens in self.budgets:
                    cell = Cell(
                        corpus,
                        shape,
                        tokens,
                        by.get((corpus, shape.width, tokens, AR), {}),
                        by.get((corpus, shape.width, tokens, FIM50), {}),
                    )
                    if cell.seeds:
                        cells.append(cell)
        return cells

    def _free(
        self,
        corpus: str,
        cells: list[Cell],
        length: float | None,
        missing: list[PlannedRun],
        conditions: list[Condition],
    ) -> ClaimVerdict:
        """FIM-for-free on one corpus: every cell's paired cost within +-MARGIN% of clm's bits per token."""
        claim = f"FIM-for-free on {corpus}" + (f" (documents of {length:,.0f} tokens)" if length else "")
        gone = [r for r in missing if r.labels["corpus"] == corpus]
        if len(cells) < len(self.shapes) * len(self.budgets):
            return judge(claim, Evidence.missing, "", conditions, _missing(gone))
        figures = [(cell, *interval(cell.costs)) for cell in cells]
        evidence = combined([within_margin(low, high, MARGIN) for _, _, low, high in figures])
        figure = "fim - clm in % of clm's bits per token: " + "; ".join(
            f"{cell.name} {spans(mean, low, high)}" for cell, mean, low, high in figures
        )
        if evidence is Evidence.shows:
            why = f"every cell's 95% interval inside +-{MARGIN:g}%"
        elif evidence is Evidence.contradicts:
            why = f"a cell's 95% interval lies wholly outside +-{MARGIN:g}%: fim costs more"
        elif any(math.isnan(low) for _, _, low, _ in figures):
            why = "one seed: no interval"
        else:
            why = f"an interval reaches past +-{MARGIN:g}%"
        return judge(claim, evidence, figure, conditions, why + _also_missing(gone))

    def _fim_loss(self, cells: list[Cell], missing: list[PlannedRun], conditions: list[Condition]) -> ClaimVerdict:
        """The FIM loss far lower: fim's paired difference below 0 in every cell and both forms."""
        claim = "FIM loss far lower (PSM and SPM)"
        if len(cells) < len(self.corpora) * len(self.shapes) * len(self.budgets):
            return judge(claim, Evidence.missing, "", conditions, _missing(missing))
        diffs = [
            interval([f - c for c, f in zip(*cell.fim_loss(form), strict=True)])
            for cell in cells
            for form in ("psm", "spm")
        ]
        evidence = combined([below(low, high, 0.0) for _, low, high in diffs])
        means = [mean for mean, _, _ in diffs]
        figure = (
            f"fim - clm from {min(means):+.3f} to {max(means):+.3f} bits per middle token over {len(diffs)} cells and "
            "forms"
        )
        why = {
            Evidence.shows: "every 95% interval below 0",
            Evidence.contradicts: "an interval lies wholly above 0",
        }.get(evidence, "one seed: no interval" if self.seeds < 2 else "an interval reaches 0")
        return judge(claim, evidence, figure, conditions, why + _also_missing(missing))

    def _falls(self, cells: list[Cell], lengths: dict[str, float], missing: list[PlannedRun]) -> ClaimVerdict:
        """The cost falls as documents lengthen: the longest documents' cost below the shortest's in every model and
        budget (Welch's 95% interval of the difference)."""
        claim = "fim's cost falls as documents lengthen"
        if len(lengths) < len(self.corpora) or len(cells) < len(self.corpora) * len(self.shapes) * len(self.budgets):
            return judge(claim, Evidence.missing, "", [], _missing(missing))
        shortest, longest = min(lengths, key=lengths.__getitem__), max(lengths, key=lengths.__getitem__)
        claim += f" ({shortest}'s {lengths[shortest]:,.0f} tokens to {longest}'s {lengths[longest]:,.0f})"
        parts, evidence = [], []
        for shape in self.shapes:
            for tokens in self.budgets:
                short, long = (
                    next(c for c in cells if (c.corpus, c.shape, c.tokens) == (name, shape, tokens)).costs
                    for name in (shortest, longest)
                )
                low, high = _welch(long, short)
                evidence.append(below(low, high, 0.0))
                diff = statistics.fmean(long) - statistics.fmean(short)
                parts.append(f"{_cell_name(shape, tokens)} {spans(diff, low, high)}")
        verdict = combined(evidence)
        why = {
            Evidence.shows: "every interval of the difference below 0",
            Evidence.contradicts: "an interval lies wholly above 0: the cost grows",
        }.get(verdict, "one seed: no interval" if self.seeds < 2 else "an interval reaches 0")
        figure = f"{longest}'s cost - {shortest}'s, in points of %: " + "; ".join(parts)
        return judge(claim, verdict, figure, [], why)

    def _proportional(
        self, cells: list[Cell], measured: dict[str, dict[int, FimInputs]], missing: list[PlannedRun]
    ) -> ClaimVerdict:
        """The cost is the text the sentinels take: in every model and budget, the cost per run against its measured
        sentinel share has a positive slope and an intercept (the cost with no sentinels) whose interval holds 0."""
        claim = "the cost comes from lost text (proportional to the sentinel share)"
        if len(cells) < len(self.corpora) * len(self.shapes) * len(self.budgets):
            return judge(claim, Evidence.missing, "", [], _missing(missing))
        parts, evidence = [], []
        for shape in self.shapes:
            for tokens in self.budgets:
                fit = share_fit([c for c in cells if (c.shape, c.tokens) == (shape, tokens)], measured)
                if fit is None:
                    evidence.append(Evidence.undecided)
                    parts.append(f"{_cell_name(shape, tokens)}: no interval (one seed, or one share)")
                    continue
                (a, a_low, a_high), (k, k_low, k_high) = fit
                if a_low > 0 or a_high < 0 or k_high < 0:
                    evidence.append(Evidence.contradicts)
                elif k_low > 0:
                    evidence.append(Evidence.shows)
                else:
                    evidence.append(Evidence.undecided)
                parts.append(f"{_cell_name(shape, tokens)}: k {spans(k, k_low, k_high)}, a {spans(a, a_low, a_high)}%")
        verdict = combined(evidence)
        why = {
            Evidence.shows: "the cost rises with the share and its intercept's interval holds 0",
            Evidence.contradicts: "fim costs with no sentinels (the intercept excludes 0), or less with more",
        }.get(verdict, "no interval (one seed)" if self.seeds < 2 else "the fit cannot tell a slope from none")
        return judge(claim, verdict, "cost = a + k x sentinel share, both in %: " + "; ".join(parts), [], why)

    def _conditions(
        self,
        lengths: dict[str, float],
        shares: dict[str, list[float]],
        corpus_tokens: dict[str, int],
        planned: list[PlannedRun],
    ) -> list[Condition]:
        """The conditions FIM-for-free depends on, the paper's value beside this grid's (computed from the grid and
        the text's measurements)."""
        non = [s.matmul_parameters for s in self.shapes]
        whole = [s.parameters for s in self.shapes]
        per_non = [t / n for t in self.budgets for n in non]
        per_whole = [t / n for t in self.budgets for n in whole]
        fewest = PAPER_TOKENS / PAPER_LARGEST
        rows = [
            Condition(
                "non-embedding parameters",
                f"{_count(PAPER_SMALLEST)} to {_count(PAPER_LARGEST)}",
                _range(non, _count),
                min(non) >= PAPER_SMALLEST,
                "the claim is for every size from the paper's smallest up",
            ),
            Condition("parameters with the tied embedding", "not counted by the paper", _range(whole, _count)),
            Condition("training tokens", f"{_count(PAPER_TOKENS)} a model", _range(self.budgets, _count)),
            Condition(
                "tokens per non-embedding parameter",
                f"{fewest:.0f} to {PAPER_TOKENS / PAPER_SMALLEST:,.0f}",
                _range(per_non, lambda v: f"{v:,.1f}"),
                min(per_non) >= fewest,
                "the models trained as far as the paper's, for their size",
            ),
            Condition(
                "tokens per parameter against compute-optimal",
                "about 20 with the embedding (Hoffmann et al. 2022); the paper's are past it",
                _range([v / 20 for v in per_whole], lambda v: f"{v:.2g}x"),
            ),
        ]
        for corpus in self.corpora:
            length, share, held = lengths.get(corpus), shares.get(corpus, []), corpus_tokens.get(corpus)
            rows += [
                Condition(
                    f"document length: {corpus}",
                    "thousands of tokens (code files, web pages)",
                    f"{length:,.0f} tokens a document (measured)" if length else "not measured: no fim run completed",
                    None if length is None else length >= LONG_DOCUMENTS,
                    f"the paper's kind from {LONG_DOCUMENTS:,.0f} tokens on",
                ),
                Condition(
                    f"sentinel share: {corpus}",
                    f"at most {1.5 / PAPER_CONTEXT:.2%} (3 sentinels in half the documents, a document a context)",
                    f"{statistics.fmean(share):.2%} of fim's input positions (measured)" if share else "not measured",
                ),
                Condition(
                    f"passes over the text: {corpus}",
                    "about one",
                    _range([t / held for t in self.budgets], lambda v: f"{v:.2f}") if held else "not measured",
                ),
            ]
        cfg = composed_run(planned[0].keys) if planned else None
        recipe = (
            f"{cfg.optimizer.name}, {cfg.scheduler.name} schedule, dropout {cfg.model.dropout:g}, weight decay "
            f"{cfg.optimizer.get('weight_decay', 0.0):g}"
            if cfg is not None
            else "—"
        )
        rows += [
            Condition(
                "context length",
                f"{PAPER_CONTEXT:,}",
                f"{self.seq_len:,}",
                self.seq_len >= PAPER_CONTEXT,
                "a context holds a long document whole or nearly",
            ),
            Condition(
                "what is rearranged",
                "each whole document, before it is cut into contexts",
                f"each document's piece in a window of {self.seq_len:,}: a longer document is rearranged window by "
                "window",
            ),
            Condition("vocabulary", PAPER_VOCAB, f"{self.vocab:,} SentencePiece pieces trained on each corpus"),
            Condition(
                "fim_rate / spm_rate",
                "0.5, PSM and SPM (FIM-50%)",
                f"{FIM_RATE:g} / {SPM_RATE:g} (clm: fim_rate 0)",
                FIM_RATE == 0.5,
            ),
            Condition("optimizer, schedule, regularisation", "Adam, its recipe per size", recipe),
            Condition(
                "what the loss is measured on",
                "left-to-right test loss of plain held-out documents; FIM loss of rearranged ones",
                f"bits per token of {self.eval_batches * self.batch_size} plain held-out windows of {self.seq_len:,} "
                "tokens, the same in both arms; FIM loss on the middles of those windows rearranged at fixed split "
                "points (PSM, SPM)",
            ),
        ]
        return rows

    def _grid_note(self, planned: list[PlannedRun], measured: dict[str, dict[int, FimInputs]]) -> str:
        corpora = ", ".join(self.corpora)
        models = ", ".join(f"{model_label(s)} (width {s.width})" for s in self.shapes)
        text = (
            f"{len(planned)} runs: {_many(len(self.corpora), 'corpus', 'corpora')} ({corpora}) x "
            f"{_many(len(self.shapes), 'model')} ({models}) x {_many(len(self.budgets), 'budget')} "
            f"({', '.join(_count(b) for b in self.budgets)} tokens) x 2 objectives x {_many(self.seeds, 'seed')}. "
            f"Windows of {self.seq_len:,} tokens, {self.batch_size} an optimizer step "
            f"({self.tokens_per_step:,} tokens); each run scores Zorro's fast subset beside its untrained control "
            "when it ends."
        )
        counted = sorted({(m.steps, m.positions) for by_seed in measured.values() for m in by_seed.values()})
        if counted:
            steps, positions = counted[0]
            text += (
                f" The sentinel share is counted over the first {steps} training batches of each fim seed "
                f"({positions:,} input positions), rebuilt in process from the run's own keys and token cache: "
                "lmpt's batches are a function of the seed and the step, so they are the batches the run trained on; "
                "a document's length is measured on the training text of its token cache."
            )
        if self.seeds < 2:
            text += (
                " With one seed there is no interval over seeds (an interval needs 2): no claim is judged from it, "
                "and each stays inconclusive."
            )
        return text

    def _cost_table(self, cells: list[Cell], lengths: dict[str, float], shares: dict[str, list[float]]) -> str:
        rows = []
        for cell in cells:
            clm, fim = cell.values(AR, BITS_PER_TOKEN), cell.values(FIM50, BITS_PER_TOKEN)
            mean, low, high = interval(cell.costs)
            share = shares.get(cell.corpus)
            rows.append(
                [
                    cell.corpus,
                    f"{lengths[cell.corpus]:,.0f}" if cell.corpus in lengths else "—",
                    f"{statistics.fmean(share):.2%}" if share else "—",
                    model_label(cell.shape),
                    _count(cell.tokens),
                    str(len(cell.seeds)),
                    f"{statistics.fmean(clm):.4f}",
                    f"{statistics.fmean(fim):.4f}",
                    spans(mean, low, high),
                    str(within_margin(low, high, MARGIN).value),
                ]
            )
        header = [
            "corpus",
            "tokens a document",
            "sentinel share",
            "model",
            "training tokens",
            "seeds",
            "clm bits/token",
            "fim bits/token",
            "fim - clm, % of clm (95%)",
            f"FIM-for-free (within +-{MARGIN:g}%)",
        ]
        return _markdown(header, rows)

    def _share_table(
        self, cells: list[Cell], measured: dict[str, dict[int, FimInputs]], lengths: dict[str, float]
    ) -> str:
        rows = []
        for cell in cells:
            ratios = [
                cost / (100 * measured[cell.corpus][s].sentinel_share)
                for cost, s in zip(cell.costs, cell.seeds, strict=True)
            ]
            rows.append(
                [
                    model_label(cell.shape),
                    _count(cell.tokens),
                    cell.corpus,
                    f"{lengths[cell.corpus]:,.0f}",
                    f"{statistics.fmean(100 * measured[cell.corpus][s].sentinel_share for s in cell.seeds):.3f}",
                    spans(*interval(cell.costs)),
                    spans(*interval(ratios)),
                ]
            )
        table = _markdown(
            [
                "model",
                "training tokens",
                "corpus",
                "tokens a document",
                "sentinel share, %",
                "cost, % of clm (95%)",
                "cost per point of share (95%)",
            ],
            rows,
        )
        fits = []
        for shape in self.shapes:
            for tokens in self.budgets:
                fit = share_fit([c for c in cells if (c.shape, c.tokens) == (shape, tokens)], measured)
                if fit is not None:
                    (a, a_low, a_high), (k, k_low, k_high) = fit
                    fits.append(
                        f"- {_cell_name(shape, tokens)}: cost = a + k x share over every run, a = "
                        f"{spans(a, a_low, a_high)}% (the cost with no sentinels), k = {spans(k, k_low, k_high)} "
                        "(% of cost per % of positions)"
                    )
        note = (
            "Each run's cost (fim - clm, % of clm's bits per token) against the share of its fim run's input "
            "positions that hold sentinels (measured for its seed). Where the cost is the text the sentinels take, "
            "the cost per point of share is the same on every corpus and a line through the runs passes through 0."
        )
        return "\n\n".join([table, note, "\n".join(fits) or "No fit: it needs two seeds and two corpora."])

    def _fim_table(self, cells: list[Cell]) -> str:
        rows = []
        for cell in cells:
            row = [cell.corpus, model_label(cell.shape), _count(cell.tokens)]
            for form in ("psm", "spm"):
                clm, fim = cell.fim_loss(form)
                diff = interval([f - c for c, f in zip(clm, fim, strict=True)])
                row.append(f"{statistics.fmean(clm):.3f} / {statistics.fmean(fim):.3f} ({spans(*diff, spec='+.3f')})")
            rows.append(row)
        return _markdown(
            ["corpus", "model", "training tokens", "PSM: clm / fim (fim - clm, 95%)", "SPM: the same"], rows
        )

    def _zorro_table(self, cells: list[Cell]) -> str:
        rows = []
        for cell in cells:
            acc = {arm: cell.values(arm, metric_key(ZORRO, ACCURACY)) for arm in ARMS}
            gain = {arm: cell.values(arm, metric_key(ZORRO, ACCURACY_GAIN)) for arm in ARMS}
            if any(math.isnan(v) for v in acc[AR] + acc[FIM50]):
                continue
            diff = interval([f - c for f, c in zip(acc[FIM50], acc[AR], strict=True)])
            rows.append(
                [
                    cell.corpus,
                    model_label(cell.shape),
                    _count(cell.tokens),
                    *(f"{statistics.fmean(acc[a]):.3f} ({statistics.fmean(gain[a]):+.3f})" for a in ARMS),
                    spans(*diff, spec="+.3f"),
                ]
            )
        header = ["corpus", "model", "training tokens", "clm: accuracy (gain)", "fim: the same", "fim - clm (95%)"]
        return _markdown(header, rows) if rows else "No run scored Zorro."

    def _every_run(self, finished: list[FinishedRun], measured: dict[str, dict[int, FimInputs]]) -> str:
        rows = []
        for run in finished:
            labels = run.planned.labels
            inputs = measured.get(labels["corpus"], {}).get(labels["seed"])
            share = f"{inputs.sentinel_share:.4%}" if inputs is not None and labels["objective"] == FIM50 else "—"
            rows.append(
                [
                    run.planned.name,
                    f"{run.last('val_bits_per_token'):.4f}",
                    f"{run.last('val_fim_psm_loss') / math.log(2):.4f}",
                    f"{run.last('val_fim_spm_loss') / math.log(2):.4f}",
                    _figure(run.last(metric_key(ZORRO, ACCURACY)), ".3f"),
                    share,
                    f"{float(run.status.get('train_s', math.nan)):.1f}",
                ]
            )
        header = [
            "run",
            BITS_PER_TOKEN,
            "FIM loss PSM (bits)",
            "FIM loss SPM (bits)",
            "Zorro accuracy",
            "sentinel share (its first batches)",
            "train s",
        ]
        return _markdown(header, rows) if rows else "No run completed yet."

    def _headline(self, cells: list[Cell], lengths: dict[str, float]) -> str:
        if not cells:
            return "no runs yet"
        top = max(cells, key=lambda c: (c.shape.width, c.tokens))
        mine = sorted(
            (c for c in cells if (c.shape, c.tokens) == (top.shape, top.tokens) and c.corpus in lengths),
            key=lambda c: lengths[c.corpus],
        )
        costs = ", ".join(f"{c.corpus} {statistics.fmean(c.costs):+.2f}%" for c in mine)
        return f"fim - clm ({top.name}): {costs}"

    def _plot(self, cells: list[Cell], measured: dict[str, dict[int, FimInputs]]) -> Figure | None:
        if not cells:
            return None
        figure = Figure(figsize=(11, 4.5), layout="constrained")
        by_share, by_length = figure.subplots(1, 2)
        for shape in self.shapes:
            for tokens in self.budgets:
                mine = [c for c in cells if (c.shape, c.tokens) == (shape, tokens)]
                if not mine:
                    continue
                xs = [statistics.fmean(100 * measured[c.corpus][s].sentinel_share for s in c.seeds) for c in mine]
                lengths = [next(iter(measured[c.corpus].values())).mean_document for c in mine]
                figures = [interval(c.costs) for c in mine]
                ys = [m for m, _, _ in figures]
                errors = [0.0 if math.isnan(lo) else m - lo for m, lo, _ in figures]
                label = _cell_name(shape, tokens)
                drawn = by_share.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, linestyle="none", label=label)
                by_length.errorbar(lengths, ys, yerr=errors, marker="o", capsize=3, linestyle="none", label=label)
                fit = share_fit(mine, measured)
                if fit is not None:  # the line through the runs: cost = a + k x share
                    (a, _, _), (k, _, _) = fit
                    ends = [0.0, max(xs)]
                    by_share.plot(ends, [a + k * x for x in ends], ls="--", lw=1, color=drawn.lines[0].get_color())
                for x, length, y, c in zip(xs, lengths, ys, mine, strict=True):
                    by_share.annotate(c.corpus, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
                    by_length.annotate(c.corpus, (length, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        for ax, xlabel in (
            (by_share, "sentinel share of fim's input positions, % (measured)"),
            (by_length, "mean document length, tokens (measured)"),
        ):
            ax.axhline(0.0, color="grey", lw=0.8)
            ax.axhspan(-MARGIN, MARGIN, color="tab:green", alpha=0.08)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("fim - clm, % of clm's bits per token (95%)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        by_share.set_xlim(left=0)
        by_length.set_xscale("log")
        figure.suptitle("FIM's left-to-right cost against the text its sentinels take", fontsize=11)
        return figure


def model_label(shape: Shape) -> str:
    """A ladder rung's name: micro or tiny where it is that model group's shape, else wWIDTH."""
    names = {width: name for name, width in NAMED_WIDTHS.items()}
    return names.get(shape.width, shape.label)


def share_fit(
    cells: list[Cell], measured: dict[str, dict[int, FimInputs]]
) -> tuple[tuple[float, float, float], tuple[float, float, float]] | None:
    """(intercept, low, high), (slope, low, high): the least-squares line through every run's (sentinel share in %,
    cost in %) of one model and budget, with 95% t intervals; None with a cell of fewer than 2 seeds or fewer than 2
    shares."""
    if len(cells) < 2 or any(len(c.seeds) < 2 for c in cells):
        return None
    xs = [100 * measured[c.corpus][s].sentinel_share for c in cells for s in c.seeds]
    ys = [cost for c in cells for cost in c.costs]
    if len(set(xs)) < 2 or len(xs) < 3:
        return None
    fit = stats.linregress(xs, ys)
    t = float(stats.t.ppf(0.975, len(xs) - 2))
    a, a_err, k, k_err = float(fit.intercept), float(fit.intercept_stderr), float(fit.slope), float(fit.stderr)
    return (a, a - t * a_err, a + t * a_err), (k, k - t * k_err, k + t * k_err)


def _welch(first: list[float], second: list[float]) -> tuple[float, float]:
    """The 95% interval of mean(first) - mean(second) (Welch's t); NaN ends with fewer than 2 of either."""
    if len(first) < 2 or len(second) < 2:
        return math.nan, math.nan
    span = stats.ttest_ind(first, second, equal_var=False).confidence_interval(0.95)
    return float(span.low), float(span.high)


def _width(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise LmptError(
            f"ladder={raw} must be a model width (a whole number) or one of {', '.join(NAMED_WIDTHS)}"
        ) from None


def _cell_name(shape: Shape, tokens: int) -> str:
    return f"{model_label(shape)}, {_count(tokens)} tokens"


def _count(value: float) -> str:
    """A count in a few characters: 0.37M, 54.5M, 1.1B, 300k."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def _range(values: Sequence[float], show: Callable[[float], str]) -> str:
    low, high = min(values), max(values)
    return show(low) if low == high else f"{show(low)} to {show(high)}"


def _missing(runs: list[PlannedRun]) -> str:
    names = [r.name for r in runs]
    if not names:
        return "its runs are missing"
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"runs not completed: {shown}"


def _also_missing(runs: list[PlannedRun]) -> str:
    return f"; {len(runs)} planned run(s) not completed" if runs else ""


def _many(n: int, word: str, plural: str = "") -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _figure(value: float, spec: str) -> str:
    return "—" if math.isnan(value) else f"{value:{spec}}"


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(markdown_table(header, rows))
