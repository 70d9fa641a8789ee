"""Pre-training objectives: pure transforms from token windows to batches, each with its loss."""
