"""The coloured console view of a Preview: a header for the objective, then a table per example."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf
from rich.console import Console, Group
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from lmpt.objectives.base import Objective
from lmpt.preview.examples import Preview, PreviewExample
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.sentencepiece import WORD_START

DEFAULT_WIDTH = 64
"""Tokens shown per row when preview.width is 0."""

STYLES = {
    "mask": "bold red",
    "random": "bold yellow",
    "kept": "underline green",
    "sentinel": "bold magenta",
    "prefix": "cyan",
    "suffix": "green",
    "segment_b": "blue",
    "mode": "bold blue",
    "special": "dim",
}
_CORRUPTION = {STYLES["mask"], STYLES["random"], STYLES["kept"]}
_BYTE_NAMES = {"<0x0A>": "↵", "<0x09>": "⇥"}


def render_preview(preview: Preview, console: Console, width: int) -> None:
    """Print the header and every example; rows show at most `width` tokens (0 = DEFAULT_WIDTH)."""
    shown = width or DEFAULT_WIDTH
    console.print(header(preview), soft_wrap=False)
    for k, example in enumerate(preview.examples, start=1):
        source = f" · source {example.source}" if example.source else ""
        title = f"example {k} of {len(preview.examples)}{source} · {preview.split} offset {example.offset}"
        console.print(Rule(title, style="dim"))
        console.print(example_table(preview.objective, preview.tokenizer, example, shown), soft_wrap=False)


def header(preview: Preview) -> Group:
    objective = preview.objective
    title = Text.assemble(
        ("lmpt-preview ", "bold"),
        (objective.name, "bold cyan"),
        f" on {_article(objective.arch)} ",
        (objective.arch, "bold"),
        f" · {preview.split} text · step {preview.step} · seed {preview.seed}",
    )
    table = _grid()
    table.add_row("attention", objective.describe_attention())
    table.add_row("settings", " · ".join(settings(objective)))
    if keys := legend(objective):
        table.add_row("legend", Text("  ").join(Text(label, STYLES[style]) for label, style in keys))
    return Group(title, table)


def settings(objective: Objective) -> list[str]:
    """The objective's knobs, with what they amount to at this data.seq_len."""
    cfg: dict[str, Any] = OmegaConf.to_container(objective.cfg, resolve=True)  # type: ignore[assignment]
    parts = []
    for key, value in cfg.items():
        if key in ("name", "mask_token_frac", "random_token_frac", "denoisers"):
            continue
        parts.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    if "mask_token_frac" in cfg:
        mask, rand = float(cfg["mask_token_frac"]), float(cfg.get("random_token_frac", 0.0))
        parts.insert(1, f"{mask:.0%}/{rand:.0%}/{1 - mask - rand:.0%} [MASK]/random/kept".replace("%", ""))
    parts += objective.preview_settings()
    return parts


def example_table(objective: Objective, tokenizer: Tokenizer, example: PreviewExample, shown: int) -> Table:
    table = _grid()
    table.add_row("original", _cut(decoded_text(tokenizer, example.original_ids[:shown]), example.original_ids, shown))
    if example.denoiser is not None:
        mode = tokenizer.id_to_piece(example.input_ids[0])
        table.add_row(
            "denoiser", Text.assemble((example.denoiser, "bold"), " with mode token ", (mode, STYLES["mode"]))
        )
    if example.sequence_label is not None:
        names = objective.pair_labels()
        table.add_row("pair", Text(f"{names[example.sequence_label]} (label {example.sequence_label})", "bold"))
    input_name = "encoder input" if example.decoder_input_ids is not None else "input"
    table.add_row(input_name, _cut(input_text(objective, tokenizer, example, shown), example.input_ids, shown))
    table.add_row("targets", targets_text(objective, tokenizer, example, shown))
    table.add_row("counts", counts(objective, example))
    return table


def input_text(objective: Objective, tokenizer: Tokenizer, example: PreviewExample, shown: int) -> Text:
    """The model input as pieces, each styled by what the objective did there."""
    special = tokenizer.special
    ids = example.input_ids[:shown]
    corruption = dict(zip(example.corrupted_positions, example.corruption, strict=True))
    styles = []
    for p, token in enumerate(ids):
        style = ""
        if example.prefix_len is not None:
            style = STYLES["prefix"] if p < example.prefix_len else STYLES["suffix"]
        if example.segment_ids is not None and example.segment_ids[p] == 1:
            style = STYLES["segment_b"]
        if token in (special.cls, special.sep, special.eos, special.bos):
            style = STYLES["special"]
        if token in (special.nlu, special.nlg, special.s2s):
            style = STYLES["mode"]
        if p in corruption:
            style = STYLES[corruption[p]]
        styles.append(style)
    originals = example.original_ids if example.aligned else None  # aligned with the input
    return pieces_text(tokenizer, ids, styles, originals)


