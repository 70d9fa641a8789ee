"""Every private API of another library that lmpt uses, each behind one function here and nowhere else, with the
version it was written against (`WRITTEN_AGAINST`). A release that moves one breaks this module alone, and
tests/test_private_api.py, which exercises each function, names the version in its failure.

- Hydra's command-line parser (`hydra._internal.utils.get_args_parser`): lmpt reads the command line as Hydra will,
  before Hydra runs, to resume a run and to check launcher settings Hydra passes on unread.
- Hydra's basic sweeper (`hydra._internal.core_plugins.basic_sweeper.BasicSweeper`): how many jobs a sweep runs,
  counted as the sweeper counts them.
- torch.optim.Muon's Newton-Schulz iteration (`torch.optim._muon._zeropower_via_newtonschulz`): PyTorch's Muon takes
  no dtype for it, so lmpt swaps in its float32 iteration where bf16 would be emulated (lmpt.train.optim).
- torch.distributed.checkpoint's nested-state setter (`torch.distributed.checkpoint._traverse.set_element`): lmpt's
  safe loader of sharded checkpoints puts each tensor where DCP's own planner would."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from hydra.core.override_parser.types import Override

WRITTEN_AGAINST = {"hydra-core": "1.3.8", "torch": "2.13.0"}
"""The releases each function below was written and tested against."""


def hydra_args_parser() -> argparse.ArgumentParser:
    """Hydra's own parser of an application's command line (overrides, --multirun, --help, ...)."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
"""The `_target_` of Hydra's default sweeper in a sweep's hydra config."""


def basic_sweep_jobs(overrides: list[Override]) -> int:
    """How many jobs Hydra's basic sweeper makes of parsed `overrides` (the product of its sweep values, as it counts
    them); HydraException when it cannot split them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return len(BasicSweeper.split_arguments(overrides, None)[0])


NewtonSchulz = Callable[["torch.Tensor", tuple[float, float, float], int, float], "torch.Tensor"]
"""torch.optim.Muon's orthogonalisation: (update, coefficients, steps, eps) -> the orthogonalised update."""


@contextlib.contextmanager
def muon_newton_schulz(iteration: NewtonSchulz) -> Iterator[None]:
    """torch.optim.Muon's steps inside this block orthogonalise with `iteration` instead of PyTorch's; PyTorch's is
    put back after."""
    import torch.optim._muon as torch_muon

    own = torch_muon._zeropower_via_newtonschulz
    torch_muon._zeropower_via_newtonschulz = iteration  # type: ignore[assignment]  # any function of its signature
    try:
        yield
    finally:
        torch_muon._zeropower_via_newtonschulz = own


def muon_default_newton_schulz() -> NewtonSchulz:
    """PyTorch's own iteration (bf16), outside `muon_newton_schulz`."""
    import torch.optim._muon as torch_muon

    return torch_muon._zeropower_via_newtonschulz


def set_nested_element(state: dict[str, Any], path: tuple[str | int, ...], value: object) -> None:
    """Put `value` at `path` (an object path of DCP's flattening mappings) inside the nested `state` dict."""
    from torch.distributed.checkpoint._traverse import set_element

    set_element(state, path, value)
