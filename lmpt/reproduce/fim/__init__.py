"""lmpt-reproduce fim: fill-in-the-middle for free (Bavarian et al. 2022), and what it costs on short documents. Its
grid (plan.py), what the training inputs hold (inputs.py), the cells of runs paired by seed and their statistics
(cells.py), the claims and their conditions (findings.py), the document's sections and plot (document.py), and the
reproduction that composes them (reproduction.py)."""
