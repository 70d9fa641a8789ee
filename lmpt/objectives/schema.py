"""The base of every objective's typed config schema. Each objective's own schema lives in its module beside it
(`ClmConfig` in clm.py, ...) and is the class's `config_class`; the registry hands them to Hydra's ConfigStore.
The string under each field is its documentation (`lmpt --help` and the README's table come from it)."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING


@dataclass
class ObjectiveConfig:
    name: str = MISSING
    """Objective: clm, mlm, nsp, electra, span, prefix, ul2-mixture, mtp, fim, clm-then-mlm, gpt-bert or mdlm."""
