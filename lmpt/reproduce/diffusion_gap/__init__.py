"""lmpt-reproduce diffusion-gap: masked diffusion's likelihood gap to autoregression as training tokens grow (Sahoo et
al. 2024; Nie et al. 2024). Its grid (plan.py), the gap and its measures (gap.py), the claims and their conditions
(findings.py), the document's sections and plot (document.py), and the reproduction that composes them
(reproduction.py)."""
