"""Check an install of lmpt with no extras (what `pip install .` gives a new user): every module of the package
imports, and every console command lmpt declares starts (`--help`) without a traceback. Run by .ci/run in the
fresh environment of the README's first command, so a dependency that only an extra brings in is caught there.

Usage: python scripts/check_bare_install.py   (exit 1, naming each failure, when one fails)
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import shutil
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor


def module_failures() -> list[str]:
    """Every lmpt module that does not import (a `__main__` runs its command when imported: left out)."""
    import lmpt

    failures = []
    for module in pkgutil.walk_packages(lmpt.__path__, "lmpt."):
        if module.name.endswith(".__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except Exception:
            failures.append(f"import {module.name}:\n{traceback.format_exc(limit=3)}")
    return failures


def command_failures() -> list[str]:
    """Every console command of lmpt's distribution whose `--help` does not exit 0 or prints a traceback (two at a
    time: each spends its seconds importing torch and Hydra)."""
    names = [e.name for e in importlib.metadata.distribution("lmpt").entry_points if e.group == "console_scripts"]

    def failure(name: str) -> str | None:
        done = subprocess.run([shutil.which(name) or name, "--help"], capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or "Traceback" in done.stderr:
            return f"{name} --help exited {done.returncode}:\n{done.stderr[-2000:]}"
        return None

    with ThreadPoolExecutor(max_workers=2) as pool:
        return [f for f in pool.map(failure, names) if f is not None]


def main() -> None:
    failures = module_failures() + command_failures()
    for failure in failures:
        print(failure, file=sys.stderr)
    verdict = f"{len(failures)} failure(s)" if failures else "every module imports and every command starts"
    print(f"bare install: {verdict}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
