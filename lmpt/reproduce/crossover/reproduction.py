"""When masked diffusion overtakes autoregression on repeated data (Prabhudesai et al. 2025, "Diffusion Beats
Autoregressive in Data-Constrained Settings", arXiv:2507.15857): the compute at which mdlm's frontier first falls below
clm's, per count of unique tokens U, beside the paper's law C_crit(U) = 2.12e15 (U / 1e6)^2.174 FLOPs. The grid and its
runs are lmpt.reproduce.crossover.plan's; this module says what it checks and reads what the runs show (frontiers and
crossings, the claims and their conditions, the document's sections and plot)."""

from __future__ import annotations

from typing import ClassVar

from lmpt.reproduce.crossover.document import (
    crossings_section,
    flops_section,
    grid_section,
    headline,
    plot,
    runs_section,
)
from lmpt.reproduce.crossover.findings import PAPER_RECIPE, conditions, exponent_claim, near_claim, reach_condition
from lmpt.reproduce.crossover.frontier import at_unique
from lmpt.reproduce.crossover.plan import CrossoverGrid
from lmpt.reproduce.reproduction import Findings, FinishedRun


class Crossover(CrossoverGrid):
    name: ClassVar[str] = "crossover"
    title: ClassVar[str] = "when diffusion overtakes autoregression: critical compute on a frontier (Prabhudesai 2025)"
    paper: ClassVar[str] = (
        'Prabhudesai, Wu, Zadeh, Fragkiadaki and Pathak (2025), "Diffusion Beats Autoregressive in Data-Constrained '
        'Settings", arXiv:2507.15857'
    )
    claim: ClassVar[str] = (
        'The project page\'s "Linear Fit of Critical Compute": on frontiers over compute-optimal model sizes, masked '
        "diffusion's validation loss falls below autoregression's once compute (6 N D) passes C_crit(U) = 2.12e15 "
        "(U / 1e6)^2.174 FLOPs, U the unique tokens."
    )
    papers_figures: ClassVar[str] = (
        "C_crit(U) = 2.12e15 x (U / 1e6)^2.174 FLOPs (6 N D, N with the embedding), fitted through crossings at 25M to "
        "100M unique tokens with models of 7M to 2.5B parameters and up to 800 epochs, each objective trained with "
        f"{PAPER_RECIPE}, on C4 with GPT-2's 50,257-piece tokenizer and a 2,048-token context. Their frontiers are the "
        "best validation loss at each compute over every model size and epoch count."
    )
    cost_note: ClassVar[str] = (
        "scale=laptop is what 2 CPU cores finish in about 90 minutes (`dry_run=true` states the plan's time before "
        "anything starts; `max_minutes` refuses a longer one). `lmpt-reproduce crossover scale=paper` plans the "
        "paper's smallest count of unique tokens with a ladder of sizes over the paper's range at its vocabulary, "
        "context and batch, to run on GPUs (`device=gpu`) or SLURM (`launcher=slurm`); its text must hold that many "
        "tokens: give the paper's, C4, as `corpus=PATH`. `corpus`, `ladder`, `unique_tokens` and `epochs` change "
        "either grid."
    )

    def analyse(self, finished: list[FinishedRun]) -> Findings:
        planned = self.runs()
        found = [at_unique(unique, planned, finished, self.seeds) for unique in self.unique]
        general = conditions(self, planned, found)
        claims = [near_claim(at, general) for at in found]
        if len(found) > 1:
            claims.append(exponent_claim(found, general, self.seeds))
        table = [*general.values(), reach_condition(found)]
        sections = [
            ("The critical compute, per count of unique tokens", crossings_section(found)),
            ("The grid: compute-optimal sizes per budget", grid_section(self, planned)),
            ("Two counts of compute", flops_section(planned)),
            ("Every run", runs_section(found)),
        ]
        return Findings(claims, table, headline(found), sections, plot(self, found))
