"""The sharded token cache: shard layout does not change the tokens; sealed shards are kept, damaged or
unfinished ones redone; parts i/N build disjoint shards and the last one completes the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmpt.config.schema import DataConfig, SourceConfig, TokenizerConfig
from lmpt.data.cache import prepare_corpora, prepare_part
from lmpt.data.shards import MANIFEST_NAME, shards_dir
from lmpt.data.sources import bundled_dir, iter_documents
from lmpt.errors import LmptError

SMALL_TOK = TokenizerConfig(vocab_size=500, num_sentinels=4)


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1500 speaker turns of Tiny Shakespeare in two files (a mixture's two sources)."""
    folder = tmp_path_factory.mktemp("shards")
    docs = list(iter_documents([bundled_dir() / "tinyshakespeare.txt"], "blank_line", "text"))[:1500]
    for name, part in (("a.txt", docs[:1000]), ("b.txt", docs[1000:])):
        (folder / name).write_text("\n\n".join("\n".join(d) for d in part) + "\n", encoding="utf-8")
    return folder


def _data(shard_docs: int) -> DataConfig:
    sources = [SourceConfig(name="a", paths=["a.txt"], weight=1.0), SourceConfig(name="b", paths=["b.txt"], weight=3.0)]
    return DataConfig(paths=[], sources=sources, tokenize_workers=1, shard_docs=shard_docs)


def _cache_bytes(cache_dir: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(cache_dir.glob("*.bin"))}


def _sealed(shards: Path) -> dict[str, tuple[int, int]]:
    """Each sealed shard's manifest identity: (inode, modification time)."""
    found = sorted(shards.glob(f"shard-*/{MANIFEST_NAME}"))
    return {m.parent.name: (m.stat().st_ino, m.stat().st_mtime_ns) for m in found}


@pytest.fixture(scope="module")
def whole(two_sources: Path, tmp_path_factory: pytest.TempPathFactory):
    """The mixture's cache built in one shard per source (the reference)."""
    return prepare_corpora(_data(16384), SMALL_TOK, two_sources, tmp_path_factory.mktemp("whole"))


def test_shard_size_does_not_change_the_cache(whole, two_sources: Path, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "tokenizers").mkdir(parents=True)
    for src in (whole.cache_dir.parent.parent / "tokenizers").iterdir():  # the same tokenizer, not a retrained one
        (root / "tokenizers" / src.name).symlink_to(src)
    small = prepare_corpora(_data(128), SMALL_TOK, two_sources, root)
    assert small.cache_dir.name == whole.cache_dir.name  # shard_docs is not in the key
    assert _cache_bytes(small.cache_dir) == _cache_bytes(whole.cache_dir)
    assert small.sources == whole.sources and small.sources[0].train[1] == small.sources[1].train[0]
    meta = json.loads((small.cache_dir / "meta.json").read_text())
    assert meta["shards"] == 8 + 4 and meta["shard_docs"] == 128  # 1000 and 500 documents (train + val)
    assert not shards_dir(small.cache_dir, 128).exists()  # removed once the cache holds every token


def test_parts_keep_sealed_shards_and_the_last_completes(whole, two_sources: Path, tmp_path: Path, capsys) -> None:
    root = tmp_path / "cache"
    (root / "tokenizers").mkdir(parents=True)
    for src in (whole.cache_dir.parent.parent / "tokenizers").iterdir():
        (root / "tokenizers" / src.name).symlink_to(src)
    shards = shards_dir(root / "tokens" / whole.cache_dir.name, 128)

    assert prepare_part(_data(128), SMALL_TOK, two_sources, root, (0, 3)) is None
    first = _sealed(shards)
    assert sorted(first) == [f"shard-{j:06d}" for j in (0, 3, 6, 9)]
    assert not (root / "tokens" / whole.cache_dir.name).exists()  # incomplete: no cache anyone would use
    capsys.readouterr()
    assert prepare_part(_data(128), SMALL_TOK, two_sources, root, (0, 3)) is None  # again: nothing to redo
    assert "kept 4 sealed shard(s) of an earlier build; tokenised 0" in capsys.readouterr().out
    assert _sealed(shards) == first

    assert prepare_part(_data(128), SMALL_TOK, two_sources, root, (1, 3)) is None
    damaged = shards / "shard-000004" / "train.tokens.bin"
    damaged.write_bytes(damaged.read_bytes()[:-2])  # its size no longer matches the manifest: not trusted
    (shards / "shard-000007" / MANIFEST_NAME).unlink()  # killed before the manifest: unfinished
    before = _sealed(shards)
    capsys.readouterr()
    done = prepare_part(_data(128), SMALL_TOK, two_sources, root, (2, 3))
    out = capsys.readouterr().out
    assert done is None and "10 of 12 shards sealed" in out
    assert {k: v for k, v in _sealed(shards).items() if k in before and k != "shard-000004"} == {
        k: v for k, v in before.items() if k != "shard-000004"
    }  # part 2 touched none of the others' shards
    done = prepare_part(_data(128), SMALL_TOK, two_sources, root, (1, 3))  # redoes 4 and 7, completes
    assert done is not None and done.cache_dir.name == whole.cache_dir.name
    assert _cache_bytes(done.cache_dir) == _cache_bytes(whole.cache_dir) and done.sources == whole.sources
    assert not shards.exists()


def test_bad_text_mid_build_leaves_no_shard(whole, tmp_path: Path) -> None:
    lines = [json.dumps({"text": f"Record {i} says something of note."}) for i in range(300)]
    (tmp_path / "records.jsonl").write_text("\n".join([*lines, "{not json", *lines]) + "\n")
    data = DataConfig(paths=["records.jsonl"], tokenize_workers=1, shard_docs=50)
    tokenizer = TokenizerConfig(model_file=str(whole.tokenizer.path))  # the build, not the tokenizer, meets the line
    with pytest.raises(LmptError, match=r"records.jsonl:301 is not valid JSON"):
        prepare_corpora(data, tokenizer, tmp_path, tmp_path / "cache")
    assert list((tmp_path / "cache" / "tokens").iterdir()) == []  # neither sealed shards nor a cache


def test_a_launch_that_loses_the_race_after_its_shards_are_sealed_uses_the_winners_cache(
    whole, two_sources: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loser finds every shard sealed, then the winner assembles the cache and removes the shards before the
    loser reads their manifests: the loser must take the finished cache, not wait for 'other parts'."""
    import lmpt.data.cache as cache

    root = tmp_path / "cache"
    (root / "tokenizers").mkdir(parents=True)
    for src in (whole.cache_dir.parent.parent / "tokenizers").iterdir():
        (root / "tokenizers" / src.name).symlink_to(src)
    real_build = cache.build_shards

    def winner_finishes_meanwhile(*args, **kwargs):
        plan = real_build(*args, **kwargs)
        monkeypatch.setattr(cache, "build_shards", real_build)
        prepare_corpora(_data(128), SMALL_TOK, two_sources, root)  # the winner: assembles, removes the shards
        return plan

    monkeypatch.setattr(cache, "build_shards", winner_finishes_meanwhile)
    loser = prepare_corpora(_data(128), SMALL_TOK, two_sources, root)
    assert _cache_bytes(loser.cache_dir) == _cache_bytes(whole.cache_dir)
    assert not shards_dir(loser.cache_dir, 128).exists()
