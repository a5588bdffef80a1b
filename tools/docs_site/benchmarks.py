"""The Benchmarks page: tables and charts drawn from benchmarks/results/*.json.

Each result file (format in benchmarks/results/README.md) becomes a section: what was measured,
the command that reproduces it, and per table a chart (matplotlib, SVG, drawn at build time)
and the numbers. A new measurement is a new JSON file; the page follows.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
CHART_DIR = "benchmarks/charts"  # where the SVGs go in the site
ACCENT = ["#3f51b5", "#ff9800", "#26a69a", "#e91e63", "#8bc34a", "#795548"]
REQUIRED = ("title", "command", "measured", "machine", "setup", "tables")


@dataclass(frozen=True)
class Chart:
    path: str      # site path, under CHART_DIR
    svg: bytes


def load() -> list[tuple[str, dict[str, Any]]]:
    """(name, result) for every results file, in the order they ask for."""
    found = []
    for path in sorted(RESULTS.glob("*.json")):
        result = json.loads(path.read_text())
        missing = [k for k in REQUIRED if k not in result]
        if missing:
            raise ValueError(f"{path}: missing {missing} (format: benchmarks/results/README.md)")
        for table in result["tables"]:
            width = len(table["columns"])
            bad = [row for row in table["rows"] if len(row) != width]
            if bad:
                raise ValueError(f"{path}: rows of {table['caption']!r} need {width} cells: "
                                 f"{bad}")
        found.append((path.stem, result))
    return sorted(found, key=lambda item: (item[1].get("order", 99), item[0]))


def _fmt(value: Any, fmt: str | None) -> str:
    if fmt and isinstance(value, int | float):
        return fmt.format(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _label(row: list[Any], columns: list[str], names: list[str]) -> str:
    return " ".join(str(row[columns.index(n)]) for n in names)


def _command(result: dict[str, Any], table: dict[str, Any]) -> str:
    return str(table.get("command") or result["command"])


def draw(result: dict[str, Any], table: dict[str, Any]) -> bytes:
    """One chart of one table, as SVG; the footer names the command reproducing it."""
    spec, columns, rows = table["chart"], table["columns"], table["rows"]
    kind = spec["kind"]
    plt.rcParams.update({"svg.hashsalt": "headwater", "font.size": 9,
                         "svg.fonttype": "none"})
    if kind == "line":
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        x, y, series = columns.index(spec["x"]), columns.index(spec["y"]), \
            columns.index(spec["series"])
        for i, name in enumerate(dict.fromkeys(r[series] for r in rows)):
            points = [(r[x], r[y]) for r in rows if r[series] == name]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                    color=ACCENT[i % len(ACCENT)], label=str(name))
        if spec.get("logx"):
            ax.set_xscale("log")
        ax.set_xlabel(spec["x"])
        ax.set_ylabel(spec["y"])
        ax.legend(frameon=False)
    else:
        labels = [_label(r, columns, spec["label"]) for r in rows]
        series = [spec["value"]] if kind == "bar" else spec["series"]
        height = max(2.2, 0.42 * len(rows) * (1 if kind == "bar" else 0.6 + 0.3 * len(series)))
        fig, ax = plt.subplots(figsize=(7.5, height))
        band = 0.8 / len(series)
        for i, name in enumerate(series):
            col = columns.index(name)
            values = [float(r[col]) for r in rows]
            offsets = [n + (i - (len(series) - 1) / 2) * band for n in range(len(rows))]
            bars = ax.barh(offsets, values, height=band * 0.9, color=ACCENT[i % len(ACCENT)],
                           label=name)
            fmt = table.get("formats", {}).get(name)
            ax.bar_label(bars, labels=[_fmt(r[col], fmt) for r in rows], padding=3,
                         fontsize=8)
        ax.set_yticks(range(len(rows)), labels)
        ax.invert_yaxis()
        ax.set_xlabel(", ".join(series))
        ax.margins(x=0.18)
        if len(series) > 1:
            ax.legend(frameon=False, loc="lower right")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{result['title']}\n{table['caption']}", fontsize=9, loc="left", wrap=True)
    fig.text(0.01, 0.005, f"reproduce: {_command(result, table)}   ·   measured "
             f"{result['measured']}, {result['machine']}", fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    out = io.BytesIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out.getvalue()


def charts() -> list[Chart]:
    return [Chart(f"{CHART_DIR}/{name}-{i}.svg", draw(result, table))
            for name, result in load()
            for i, table in enumerate(result["tables"]) if "chart" in table]


def page(chart_prefix: str = "") -> str:
    """The Markdown of every result; ``chart_prefix`` leads from the page to CHART_DIR."""
    out: list[str] = []
    for name, result in load():
        out += [f"## {result['title']}", "",
                f"Reproduce: `{result['command']}` (`{result.get('script', '')}`). Measured "
                f"{result['measured']} on a {result['machine']}.", "", result["setup"], ""]
        for i, table in enumerate(result["tables"]):
            fmts = table.get("formats", {})
            columns = table["columns"]
            out += [f"**{table['caption']}**", ""]
            if "chart" in table:
                out += [f"![{table['caption']}]({chart_prefix}{CHART_DIR}/{name}-{i}.svg)", ""]
            if table.get("command"):
                out += [f"Command: `{table['command']}`", ""]
            numeric = [all(isinstance(r[c], int | float) for r in table["rows"])
                       for c in range(len(columns))]
            out.append("| " + " | ".join(columns) + " |")
            out.append("|" + "".join("---:|" if n else "---|" for n in numeric))
            for row in table["rows"]:
                cells = [_fmt(v, fmts.get(c)).replace("|", "\\|") for v, c in zip(row, columns)]
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        if result.get("findings"):
            out += [result["findings"], ""]
        out += [f"<small>Data: `benchmarks/results/{name}.json`</small>", ""]
    return "\n".join(out)
