"""The live one-node SLURM cluster of tests/train (its `slurm_cluster` fixture, reused as it is) for the quality
stage's soak tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_TRAIN = Path(__file__).resolve().parents[1] / "train"
if str(_TRAIN) not in sys.path:
    sys.path.insert(0, str(_TRAIN))  # tests/train/conftest.py imports its slurm_cluster module from there
_spec = importlib.util.spec_from_file_location("lmpt_tests_train_conftest", _TRAIN / "conftest.py")
_train_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_train_conftest)

slurm_cluster = _train_conftest.slurm_cluster
