"""`python -m lmpt.prepare` is the `lmpt-prepare` command."""

from lmpt.prepare.cli import main

if __name__ == "__main__":
    main()
