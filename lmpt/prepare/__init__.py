"""`lmpt-prepare`: the tokenizer and token cache of a run's data, built without training."""
