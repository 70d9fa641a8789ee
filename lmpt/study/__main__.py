"""`python -m lmpt.study`: the lmpt-study command."""

from lmpt.study.cli import main

main()
