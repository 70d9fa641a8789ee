"""Turn configuration exceptions from Hydra and OmegaConf into one line that names the key."""

from __future__ import annotations

import re

from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    MissingMandatoryValue,
    OmegaConfBaseException,
    ValidationError,
)

from lmpt.errors import LmptError

USER_ERRORS = (LmptError, ConfigCompositionException, OmegaConfBaseException, OverrideParseException, OSError)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _full_key(exc: BaseException) -> str | None:
    key = getattr(exc, "full_key", None)
    if key:
        return str(key)
    match = re.search(r"full_key: (\S+)", str(exc))
    return match.group(1) if match else None


def describe(exc: BaseException) -> str:
    """One line: what is wrong and what to do."""
    if isinstance(exc, LmptError):
        return str(exc)
    if isinstance(exc, MissingConfigException):
        return _describe_missing_option(str(exc))
    cause = exc.__cause__ if isinstance(exc, ConfigCompositionException) else exc
    message = str(exc)
    override = re.search(r"override '([^']+)'", message) or re.search(r"override ([^=\s]+)=", message)
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        key = override.group(1) if override else _full_key(cause) or "?"
        return f"unknown config key '{key}': check its spelling (`lmpt --help` lists the groups and keys)"
    if isinstance(cause, ValidationError) and "Unexpected type annotation" in str(cause):
        key = override.group(1) if override else _full_key(cause) or "?"  # a sweep expression left unquoted
        return (
            f"{key}: a search expression such as interval(...) or choice(...) is read as a sweep here: quote it as a "
            f"string, e.g. '{key}={{optimizer.lr:\"interval(0.001, 0.1)\"}}'"
        )
    if isinstance(cause, ValidationError):
        key = _full_key(cause) or (override.group(1) if override else "?")
        return f"{key}: {_first_line(str(cause))}"
    if isinstance(cause, MissingMandatoryValue):
        key = _full_key(cause) or "?"
        return f"{key} has no value: set it on the command line, e.g. {key}=..."
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return _first_line(message)


PLUGIN_EXTRAS = {
    "hydra/launcher/joblib": "parallel",
    "hydra/launcher/submitit_slurm": "slurm",
    "hydra/launcher/submitit_local": "slurm",
    "hydra/sweeper/optuna": "optuna",
}
"""Hydra plugin configs an lmpt option composes, and the extra of lmpt that installs each plugin."""

PACKAGE_EXTRAS = {"datasets": "hf"}
"""Packages an lmpt option imports when it is used, and the extra of lmpt that installs each."""


def require_extra(package: str, what: str) -> None:
    """Import `package` or refuse in one line naming the extra that installs it; `what` says who needs it."""
    try:
        __import__(package)
    except ImportError:
        extra = PACKAGE_EXTRAS[package]
        message = f"{what} needs the `{package}` package, which is not installed: pip install 'lmpt[{extra}]'"
        raise LmptError(message) from None


def _describe_missing_option(message: str) -> str:
    match = re.search(r"Could not (?:find|load) '([^']+)'", message)
    wanted = match.group(1) if match else "?"
    group, _, name = wanted.rpartition("/")
    if wanted in PLUGIN_EXTRAS:  # a Hydra plugin that is not installed: name the extra that brings it
        return f"{group} '{name}' is a Hydra plugin installed by an extra: pip install 'lmpt[{PLUGIN_EXTRAS[wanted]}]'"
    options = re.findall(r"^\t(\S+)$", message, flags=re.MULTILINE)
    if group and options:
        return f"unknown {group} '{name}': choose one of {', '.join(options)}"
    return _first_line(message)
