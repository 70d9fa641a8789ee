"""Hugging Face interop: weights and names in (model.init_from) and out (lmpt-export)."""
