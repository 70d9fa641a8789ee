"""The README's model-size table is what the presets in conf/model/ actually build."""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import OmegaConf

from lmpt.config.schema import ModelConfig, TokenizerConfig
from lmpt.model import count_parameters

REPO = Path(__file__).resolve().parents[2]
ARCHS = ("decoder", "encoder", "encoder-decoder")


def readme_rows() -> dict[str, list[int]]:
    rows = {}
    for line in (REPO / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0] in ("tiny", "small", "base", "large"):
            rows[cells[0]] = [int(c.replace(",", "")) for c in cells[5:]]
    return rows


def preset(name: str):
    yaml = OmegaConf.load(REPO / "conf" / "model" / f"{name}.yaml")
    yaml.pop("defaults")
    return OmegaConf.merge(OmegaConf.structured(ModelConfig), yaml)


def test_readme_table_matches_built_models() -> None:
    rows = readme_rows()
    assert sorted(rows) == ["base", "large", "small", "tiny"]
    assert re.search(r"default vocabulary of 4096", (REPO / "README.md").read_text())
    vocab = TokenizerConfig().vocab_size
    assert vocab == 4096
    for name, counts in rows.items():
        assert counts == [count_parameters(preset(name), arch, vocab) for arch in ARCHS], name


def test_base_is_gpt2_small_scale_with_gpt2_vocabulary() -> None:
    assert 120e6 < count_parameters(preset("base"), "decoder", 50257) < 128e6
