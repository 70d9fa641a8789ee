"""`lmpt-preview`: what an objective makes of real text (inputs, corruption, targets), before any training."""
