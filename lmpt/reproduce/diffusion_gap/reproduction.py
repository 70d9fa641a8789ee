"""Masked diffusion's likelihood gap to autoregression narrows as training tokens grow (Sahoo et al. 2024, Tables 1
and 2; Nie et al. 2024: about 16 times the compute to match). The grid and its runs are
lmpt.reproduce.diffusion_gap.plan's; this module says what it checks and reads what the runs show (the gap and its
measures, the claims and their conditions, the document's sections and plot)."""

from __future__ import annotations

import statistics
from typing import ClassVar

from lmpt.reproduce.diffusion_gap.document import (
    every_run,
    gap_row,
    gap_section,
    grid_text,
    multiplier_row,
    multiplier_section,
    papers_figures,
    plot,
    slope_section,
    sweep_section,
)
from lmpt.reproduce.diffusion_gap.findings import NEEDS, conditions, multiplier_claim, narrowing_claim
from lmpt.reproduce.diffusion_gap.gap import (
    Bits,
    Cell,
    held_out_bits,
    paired,
    paper_slope,
    relative_gap,
    run_key,
    slope,
)
from lmpt.reproduce.diffusion_gap.plan import OBJECTIVES, GapGrid
from lmpt.reproduce.figures import mean_cell
from lmpt.reproduce.reproduction import AR, DIFFUSION, Findings, FinishedRun


class DiffusionGap(GapGrid):
    name: ClassVar[str] = "diffusion-gap"
    title: ClassVar[str] = "masked diffusion's likelihood gap to autoregression as training tokens grow (Sahoo 2024)"
    paper: ClassVar[str] = (
        'Sahoo, Arriola, Schiff, Gokaslan, Marroquin, Chiu, Rush and Kuleshov (2024), "Simple and Effective Masked '
        'Diffusion Language Models", arXiv:2406.07524; with Nie et al. (2024), "Scaling up Masked Diffusion Models '
        'on Text", arXiv:2410.18514'
    )
    claim: ClassVar[str] = (
        "Masked diffusion's likelihood gap to autoregression narrows as training tokens grow: Sahoo et al., Tables 1 "
        "and 2, MDLM's perplexity bound on LM1B 27.04 against AR's 22.32 at 33B tokens and 23.00 against 20.86 at "
        "327B; Nie et al.: masked diffusion matches autoregression at about 16 times the compute."
    )
    papers_figures: ClassVar[str] = papers_figures()
    cost_note: ClassVar[str] = (
        "scale=laptop is what 2 CPU cores finish in about 90 minutes, one thread a run; the dry run "
        "(`lmpt-reproduce diffusion-gap dry_run=true`) states every run, its FLOPs and the time before anything "
        "starts, and `max_minutes` refuses a longer plan. `ladder`, `budgets`, `corpus` and `seeds` change the grid; "
        "a budget the text cannot hold once is refused, saying how much text it needs. scale=paper plans Sahoo et "
        "al.'s LM1B configuration (the model groups small and base, the largest about 110M parameters, a 30,522-piece "
        "vocabulary, 128 tokens of context, 33B to 327B tokens at batch 512, the paper's recipe) on a corpus that can "
        "give 327B tokens once (`corpus=`: LM1B holds about 0.8B words, which the paper reads many times); its dry "
        "run prints the GPU-hours, and it runs where GPUs (device=gpu) or SLURM (launcher=slurm) are."
    )

    def analyse(self, finished: list[FinishedRun]) -> Findings:
        bits = held_out_bits(finished)
        best = {
            (s.label, t, o): self._cell(bits, s.label, t, o)
            for s in self.ladder
            for t in self.tokens
            for o in OBJECTIVES
        }
        table = conditions(self, best)
        needs = [c for c in table if c.name in NEEDS]
        sizing = [*needs, *(c for c in table if c.name == "sizing")]
        claims, gap_rows, slope_rows, multiplier_rows, headline = [], [], [], [], []
        for shape in self.ladder:
            label = shape.label
            planned = [r for r in self.runs() if r.labels["model"] == label]
            missing = [r.name for r in planned if run_key(r.labels) not in bits]
            cells = {t: paired(best[label, t, AR].figures, best[label, t, DIFFUSION].figures) for t in self.tokens}
            gap_rows += [gap_row(shape, t, cells[t]) for t in self.tokens]
            complete = [s for s in range(self.seeds) if all(s in cells[t] for t in self.tokens)]
            slopes = [slope(self.tokens, [relative_gap(*cells[t][s]) for t in self.tokens]) for s in complete]
            narrowing = narrowing_claim(label, slopes, missing, needs)
            mean = mean_cell(slopes, "+.2f")
            each = ", ".join(f"{v:+.2f}" for v in slopes) or "—"
            slope_rows.append([label, each, mean, f"{paper_slope():+.2f}", narrowing.word])
            claims += [narrowing, multiplier_claim(self, label, cells, missing, sizing)]
            multiplier_rows += [multiplier_row(self, label, t, cells) for t in self.tokens[:-1]]
            ends = [cells[t] for t in (self.tokens[0], self.tokens[-1])]
            if all(ends):
                rise = [statistics.fmean(relative_gap(*p) for p in end.values()) for end in ends]
                headline.append(f"{label} {rise[0]:+.0%} to {rise[1]:+.0%}")
        sections = [
            ("The grid", grid_text(self)),
            ("The gap, per size and budget", gap_section(gap_rows)),
            ("Does it narrow?", slope_section(slope_rows)),
            ("The compute multiplier", multiplier_section(self, multiplier_rows)),
            *sweep_section(self, best),
            ("Every run", every_run(finished)),
        ]
        words = "mdlm's bound over clm's figure, smallest to largest budget: " + ", ".join(headline)
        return Findings(claims, table, words if headline else "no runs yet", sections, plot(self, best))

    def _cell(self, bits: Bits, label: str, tokens: int, objective: str) -> Cell:
        return Cell(
            {
                f: {s: bits[k] for s in range(self.seeds) if (k := (label, tokens, objective, f, s)) in bits}
                for f in self.recipe.factors(objective)
            }
        )
