"""A study's curves (downstream.score_every): curves.png drawn from its final runs' curve points and linked from
study.md, from fake run directories (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt

from lmpt.study.curves import CURVES_PNG, curve_points, draw_curves
from lmpt.study.plan import StudyPlan
from lmpt.study.record import write_study
from lmpt.study.runs import read_final


def fake_run(path: Path, objective: str, accuracies: list[float], curves: bool = True) -> Path:
    """A completed run that logged validation and, every 10 steps, a curve point of the task `pairs`."""
    path.mkdir(parents=True)
    lines = []
    for i, accuracy in enumerate(accuracies, start=1):
        step, flops = 10 * i, 1e9 * i
        lines.append({"step": step, "tokens": 100 * i, "loss_tokens": 100 * i, "flops": flops, "val_loss": 5.0 - i})
        if curves:
            lines.append(
                {
                    "step": step,
                    "tokens": 100 * i,
                    "loss_tokens": 100 * i,
                    "flops": flops,
                    "curve/pairs/accuracy": accuracy,
                    "curve/pairs/accuracy_low": accuracy - 0.125,
                    "curve/pairs/accuracy_high": accuracy + 0.125,
                    "curve/pairs/chance": 0.5,
                }
            )
    lines.append({"step": 10 * len(accuracies), "downstream/pairs/accuracy": accuracies[-1]})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (path / "config.yaml").write_text(f"objective:\n  name: {objective}\nmodel:\n  arch: auto\n")
    (path / "status.json").write_text(json.dumps({"status": "completed", "step": 10 * len(accuracies)}))
    return path


def plan_of(directory: Path) -> StudyPlan:
    space = {"optimizer.lr": "tag(log, interval(0.0001, 0.01))"}
    return StudyPlan(
        ["clm", "mlm"],
        [0, 1],
        directory,
        ["downstream.score_every=10"],
        ["1e12flops"],
        "2.5e11flops",
        {"clm": 40, "mlm": 40},
        "last",
        space,
        2,
        "random",
        0,
        recipes=[],
        tasks=["pairs"],
    )


def test_the_study_draws_each_objectives_curves_and_links_them(tmp_path: Path) -> None:
    runs = tmp_path / "study" / "runs"
    finals = {
        "clm": [
            read_final(fake_run(runs / f"clm-seed{s}", "clm", [0.5, 0.625, 0.75]), "clm", s, "1e12flops", ["pairs"])
            for s in (0, 1)
        ],
        "mlm": [read_final(fake_run(runs / "mlm-seed0", "mlm", [0.5, 0.625]), "mlm", 0, "1e12flops", ["pairs"])],
    }
    points = curve_points(runs / "mlm-seed0")
    assert [(p["step"], p["flops"], p["accuracy"], p["accuracy_low"]) for p in points["pairs"]] == [
        (10, 1e9, 0.5, 0.375),
        (20, 2e9, 0.625, 0.5),
    ]
    fig = draw_curves(finals)
    try:
        by_step, by_flops = fig.axes
        assert [ax.get_xlabel() for ax in fig.axes] == ["step", "training FLOPs"]
        drawn = [(line.get_color(), list(line.get_xdata()), list(line.get_ydata())) for line in by_flops.lines[:3]]
        assert drawn == [
            ("C0", [1e9, 2e9, 3e9], [0.5, 0.625, 0.75]),
            ("C0", [1e9, 2e9, 3e9], [0.5, 0.625, 0.75]),
            ("C1", [1e9, 2e9], [0.5, 0.625]),
        ]
        assert [t.get_text() for t in by_step.get_legend().get_texts()] == ["clm", "mlm", "chance"]
        fig.canvas.draw()  # the legend sits above the panels, hiding no curve and no axis
        legend = by_step.get_legend().get_window_extent()
        assert not any(legend.overlaps(ax.get_window_extent()) for ax in fig.axes)
    finally:
        plt.close(fig)

    write_study(plan_of(tmp_path / "study"), {}, finals)
    assert (tmp_path / "study" / CURVES_PNG).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"![curves]({CURVES_PNG})" in (tmp_path / "study" / "study.md").read_text()


def test_runs_without_curve_points_draw_no_curves(tmp_path: Path) -> None:
    runs = tmp_path / "study" / "runs"
    run = fake_run(runs / "clm-seed0", "clm", [0.5, 0.625], curves=False)
    finals = {"clm": [read_final(run, "clm", 0, "1e12flops", ["pairs"])]}
    assert draw_curves(finals) is None
    write_study(plan_of(tmp_path / "study"), {}, finals)
    assert not (tmp_path / "study" / CURVES_PNG).exists()
    assert "## Curves" not in (tmp_path / "study" / "study.md").read_text()
