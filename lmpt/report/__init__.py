"""Run and sweep reports: read run directories, tabulate them, plot their validation-loss curves."""
