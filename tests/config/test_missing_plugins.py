"""A Hydra plugin option whose plugin is not installed (a bare `pip install .` has none) names the extra of lmpt that
brings it, in one line, instead of Hydra's "Could not load" or a list of the options that are installed."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
from hydra.errors import MissingConfigException

from lmpt.config.errors import PLUGIN_EXTRAS, describe

# What Hydra 1.3 raises in an environment without the plugin, as seen in a bare install.
HYDRA_MESSAGES = {
    "parallel": "In 'hydra/launcher/parallel': Could not load 'hydra/launcher/joblib'.",
    "slurm": "In 'hydra/launcher/slurm': Could not load 'hydra/launcher/submitit_slurm'.",
    "optuna": "In 'hydra/config': Could not find 'hydra/sweeper/optuna'\nAvailable options in 'hydra/sweeper':\n"
    "\tbasic\nConfig search path:\n\tprovider=hydra, path=pkg://hydra.conf",
}


@pytest.mark.parametrize("extra", sorted(HYDRA_MESSAGES))
def test_a_missing_plugin_names_the_extra_that_installs_it(extra: str) -> None:
    line = describe(MissingConfigException(HYDRA_MESSAGES[extra], missing_cfg_file="x"))
    assert line.endswith(f"pip install 'lmpt[{extra}]'") and "\n" not in line


def test_every_plugin_extra_is_declared_in_pyproject() -> None:
    declared = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert set(PLUGIN_EXTRAS.values()) <= set(declared["optional-dependencies"])


def test_an_unknown_option_still_lists_the_installed_ones() -> None:
    message = "In 'config': Could not find 'optimizer/sgd'\nAvailable options in 'optimizer':\n\tadamw\n\tmuon\n"
    assert describe(MissingConfigException(message, missing_cfg_file="x")) == (
        "unknown optimizer 'sgd': choose one of adamw, muon"
    )
