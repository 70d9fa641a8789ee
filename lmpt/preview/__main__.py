"""`python -m lmpt.preview` is the `lmpt-preview` command."""

from lmpt.preview.cli import main

if __name__ == "__main__":
    main()
