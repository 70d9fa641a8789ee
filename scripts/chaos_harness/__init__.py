"""The pieces of `scripts/chaos.py`: the cases it runs, one killed attempt, and the report it prints."""
