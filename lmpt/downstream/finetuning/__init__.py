"""Fine-tuning on a labelled task: encoding, the head, the recipe search, seeds, the floors and the shared control."""
