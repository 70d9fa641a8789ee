"""What counts as a changed configuration on resume: keys added to lmpt after a run started are not drift while
they keep the schema's default; any other difference is."""

from __future__ import annotations

from composed import composed
from omegaconf import OmegaConf

from lmpt.rundir.drift import drifted_keys, flatten


def saved_before(cfg, *added: str) -> dict:
    """`cfg` as a run started before the `added` keys existed recorded it."""
    old = flatten(OmegaConf.to_container(cfg, resolve=True))
    return {k: v for k, v in old.items() if k not in added}


def test_a_key_added_since_the_run_started_is_not_drift_at_its_default() -> None:
    cfg = composed("objective=mlm")
    assert OmegaConf.to_container(cfg.data.sources) == []
    assert drifted_keys(saved_before(cfg, "data.sources", "data.text_field"), cfg) == []


def test_a_key_added_since_is_drift_when_it_leaves_the_default() -> None:
    cfg = composed("objective=mlm", "data.text_field=body")
    assert drifted_keys(saved_before(cfg, "data.text_field"), cfg) == ["data.text_field"]


def test_a_changed_or_removed_key_is_drift() -> None:
    cfg = composed("objective=mlm")
    old = saved_before(cfg)
    assert drifted_keys({**old, "objective.mask_prob": 0.3}, cfg) == ["objective.mask_prob"]
    assert drifted_keys({**old, "model.retired_key": 1}, cfg) == ["model.retired_key"]
    assert drifted_keys({**old, "trainer.max_steps": 7}, cfg) == []  # a resume may lengthen the run
