"""Text sources, the memory-mapped token cache, and the deterministic window sampler."""
