"""Fill-in-the-middle for free (Bavarian et al. 2022): a model trained with 50% of its documents rearranged has the
same left-to-right test loss as one trained with none, and a far lower FIM loss; and whether what it costs at lmpt's
scale is the text its sentinels take (a share that falls as documents lengthen) rather than capacity. The grid and
its runs are lmpt.reproduce.fim.plan's; this module says what it checks and reads what the runs show: what each
corpus's documents are, and the share of fim's input positions that hold sentinels, measured from the text
(lmpt.reproduce.fim.inputs), then the claims, their conditions and the document's sections and plot."""

from __future__ import annotations

from typing import ClassVar

from lmpt.reproduce.fim.cells import paired_cells
from lmpt.reproduce.fim.document import (
    cost_table,
    every_run,
    fim_table,
    grid_note,
    headline,
    plot,
    share_table,
    zorro_table,
)
from lmpt.reproduce.fim.findings import conditions, falls_claim, fim_loss_claim, free_claim, proportional_claim
from lmpt.reproduce.fim.inputs import FimInputs, measure_inputs
from lmpt.reproduce.fim.plan import PAPER_CONTEXT, FimGrid
from lmpt.reproduce.reproduction import Findings, FinishedRun, Scale

MEASURED_STEPS = 100
"""Training steps of each fim seed whose batches the sentinel share is counted over (the run's first)."""


class FimForFree(FimGrid):
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

    def __init__(self, scale: Scale = Scale.laptop, seeds: int | None = None, **given: list[str]) -> None:
        super().__init__(scale, seeds, **given)
        self._inputs: dict[tuple[str, int], FimInputs] = {}

    def inputs(self, corpus: str, seed: int, run: FinishedRun) -> FimInputs:
        """The measured text and sentinel share of `corpus` for the fim run of `seed` (its first batches)."""
        if (corpus, seed) not in self._inputs:
            self._inputs[corpus, seed] = measure_inputs(run.planned.keys, MEASURED_STEPS)
        return self._inputs[corpus, seed]

    def analyse(self, finished: list[FinishedRun]) -> Findings:
        planned = self.runs()
        cells = paired_cells(self, finished)
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
        table = conditions(self, lengths, shares, corpus_tokens, planned)
        general = [c for c in table if c.name in ("non-embedding parameters", "tokens per non-embedding parameter")]
        context = [c for c in table if c.name == "context length"]
        claims = []
        for corpus in self.corpora:
            mine = [c for c in cells if c.corpus == corpus]
            long = [c for c in table if c.name == f"document length: {corpus}"]
            claims.append(free_claim(self, corpus, mine, lengths.get(corpus), missing, [*general, *long, *context]))
        claims.append(fim_loss_claim(self, cells, missing, general))
        if len(self.corpora) >= 2:
            claims.append(falls_claim(self, cells, lengths, missing))
            claims.append(proportional_claim(self, cells, measured, missing))
        sections = [
            ("The grid", grid_note(self, planned, measured)),
            ("Left to right: fim's cost by document length", cost_table(cells, lengths, shares)),
            ("Is the cost the text the sentinels take?", share_table(self, cells, measured, lengths)),
            ("The FIM loss: the same held-out windows rearranged, bits per middle token", fim_table(cells)),
            (
                "Zorro beside the untrained control (not in the paper: whether FIM costs grammar)",
                "Zorro's fast subset (minimal pairs in a child's vocabulary; ties counted wrong), scored zero-shot by "
                "each sentence's log-likelihood after each run, beside the same decoder untrained (its gain).\n\n"
                + zorro_table(cells),
            ),
            ("Every run", every_run(finished, measured)),
        ]
        return Findings(claims, table, headline(cells, lengths), sections, plot(self, cells, measured))
