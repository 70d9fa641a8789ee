"""lmpt-reproduce repetition: the data-constrained law's R_D* and R_N* (Muennighoff et al. 2023), for clm and mdlm.
Its grid (plan.py), the fit of each objective (fit.py), the claims on the constants and their conditions
(findings.py), "4 epochs nearly free" (free_epochs.py), the document's sections and plot (document.py), and the
reproduction that composes them (reproduction.py)."""
