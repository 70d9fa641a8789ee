"""Data quality for lmpt-prepare and lmpt: deduplication, heuristic filters and decontamination on datatrove."""
