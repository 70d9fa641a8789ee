"""Repetition as Muennighoff et al. 2023 fit it: the data-constrained law with both of its decays, repeated data (R_D*)
and parameters in excess of the compute-optimal size for the unique data (R_N*), fitted jointly as their notebook
does (lmpt.reproduce.data_constrained_law), beside the one-term fit that decays data alone; for clm and for masked
diffusion (mdlm), whose R_D* Prabhudesai et al. 2025 find far larger. The grid and its runs are
lmpt.reproduce.repetition.plan's; this module says what it checks and reads what the runs show (the fits, the claims
and their conditions, the document's sections and plot)."""

from __future__ import annotations

from typing import ClassVar

from lmpt.reproduce.data_constrained_law import PAPER_DATA_ONLY_R_D_STAR, PAPER_LAW
from lmpt.reproduce.repetition.document import every_run_section, fit_section, headline, left_out_section, plot
from lmpt.reproduce.repetition.findings import DIFFUSION_R_D_STAR, conditions, diffusion_claim, star_claim
from lmpt.reproduce.repetition.fit import fit, point, recover_constants
from lmpt.reproduce.repetition.free_epochs import free
from lmpt.reproduce.repetition.plan import OBJECTIVES, RepetitionGrid
from lmpt.reproduce.reproduction import AR, Findings, FinishedRun


class Repetition(RepetitionGrid):
    name: ClassVar[str] = "repetition"
    title: ClassVar[str] = (
        "repeated data and excess parameters: the data-constrained law's R_D* and R_N* (Muennighoff 2023)"
    )
    paper: ClassVar[str] = (
        'Muennighoff, Rush, Barak, Le Scao, Piktus, Tazi, Pyysalo, Wolf and Raffel (2023), "Scaling Data-Constrained '
        'Language Models", arXiv:2305.16264 (its fit: huggingface/datablations, utils/parametric_fit.ipynb); with '
        'Prabhudesai, Wu, Zadeh, Fragkiadaki and Pathak (2025), "Diffusion Beats Autoregressive in Data-Constrained '
        'Settings", arXiv:2507.15857'
    )
    claim: ClassVar[str] = (
        "Muennighoff et al., Section 5 and Figures 3 to 5: loss follows L = E + A / N'^alpha + B / D'^beta, where "
        "repeated data decays with R_D* = 15.4 and parameters in excess of the compute-optimal size for the unique "
        "data with R_N* = 5.3, fitted jointly; 4 epochs of repeated data are nearly as good as unique data. "
        "Prabhudesai et al.: masked diffusion's R_D* is far larger than autoregression's."
    )
    papers_figures: ClassVar[str] = (
        f'- R_D* = {PAPER_LAW.r_d_star:.2f} and R_N* = {PAPER_LAW.r_n_star:.2f} (the notebook\'s "Default": '
        "stage 1 E, A, B, alpha = beta from Chinchilla's C4 iso-FLOP points, then both decays jointly on 182 runs "
        "by a Huber loss on log loss, L-BFGS from a grid of starts).\n"
        f'- With parameters left undecayed ("Default but decay data only not params"): R_D* = '
        f"{PAPER_DATA_ONLY_R_D_STAR:.2f}: the excess-parameter decay, left out, is loaded onto R_D*.\n"
        "- 4 epochs: a negligible change in loss against unique data at the same compute (Figure 3).\n"
        f"- Masked diffusion: R_D* about {DIFFUSION_R_D_STAR:g} (Prabhudesai et al., a fit of the same form).\n"
        "- The fitted runs: 7.1M to 8.7B parameters, 100M to 178B unique tokens, 1 to 9,000 epochs, GPT-2's "
        "50,257-piece vocabulary, 2,048 positions, C4's held-out loss in nats; the notebook's data cell leaves out "
        'runs by hand ("outliers removed"), among them runs that blew up past a uniform guess (1.5B parameters at '
        "660 epochs: 11.02 nats)."
    )
    cost_note: ClassVar[str] = (
        "`scale=laptop` is sized to finish in about 90 minutes on 2 CPU cores (one thread a run); the dry run "
        "(`dry_run=true`) prints every run, its FLOPs (lmpt's count and the paper's 6ND) and the time before "
        "anything starts. `scale=paper` plans the paper's smallest U (100M tokens of C4) with a ladder from the "
        "paper's smallest model up, GPT-2's vocabulary and 2,048 positions: run it with `device=gpu` or "
        "`launcher=slurm` (its dry run states its GPU-hours). Every grid key changes the grid: `ladder`, `budgets`, "
        "`unique_tokens`, `epochs`, `corpus`, and `seeds`."
    )

    def analyse(self, finished: list[FinishedRun]) -> Findings:
        planned = self.runs()
        done = {run.planned.name for run in finished}
        points = [point(run) for run in finished]
        fits = {
            objective: fit(
                objective,
                [p for p in points if p.objective == objective],
                [r.name for r in planned if r.labels["objective"] == objective and r.name not in done],
                self.recipe.vocab,
            )
            for objective in OBJECTIVES
        }
        recovered = recover_constants(fits[AR].both, planned)
        table = conditions(self, planned, recovered)
        named = {c.name: c for c in table}
        scale = (
            "parameters",
            "unique tokens U",
            "epochs",
            "a compute-optimal rung at each budget",
            "the base law's runs",
        )
        scale_conditions = [named[n] for n in scale]
        identify = [named[n] for n in ("excess parameters", "the grid identifies the law") if n in named]
        clm_loss = named["loss (clm)"]
        four_epochs = free(self, points, planned, done)
        claims = [
            star_claim(
                "R_D* of autoregression is 15.4",
                fits[AR],
                "r_d_star",
                PAPER_LAW.r_d_star,
                [*scale_conditions, *identify, clm_loss],
            ),
            star_claim(
                "R_N* of autoregression is 5.3",
                fits[AR],
                "r_n_star",
                PAPER_LAW.r_n_star,
                [*scale_conditions, *identify, clm_loss],
            ),
            four_epochs["claim"],
            diffusion_claim(fits, [named["parameters (diffusion)"], *identify[:1], named["loss (mdlm)"]]),
        ]
        sections = [
            ("The fit: R_D* and R_N* with their 95% intervals", fit_section(fits)),
            ("Is 4 epochs nearly free?", four_epochs["section"]),
            ("Runs left out of the fit", left_out_section(fits)),
            ("Every run", every_run_section(finished, fits)),
        ]
        return Findings(claims, table, headline(fits, four_epochs["share"]), sections, plot(self, finished, fits))
