"""`lmpt-study`: compare objectives at one equal budget, each at its own searched learning rate, over seeds, ranked
by downstream figures (lmpt.study.cli)."""
