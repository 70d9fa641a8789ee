"""Zero-shot scoring: multiple-choice questions and minimal pairs scored by the model, and the gain over the control."""