def targets_text(objective: Objective, tokenizer: Tokenizer, example: PreviewExample, shown: int) -> Text:
    """mlm/nsp: each selected position's original piece and what replaced it; otherwise the predicted tokens."""
    if example.aligned:
        text = Text()
        for p, kind in zip(example.corrupted_positions, example.corruption, strict=True):
            if p >= shown:
                break
            original = piece_label(tokenizer.id_to_piece(example.original_ids[p]))
            shown_piece = piece_label(tokenizer.id_to_piece(example.input_ids[p]))
            text.append("  " if text else "").append(f"{p}:", "dim").append(original, "bold")
            text.append(" <- ", "dim").append(shown_piece if kind != "kept" else "kept", STYLES[kind])
        hidden = sum(p >= shown for p in example.corrupted_positions)
        return text.append(f"  … +{hidden} more", "dim") if hidden else text
    ids = example.target_ids[:shown]
    styles = [_target_style(tokenizer, t) for t in ids]
    text = pieces_text(tokenizer, ids, styles)
    if objective.preview_targets_caption:
        text = Text(objective.preview_targets_caption, "dim").append_text(text)
    return _cut(text, example.target_ids, shown)


def counts(objective: Objective, example: PreviewExample) -> Text:
    n, n_loss = len(example.input_ids), len(example.loss_positions)
    if example.decoder_input_ids is not None:
        base = len(example.original_ids)
        line = (
            f"{base} original tokens -> {n} encoder tokens{_sentinels(example)} · "
            f"{n_loss} loss-bearing decoder tokens ({n_loss / base:.1%} of the original)"
        )
        return Text(line)
    line = f"{n} tokens · {n_loss} loss-bearing ({n_loss / n:.1%})"
    if example.aligned:
        for kind in ("mask", "random", "kept"):
            line += f" · {example.corruption.count(kind)} {'[MASK]' if kind == 'mask' else kind}"
    if example.prefix_len is not None:
        line += f" · prefix {example.prefix_len}{_sentinels(example)}"
    return Text(line)


def _sentinels(example: PreviewExample) -> str:
    n = len(example.corrupted_positions)
    return f" ({n} sentinel{'s' if n > 1 else ''})" if n else ""


def pieces_text(tokenizer: Tokenizer, ids: list[int], styles: list[str], originals: list[int] | None = None) -> Text:
    """Pieces joined readably: a word start begins with a space, a piece inside a word follows a dim `·`,
    a reserved token stands apart. Where `originals` is given, the original token decides the joint (a
    [MASK] inside a word still reads as inside it)."""
    text = Text()
    reserved = set(tokenizer.special.reserved_ids())
    after_bare_space = False  # a lone word-start piece is the space before the next piece
    for p, (token, style) in enumerate(zip(ids, styles, strict=True)):
        piece = tokenizer.id_to_piece(token)
        joint_of = originals[p] if originals is not None else token
        joint_piece = tokenizer.id_to_piece(joint_of)
        starts_word = joint_of in reserved or tokenizer.piece_starts_word(joint_piece) or joint_piece in _BYTE_NAMES
        if p > 0 and not after_bare_space:
            text.append(" " if starts_word else "·", "" if starts_word else "dim")
        after_bare_space = piece == WORD_START
        text.append(piece_label(piece) if not after_bare_space or style in _CORRUPTION else "", style)
    return text


def piece_label(piece: str) -> str:
    """A piece as shown: without its word-start mark, a newline or tab byte as a symbol, a bare space as ␣."""
    if piece == WORD_START:
        return "␣"
    return _BYTE_NAMES.get(piece, piece.removeprefix(WORD_START))


def decoded_text(tokenizer: Tokenizer, ids: list[int]) -> Text:
    """Plain text of `ids`; reserved tokens (eos between documents, [CLS], [SEP]) shown dim by name."""
    text = Text()
    run: list[int] = []

    def flush() -> None:
        if run:
            text.append((" " if text else "") + tokenizer.decode(run))
            run.clear()

    reserved = set(tokenizer.special.reserved_ids())
    for token in ids:
        if token in reserved:
            flush()
            text.append((" " if text else "") + tokenizer.id_to_piece(token), STYLES["special"])
        else:
            run.append(token)
    flush()
    return text


def _target_style(tokenizer: Tokenizer, token: int) -> str:
    special = tokenizer.special
    if special.sentinel_number(token) is not None:
        return STYLES["sentinel"]
    return STYLES["special"] if token in special.reserved_ids() else STYLES["suffix"]


def _cut(text: Text, ids: list[int], shown: int) -> Text:
    return text.append(f"  … +{len(ids) - shown} tokens", "dim") if len(ids) > shown else text


def legend(objective: Objective) -> list[tuple[str, str]]:
    """(label, style key) of each colour the objective's inputs use (Objective.preview_legend)."""
    return objective.preview_legend()


def _grid() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    return table


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"
