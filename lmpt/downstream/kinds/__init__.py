"""The task kinds, one class a module, found by their registry (lmpt.downstream.kinds.registry)."""
