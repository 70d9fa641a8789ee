"""The run directory: its layout and status, checkpoints, lock, log, drift check, and loading a trained run."""
