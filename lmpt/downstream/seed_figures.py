"""One fine-tuned model as a record keeps it (`TunedFigures`): the recipe it trained with (`Recipe`: the learning rate,
the pooling, the steps, and the search that chose them, `Search`), each seed's figures (`SeedFigures`) and their means
and standard deviations over seeds. The run's model and its scratch control (`ScratchFigures`: a model, the seed of
its fresh weights and its entry in the shared cache) are each one, beside the bag-of-words floor's figures (`Floor`):
the pieces of a fine-tuning's record (lmpt.downstream.kinds.fine_tuned_result). The recipe search and the shared
control's cache write and read the same `Search`.

Each piece reads from a record's JSON (`from_json`) only what it writes back the same (`to_json`): a piece written by
hand, or by an lmpt whose record held other keys, reads as None and its record keeps it as written. No torch: reports
read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lmpt.downstream.figures import mean_and_std


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def numbers(raw: dict[str, Any]) -> dict[str, float] | None:
    """`raw` when every value is a number, else None."""
    return raw if all(is_number(v) for v in raw.values()) else None


T = TypeVar("T")


def lossless(piece: T | None, raw: object, encode: Callable[[T], object]) -> T | None:
    """`piece`, read from `raw`, when it writes `raw` back as it was (`encode(piece) == raw`); else None."""
    return piece if piece is not None and encode(piece) == raw else None


@dataclass(frozen=True)
class SeedFigures:
    """One fine-tuning seed: its seed, its training loss over the last epoch, and every figure it scored by name (dev
    unprefixed, test `test_*`; a benchmark task's own metrics and its score)."""

    seed: int
    train_loss: float
    figures: dict[str, float]

    @classmethod
    def from_json(cls, raw: object) -> SeedFigures | None:
        if not isinstance(raw, dict) or not is_int(raw.get("seed")) or not is_number(raw.get("train_loss")):
            return None
        figures = numbers({k: v for k, v in raw.items() if k not in ("seed", "train_loss")})
        return None if figures is None else cls(raw["seed"], raw["train_loss"], figures)

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "train_loss": self.train_loss, **self.figures}


@dataclass(frozen=True)
class Candidate:
    """One recipe a search tried: its learning rate, pooling, and its figure on the held-back slice (and its training
    loss)."""

    lr: float
    pooling: str
    figures: dict[str, float]

    @classmethod
    def from_json(cls, raw: object) -> Candidate | None:
        if not isinstance(raw, dict) or not is_number(raw.get("lr")) or not isinstance(raw.get("pooling"), str):
            return None
        figures = numbers({k: v for k, v in raw.items() if k not in ("lr", "pooling")})
        return None if figures is None else cls(raw["lr"], raw["pooling"], figures)

    def to_json(self) -> dict[str, Any]:
        return {"lr": self.lr, "pooling": self.pooling, **self.figures}


@dataclass(frozen=True)
class Search:
    """A recipe search (lmpt.downstream.recipe): what it chose, the slice of the training split it held back, and
    every candidate it tried, in order."""

    lr: float
    pooling: str
    held_out: int
    trained_on: int
    fraction: float
    seed: int
    epochs: int
    steps: int
    picked_by: str
    """The figure it picked by, in words: `accuracy on the held-back slice of the training split`."""
    candidates: tuple[Candidate, ...]

    @property
    def figure(self) -> str:
        """The figure the search picked by (its first word)."""
        return self.picked_by.split()[0]

    @classmethod
    def from_json(cls, raw: object) -> Search | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("candidates"), list):
            return None
        candidates = [Candidate.from_json(c) for c in raw["candidates"]]
        ints = ("held_out", "trained_on", "seed", "epochs", "steps")
        if any(c is None for c in candidates) or not all(is_int(raw.get(k)) for k in ints):
            return None
        if not (is_number(raw.get("lr")) and is_number(raw.get("fraction"))):
            return None
        if not (isinstance(raw.get("pooling"), str) and isinstance(raw.get("picked_by"), str)):
            return None
        found = cls(
            raw["lr"],
            raw["pooling"],
            raw["held_out"],
            raw["trained_on"],
            raw["fraction"],
            raw["seed"],
            raw["epochs"],
            raw["steps"],
            raw["picked_by"],
            tuple(c for c in candidates if c is not None),
        )
        return lossless(found, raw, Search.to_json)

    def to_json(self) -> dict[str, Any]:
        return {
            "lr": self.lr,
            "pooling": self.pooling,
            "held_out": self.held_out,
            "trained_on": self.trained_on,
            "fraction": self.fraction,
            "seed": self.seed,
            "epochs": self.epochs,
            "steps": self.steps,
            "picked_by": self.picked_by,
            "candidates": [c.to_json() for c in self.candidates],
        }


