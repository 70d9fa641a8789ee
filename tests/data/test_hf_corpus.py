"""data=hf: a dataset streamed through Hugging Face `datasets` into the sharded token cache. Nothing here reaches
the Hub: local parquet, JSONL and save_to_disk folders take the same path a Hub name takes (the Hub's own calls,
resolving the revision and opening the stream, are replaced by local ones where a Hub name is needed)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from corpus_files import paragraphs, write_format
from runner import SMALL, lmpt_env, run_lmpt, train_losses

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.config.validate import parse_max_tokens
from lmpt.data.cache import prepare_corpora
from lmpt.data.readers.hf import StreamInterrupted
from lmpt.data.shards import shards_dir
from lmpt.errors import LmptError

TOK = TokenizerConfig(vocab_size=500, num_sentinels=4)
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}  # the Hub out of reach, as on a machine without network
FAKE_HUB = "example-org/shakespeare"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same 1200 Shakespeare speeches as a parquet file, a JSONL file and a save_to_disk folder."""
    folder = tmp_path_factory.mktemp("hf-corpus")
    texts = paragraphs()
    return {fmt: write_format(folder, "speeches", fmt, texts) for fmt in ("parquet", "jsonl", "hf")}


def _hf(name: Path | str, **settings: object) -> DataConfig:
    return DataConfig(paths=[], name=str(name), tokenize_workers=1, **settings)


def _bins(cache_dir: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(cache_dir.glob("*.bin"))}


@pytest.fixture(scope="module")
def ordinary(corpus: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """The parquet file's cache through the ordinary local path (data.paths)."""
    root = tmp_path_factory.mktemp("ordinary")
    return prepare_corpora(DataConfig(paths=[str(corpus["parquet"])], tokenize_workers=1), TOK, root, root / "cache")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "hf"])
def test_a_local_dataset_through_data_hf_gives_the_ordinary_paths_cache(fmt, corpus, ordinary, tmp_path) -> None:
    streamed = prepare_corpora(_hf(corpus[fmt]), TOK, tmp_path, tmp_path / "cache")
    assert streamed.tokenizer.fingerprint == ordinary.tokenizer.fingerprint  # the head of a small stream: all of it
    assert _bins(streamed.cache_dir) == _bins(ordinary.cache_dir)
    assert (streamed.train.n_tokens, streamed.val.n_tokens) == (ordinary.train.n_tokens, ordinary.val.n_tokens)


