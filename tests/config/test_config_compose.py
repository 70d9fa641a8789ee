"""Every option of every config group composes, and bad keys or values fail naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from composed import composed
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

from lmpt.config.errors import describe
from lmpt.config.store import conf_dir
from lmpt.config.validate import validate_config
from lmpt.errors import LmptError
from lmpt.objectives.registry import OBJECTIVES

GROUPS = ["tokenizer", "objective", "model", "optimizer", "scheduler", "data", "trainer"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_typed_and_valid(group: str, option: str) -> None:
    needs = {
        ("data", "text"): ["data.paths=[x.txt]"],
        ("tokenizer", "hf"): ["tokenizer.path=tokenizer.json"],
        ("data", "hf"): ["data.name=HuggingFaceFW/fineweb-edu"],
    }
    extra = needs.get((group, option), [])
    cfg = composed(f"{group}={option}", *extra)
    node = cfg[group]
    objective_schemas = tuple(c.config_class.__module__ for c in OBJECTIVES.values())
    schemas = ("lmpt.config.schema", *objective_schemas, "lmpt.config.schema")
    assert OmegaConf.get_type(node).__module__ in schemas  # typed
    assert OmegaConf.is_missing(node, "name") is False if "name" in node else True
    validate_config(cfg)


def test_every_group_has_options_and_names_match_files() -> None:
    for group in GROUPS:
        assert options(group), group
    for name in options("objective"):
        assert composed(f"objective={name}").objective.name == name
    for name in options("model"):
        assert composed(f"model={name}").model.name == name
    for name in options("scheduler"):
        assert composed(f"scheduler={name}").scheduler.name == name


def test_defaults_are_the_tiny_clm_on_shakespeare() -> None:
    cfg = composed()
    assert (cfg.objective.name, cfg.model.name, cfg.data.paths) == ("clm", "tiny", ["bundled:tinyshakespeare.txt"])


def test_bundled_corpora_name_their_document_modes() -> None:
    bundled = {name: composed(f"data={name}").data for name in ("shakespeare", "wikitext", "tinystories")}
    assert {name: (data.paths, data.documents) for name, data in bundled.items()} == {
        "shakespeare": (["bundled:tinyshakespeare.txt"], "blank_line"),
        "wikitext": (["bundled:wikitext-2-valid.txt"], "wikitext"),
        "tinystories": (["bundled:tinystories-prefix.txt"], "stories"),
    }


@pytest.mark.parametrize(
    "override,fragment",
    [
        ("trainer.max_stepz=3", "unknown config key 'trainer.max_stepz'"),
        ("objective.mask_prb=0.2", "unknown config key 'objective.mask_prb'"),
        ("trainer.batch_size=many", "trainer.batch_size"),
    ],
)
def test_typos_and_wrong_types_name_the_key(override: str, fragment: str) -> None:
    with pytest.raises(ConfigCompositionException) as info:
        composed("objective=mlm", override)
    assert fragment in describe(info.value)
    assert "\n" not in describe(info.value)


@pytest.mark.parametrize(
    "override,line",
    [
        ("trainer.precision=fp8", "trainer.precision: Invalid value 'fp8', expected one of [fp32, bf16, fp16]"),
        (
            "trainer.progress=fancy",
            "trainer.progress: Invalid value 'fancy', expected one of [auto, rich, plain, tqdm]",
        ),
        ("downstream.mode=bogus", "downstream.mode: Invalid value 'bogus', expected one of [full, probe]"),
        (
            "downstream.control=untrained",
            "downstream.control: Invalid value 'untrained', expected one of [scratch, none]",
        ),
        ("scheduler.name=step", "scheduler.name: Invalid value 'step', expected one of [cosine, linear, constant"),
        ("data.documents=pages", "data.documents: Invalid value 'pages', expected one of [auto, blank_line, wikitext"),
        ("tokenizer.backend=wordpiece", "tokenizer.backend: Invalid value 'wordpiece', expected one of [sentencepiece"),
    ],
)
def test_a_fixed_choice_is_refused_at_composition_naming_the_allowed_values(override: str, line: str) -> None:
    """Issue 52: the schemas' fixed choices are Enums (lmpt.config.schema.Choice): a bad value never composes."""
    with pytest.raises(ConfigCompositionException) as info:
        composed(override)
    assert describe(info.value).startswith(line) and "\n" not in describe(info.value)


