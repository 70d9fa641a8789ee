"""After pre-training: load a run or checkpoint, generate, fill masks, evaluate on any text, export to
Hugging Face transformers. Each command takes a run (or checkpoint) directory and key=value options."""
