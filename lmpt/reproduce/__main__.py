from lmpt.reproduce.cli import main

main()