def test_a_choice_reads_as_its_string_everywhere_below_the_config() -> None:
    from lmpt.config.schema import Progress

    cfg = composed("trainer.progress=plain")
    assert cfg.trainer.progress == "plain" and cfg.trainer.progress is Progress.plain
    assert f"{cfg.trainer.progress}" == str(cfg.trainer.progress) == "plain" and {"plain": 1}[cfg.trainer.progress]
    assert OmegaConf.to_container(cfg.trainer, enum_to_str=True)["progress"] == "plain"
    assert "progress: plain" in OmegaConf.to_yaml(cfg.trainer)


def test_unknown_option_lists_the_choices() -> None:
    with pytest.raises(MissingConfigException) as info:
        composed("objective=bert")
    line = describe(info.value)
    assert "unknown objective 'bert'" in line and "mlm" in line and "ul2-mixture" in line


@pytest.mark.parametrize(
    "override,key",
    [
        ("trainer.max_steps=0", "trainer.max_steps"),
        ("trainer.grad_accum=-1", "trainer.grad_accum"),
        ("data.val_fraction=1.5", "data.val_fraction"),
        ("model.dropout=1.0", "model.dropout"),
        ("optimizer.lr=-1e-3", "optimizer.lr"),
        ("scheduler.min_lr_ratio=2", "scheduler.min_lr_ratio"),
        ("trainer.device=tpu", "trainer.device"),
        ("tokenizer.vocab_size=100", "tokenizer.vocab_size"),
        ("downstream.seeds=0", "downstream.seeds"),
        ("downstream.batch_size=-1", "downstream.batch_size"),
        ("downstream.max_train_examples=0", "downstream.max_train_examples"),
    ],
)
def test_out_of_range_values_name_the_key(override: str, key: str) -> None:
    with pytest.raises(LmptError, match=key.replace(".", r"\.")):
        validate_config(composed(override))


def test_conf_dir_is_the_checkout_conf() -> None:
    assert conf_dir() == Path(__file__).resolve().parents[2] / "conf"


@pytest.mark.parametrize(
    "override,key",
    [
        ("+trainer.max_stepz=10", "trainer.max_stepz"),
        ("++trainer.max_stepz=10", "trainer.max_stepz"),
        ("+foo=bar", "foo"),
        ("+model.dropuot=0.1", "model.dropuot"),
        ("+objective.mask_prop=0.2", "objective.mask_prop"),
    ],
)
def test_keys_added_outside_the_schema_are_refused(override: str, key: str) -> None:
    cfg = composed(override)  # Hydra adds them: the schema check refuses them
    with pytest.raises(LmptError, match=rf"^unknown config key '{re.escape(key)}'"):
        validate_config(cfg)


def test_a_run_specs_sections_are_instances_of_their_schemas() -> None:
    """Issue 52: every stage after start-up takes a real dataclass, each objective and optimizer its own class; the
    resolved config stays as composed and read-only."""
    from lmpt.config.quality_schema import QualityConfig
    from lmpt.config.schema import (
        DataConfig,
        DownstreamConfig,
        ModelConfig,
        MuonConfig,
        SchedulerConfig,
        TokenizerConfig,
        TrainerConfig,
    )
    from lmpt.objectives.mlm import MlmConfig
    from lmpt.train.spec import resolve

    spec = resolve(composed("objective=mlm", "objective.mask_prob=0.3"), {"objective", "objective.mask_prob"})
    sections = {
        "trainer": TrainerConfig,
        "data": DataConfig,
        "tokenizer": TokenizerConfig,
        "objective": MlmConfig,
        "model": ModelConfig,
        "optimizer": MuonConfig,
        "scheduler": SchedulerConfig,
        "downstream": DownstreamConfig,
        "quality": QualityConfig,
    }
    for name, schema in sections.items():
        assert type(getattr(spec, name)) is schema, name
    assert spec.objective.mask_prob == 0.3 and spec.trainer is spec.trainer  # read once
    assert OmegaConf.is_readonly(spec.config)
