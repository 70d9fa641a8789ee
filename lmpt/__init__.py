"""lmpt: pre-train transformer language models from the command line under any of nine objectives."""

__version__ = "0.1.0"
