"""Each private API lmpt uses, through its one wrapper (lmpt.private_api), still does what lmpt relies on. A failure
names the release the wrapper was written against: a newer one moved or changed that API, and the wrapper (only it)
needs mending."""

import importlib.metadata

import pytest
import torch

from lmpt.private_api import (
    BASIC_SWEEPER,
    WRITTEN_AGAINST,
    basic_sweep_jobs,
    hydra_args_parser,
    muon_default_newton_schulz,
    muon_newton_schulz,
    set_nested_element,
)


def _against(package: str) -> str:
    installed = importlib.metadata.version(package)
    return f"written against {package} {WRITTEN_AGAINST[package]}, {installed} installed: mend lmpt/private_api.py"


def test_hydras_parser_reads_an_applications_command_line() -> None:
    args = hydra_args_parser().parse_args(["-m", "objective=mlm", "trainer.max_steps=5"])
    assert args.multirun and args.overrides == ["objective=mlm", "trainer.max_steps=5"], _against("hydra-core")
    assert not args.help and not args.info, _against("hydra-core")


def test_the_basic_sweeper_counts_a_sweeps_jobs_as_hydra_does() -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = OverridesParser.create().parse_overrides(["a=1,2,3", "b=x,y", "c=5"])
    assert basic_sweep_jobs(overrides) == 6, _against("hydra-core")
    from hydra.core.plugins import Plugins  # the sweeper's _target_ in a sweep's config is this class's path
    from hydra.plugins.sweeper import Sweeper

    sweepers = {f"{p.__module__}.{p.__name__}" for p in Plugins.instance().discover(Sweeper)}
    assert BASIC_SWEEPER in sweepers, _against("hydra-core")


def test_muons_iteration_is_swapped_for_the_block_and_put_back() -> None:
    calls = []

    def iteration(grad, coefficients, steps, eps):
        calls.append(grad.shape)
        return torch.zeros_like(grad)

    torchs = muon_default_newton_schulz()
    weight = torch.nn.Parameter(torch.ones(4, 6))
    weight.grad = torch.ones(4, 6)
    muon = torch.optim.Muon([weight], lr=0.1, weight_decay=0.0, momentum=0.0, nesterov=False)
    with muon_newton_schulz(iteration):
        muon.step()
    assert calls == [(4, 6)], _against("torch")  # Muon's step went through the swapped iteration
    assert torch.equal(weight.detach(), torch.ones(4, 6)), _against("torch")  # a zero update moved nothing
    assert muon_default_newton_schulz() is torchs, _against("torch")
    with pytest.raises(RuntimeError), muon_newton_schulz(iteration):
        raise RuntimeError("a step that fails")
    assert muon_default_newton_schulz() is torchs, _against("torch")  # put back after a failure too


def test_dcps_setter_puts_a_value_at_a_nested_path() -> None:
    state = {"model": {"layers": [{"w": None}, {"w": None}]}}
    set_nested_element(state, ("model", "layers", 1, "w"), torch.ones(2))
    assert torch.equal(state["model"]["layers"][1]["w"], torch.ones(2)), _against("torch")
    assert state["model"]["layers"][0]["w"] is None, _against("torch")
