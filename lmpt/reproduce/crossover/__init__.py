"""lmpt-reproduce crossover: when masked diffusion overtakes autoregression on repeated data (Prabhudesai et al. 2025).
Its grid (plan.py), frontiers and crossings (frontier.py), conditions and claims (findings.py), document sections and
plot (document.py), and the reproduction that composes them (reproduction.py)."""
