"""Published results, reproduced: `lmpt-reproduce NAME` runs a paper's comparison as a grid of ordinary lmpt runs and
writes docs/reproductions/NAME.md with the paper's figure beside lmpt's (lmpt.reproduce.reproduction)."""