@dataclass(frozen=True)
class Recipe:
    """How a model was fine-tuned: its learning rate, its pooling, each seed's optimizer steps, and the search that
    chose them (None: a fixed recipe)."""

    lr: float
    pooling: str
    steps: int
    search: Search | None = None


def is_summary_key(key: str) -> bool:
    """A figure's mean or standard deviation over seeds (`accuracy_mean`, `test_mcc_std`)."""
    return key.endswith(("_mean", "_std"))


@dataclass(frozen=True)
class TunedFigures:
    """One model fine-tuned: its recipe, each seed's figures, and their means and sample standard deviations over
    seeds (`NAME_mean`, `NAME_std`; a std over one seed is None)."""

    recipe: Recipe
    summary: dict[str, float | None]
    seeds: tuple[SeedFigures, ...]

    @classmethod
    def of(cls, recipe: Recipe, per_seed: list[dict[str, Any]]) -> TunedFigures:
        """The figures of seeds just fine-tuned with `recipe`, as `run_seeds` gives them."""
        seeds = tuple(SeedFigures.from_json(r) for r in per_seed)
        assert all(s is not None for s in seeds), "run_seeds gives a seed, its training loss and numbers"
        return cls(recipe, mean_and_std(per_seed), tuple(s for s in seeds if s is not None))

    def mean(self, figure: str) -> float | None:
        """The mean over seeds of `figure`."""
        return self.summary.get(f"{figure}_mean")

    def std(self, figure: str) -> float | None:
        return self.summary.get(f"{figure}_std")

    def per_seed(self, figure: str) -> list[float]:
        """`figure` of each seed, in seed order."""
        return [s.figures[figure] for s in self.seeds]


@dataclass(frozen=True)
class Floor:
    """The bag-of-words floor: how it was fit, and its figures keyed as the fine-tuning's."""

    method: str
    figures: dict[str, float]

    @classmethod
    def from_json(cls, raw: object) -> Floor | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("method"), str):
            return None
        figures = numbers({k: v for k, v in raw.items() if k != "method"})
        return None if figures is None else cls(raw["method"], figures)

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, **self.figures}


def _tuned_json(model: TunedFigures) -> dict[str, Any]:
    """A model's recipe, summary and seeds, as a control's section writes them."""
    recipe = model.recipe
    return {
        "lr": recipe.lr,
        "pooling": recipe.pooling,
        "steps": recipe.steps,
        **model.summary,
        "per_seed": [s.to_json() for s in model.seeds],
        **({"search": recipe.search.to_json()} if recipe.search is not None else {}),
    }


def summary_of(raw: dict[str, Any]) -> dict[str, float | None]:
    """The means and standard deviations over seeds among a record's keys."""
    return {k: v for k, v in raw.items() if is_summary_key(k) and (v is None or is_number(v))}


def seeds_of(raw: object) -> tuple[SeedFigures, ...] | None:
    """A record's `per_seed`, or None when it is not a list of seed records."""
    if not isinstance(raw, list):
        return None
    seeds = [SeedFigures.from_json(s) for s in raw]
    return None if any(s is None for s in seeds) else tuple(s for s in seeds if s is not None)


@dataclass(frozen=True)
class ScratchFigures:
    """The untrained control's section (`scratch`): the seed its weights were drawn from, its recipe and figures, and
    where the shared cache kept it (`key`, whether it was read back, the digest of the entry read)."""

    init_seed: int
    model: TunedFigures
    key: str | None = None
    shared: bool | None = None
    entry_digest: str | None = None

    @classmethod
    def from_json(cls, raw: object) -> ScratchFigures | None:
        if not isinstance(raw, dict) or not is_int(raw.get("init_seed")):
            return None
        lr, pooling, steps, seeds = raw.get("lr"), raw.get("pooling"), raw.get("steps"), seeds_of(raw.get("per_seed"))
        search = Search.from_json(raw["search"]) if "search" in raw else None
        if not (is_number(lr) and isinstance(pooling, str) and is_int(steps) and seeds is not None):
            return None
        cached = {k: raw.get(k) for k in ("key", "shared", "entry_digest")}
        model = TunedFigures(Recipe(lr, pooling, steps, search), summary_of(raw), seeds)  # type: ignore[arg-type]
        found = cls(raw["init_seed"], model, **cached)
        return lossless(found, raw, ScratchFigures.to_json)

    def to_json(self) -> dict[str, Any]:
        cached = {"key": self.key, "shared": self.shared, "entry_digest": self.entry_digest}
        return {"init_seed": self.init_seed, **_tuned_json(self.model), **(cached if self.key is not None else {})}
