"""`python -m lmpt` is the `lmpt` command (torchrun runs it this way)."""

from lmpt.cli import main

if __name__ == "__main__":
    main()