def test_training_from_parquet_and_save_to_disk_through_data_hf(corpus: dict[str, Path], tmp_path: Path) -> None:
    steps = [
        "trainer.max_steps=5",
        "trainer.log_every=1",
        "trainer.eval_every=0",
        "trainer.ckpt_every=0",
        "trainer.device=cpu",
        "model.n_layers=2",
        "model.d_model=64",
        "model.n_heads=2",
        "model.ffn_dim=128",
        "tokenizer.vocab_size=500",
        "data.tokenize_workers=1",
    ]
    losses = {}
    for fmt in ("parquet", "hf"):
        run_dir = tmp_path / f"run-{fmt}"
        args = [*SMALL, *steps, "data=hf", f"data.name={corpus[fmt]}", f"hydra.run.dir={run_dir}"]
        env = lmpt_env(**OFFLINE, LMPT_CACHE_DIR=str(tmp_path / "cache"))
        result = run_lmpt(*args, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        losses[fmt] = train_losses(run_dir)
    assert sorted(losses["parquet"]) == [1, 2, 3, 4, 5]
    assert losses["parquet"] == losses["hf"]  # the same text, the same tokens: the same run


def test_max_tokens_caps_the_stream_at_a_prefix_of_it(corpus, ordinary, tmp_path: Path) -> None:
    capped = prepare_corpora(_hf(corpus["parquet"], max_tokens="5k"), TOK, tmp_path, tmp_path / "cache")
    total = capped.train.n_tokens + capped.val.n_tokens
    assert 4_500 < total <= 5_000  # each document's tokens and its eos; the one that would pass 5k is left out
    whole = _bins(ordinary.cache_dir)
    assert whole["train.tokens.bin"].startswith(_bins(capped.cache_dir)["train.tokens.bin"])
    assert capped.cache_dir.name != ordinary.cache_dir.name


def test_max_tokens_reads_scaled_numbers() -> None:
    assert parse_max_tokens("50M") == 50_000_000
    assert parse_max_tokens("2.5B") == 2_500_000_000 and parse_max_tokens("1e6") == 1_000_000
    assert parse_max_tokens("300") == 300 and parse_max_tokens(None) is None
    for bad in ("0", "-5", "abc", "1e400", "0.5"):
        with pytest.raises(LmptError, match="data.max_tokens"):
            parse_max_tokens(bad)


def _fake_hub(monkeypatch: pytest.MonkeyPatch, parquet: Path, commit: dict[str, str]) -> list[dict]:
    """The Hub answered locally: `commit` maps a revision (None: main) to its commit; the stream is the parquet
    file's. Returns the keyword arguments load_dataset was called with."""
    import datasets
    import huggingface_hub

    calls: list[dict] = []
    real = datasets.load_dataset

    def dataset_info(self, name, revision=None, **kwargs):
        assert name == FAKE_HUB
        return SimpleNamespace(sha=commit[revision])

    def load_dataset(path, *args, **kwargs):
        if path != FAKE_HUB:
            return real(path, *args, **kwargs)
        calls.append(kwargs)
        return real("parquet", data_files={kwargs["split"]: str(parquet)}, split=kwargs["split"], streaming=True)

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", dataset_info)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_the_cache_key_holds_the_resolved_revision(corpus, ordinary, monkeypatch, tmp_path: Path) -> None:
    commit = {None: "a" * 40, "v1": "a" * 40, "v2": "b" * 40}
    calls = _fake_hub(monkeypatch, corpus["parquet"], commit)
    main = prepare_corpora(_hf(FAKE_HUB), TOK, tmp_path, tmp_path / "cache")
    assert calls[-1]["revision"] == "a" * 40  # the stream is pinned to the commit, not to a moving branch
    assert _bins(main.cache_dir) == _bins(ordinary.cache_dir)
    same = prepare_corpora(_hf(FAKE_HUB, revision="v1"), TOK, tmp_path, tmp_path / "cache")
    assert same.cache_dir == main.cache_dir and same.reused  # another name of the same commit
    moved = prepare_corpora(_hf(FAKE_HUB, revision="v2"), TOK, tmp_path, tmp_path / "cache")
    assert moved.cache_dir != main.cache_dir
    for other in (dict(subset="sample"), dict(split="validation"), dict(max_tokens="5k")):
        keyed = prepare_corpora(_hf(FAKE_HUB, **other), TOK, tmp_path, tmp_path / "cache")
        assert keyed.cache_dir not in (main.cache_dir, moved.cache_dir), other


def test_a_local_datasets_revision_label_changes_its_key(corpus, tmp_path: Path) -> None:
    keys = {
        prepare_corpora(_hf(corpus["parquet"], revision=r), TOK, tmp_path, tmp_path / "cache").cache_dir
        for r in (None, "v1", "v2")
    }
    assert len(keys) == 3


KILL_AFTER_FIRST_SHARD = """
import os, signal, sys
from pathlib import Path
from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.data.cache import prepare_corpora
from lmpt.data.shards import ShardWriter

seal = ShardWriter.seal
def seal_then_die(self):
    seal(self)
    os.kill(os.getpid(), signal.SIGKILL)  # a kill -9 right after the first shard is sealed
ShardWriter.seal = seal_then_die
data = DataConfig(paths=[], name=sys.argv[1], tokenize_workers=1, shard_docs=200)
prepare_corpora(data, TokenizerConfig(vocab_size=500, num_sentinels=4), Path.cwd(), Path(sys.argv[2]))
"""


def test_a_killed_preparation_resumes_and_ends_with_the_same_cache(corpus, ordinary, tmp_path, capsys) -> None:
    root = tmp_path / "cache"
    env = lmpt_env(**OFFLINE)
    args = [sys.executable, "-c", KILL_AFTER_FIRST_SHARD, str(corpus["parquet"]), str(root)]
    killed = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    (cache_dir,) = [p for p in (root / "tokens").iterdir() if ".shards-" in p.name]
    assert sorted(p.name for p in cache_dir.glob("shard-*")) == ["shard-000000"]
    capsys.readouterr()
    resumed = prepare_corpora(_hf(corpus["parquet"], shard_docs=200), TOK, tmp_path, root)
    assert "kept 1 sealed shard(s) of an earlier build; tokenised 5" in capsys.readouterr().out
    assert _bins(resumed.cache_dir) == _bins(ordinary.cache_dir)  # the same cache as an unbroken build's
    assert not shards_dir(resumed.cache_dir, 200).exists()


def test_a_stream_that_breaks_off_keeps_its_sealed_shards(corpus, ordinary, monkeypatch, tmp_path, capsys) -> None:
    import lmpt.data.readers.hf as hf

    real, seen = hf.record_document, []

    def drop_connection(text: str) -> list[str]:
        seen.append(text)
        if len(seen) == 1000:
            raise ConnectionError("connection reset by peer")
        return real(text)

    root, tok = tmp_path / "cache", TokenizerConfig(model_file=str(ordinary.tokenizer.path), num_sentinels=4)
    data = _hf(corpus["parquet"], shard_docs=200)
    monkeypatch.setattr(hf, "record_document", drop_connection)
    with pytest.raises(StreamInterrupted, match="broke off after .* records .*run the same command again"):
        prepare_corpora(data, tok, tmp_path, root)
    monkeypatch.setattr(hf, "record_document", real)
    (shards,) = [p for p in (root / "tokens").iterdir() if ".shards-" in p.name]
    sealed = len(list(shards.glob("shard-*")))
    assert sealed >= 3  # what was sealed before the break is kept for the next launch
    capsys.readouterr()
    resumed = prepare_corpora(data, tok, tmp_path, root)
    assert f"kept {sealed} sealed shard(s)" in capsys.readouterr().out
    assert _bins(resumed.cache_dir) == _bins(ordinary.cache_dir)


def test_without_datasets_the_refusal_names_the_extra(corpus, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # what `pip install lmpt` without the extra has
    refusal = r"needs the `datasets` package, which is not installed: pip install 'lmpt\[hf\]'"
    with pytest.raises(LmptError, match=refusal):
        prepare_corpora(_hf(corpus["parquet"]), TOK, tmp_path, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


BAD = {
    "no dataset name": (["data=hf"], "data=hf needs data.name"),
    "max_tokens zero": (["data=hf", "data.name=speeches.parquet", "data.max_tokens=0"], "data.max_tokens=0 is invalid"),
    "max_tokens negative": (
        ["data=hf", "data.name=speeches.parquet", "data.max_tokens=-50M"],
        "data.max_tokens=-50M is invalid: it must be a positive number of tokens",
    ),
    "a Hub dataset offline": (
        ["data=hf", "data.name=no-such-org/no-such-dataset"],
        "data.name=no-such-org/no-such-dataset: the Hugging Face Hub cannot be reached",
    ),
    "a local dataset that does not exist": (["data=hf", "data.name=./missing.parquet"], "no such file or folder"),
    "max_tokens without data=hf": (["data.max_tokens=5M"], "data.max_tokens caps a dataset streamed with data=hf"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case: str, corpus, tmp_path: Path) -> None:
    overrides, fragment = BAD[case]
    (tmp_path / "speeches.parquet").symlink_to(corpus["parquet"])
    cache = tmp_path / "cache"
    env = lmpt_env(**OFFLINE, LMPT_CACHE_DIR=str(cache))
    result = run_lmpt(*SMALL, *overrides, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("lmpt: error: ") and fragment in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["speeches.parquet"]  # no run directory, no cache


def test_data_hf_is_documented_with_the_hub_command(repo_root: Path) -> None:
    docs = (repo_root / "docs" / "data.md").read_text()
    assert "lmpt data=hf data.name=HuggingFaceFW/fineweb-edu data.subset=sample-10BT data.max_tokens=50M" in docs
