"""lmpt: pre-train transformer language models from the command line under any of twelve objectives."""

__version__ = "0.1.0"
