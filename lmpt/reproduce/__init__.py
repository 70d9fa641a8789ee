"""Published results, reproduced: `lmpt-reproduce NAME` runs a paper's comparison as a grid of ordinary lmpt runs and
writes its document beside the runs: each named claim with its verdict (lmpt.reproduce.verdict), the conditions it
depends on, and the paper's figures beside lmpt's (lmpt.reproduce.reproduction)."""
