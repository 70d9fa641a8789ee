"""The training loop and the components it composes: optimizer, schedule, checkpoints, metrics, console."""
