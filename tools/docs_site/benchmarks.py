"""The Benchmarks page: tables and charts drawn from benchmarks/results/*.json.

Every script of benchmarks/ writes its results file itself (``--json``, through
benchmarks/results.py, which defines the format and checks it). Each file becomes a section:
what was measured, the command that reproduces it, the machine, date and load it ran at, the
headline ratios against their targets, and per table a chart (matplotlib, SVG, drawn at build
time) and the numbers, with every sample behind the medians. A file that fails the check
fails the build (strict); a rerun of the script is a new page.
"""

from __future__ import annotations

import io
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import results as schema  # noqa: E402 - benchmarks/results.py: the format and its checker

RESULTS = schema.RESULTS
CHART_DIR = "benchmarks/charts"  # where the SVGs go in the site
ACCENT = ["#3f51b5", "#ff9800", "#26a69a", "#e91e63", "#8bc34a", "#795548"]
GOAL_SIGN = {"at least": "≥", "at most": "≤"}


@dataclass(frozen=True)
class Chart:
    path: str      # site path, under CHART_DIR
    svg: bytes


def load() -> list[tuple[str, dict[str, Any]]]:
    """(name, result) for every results file, checked, in the order they ask for."""
    found = [(path.stem, schema.load(path)) for path in sorted(RESULTS.glob("*.json"))]
    return sorted(found, key=lambda item: (item[1]["order"], item[0]))


def rows(table: dict[str, Any]) -> list[list[Any]]:
    """The table's cells: per variant, each column's label or median."""
    return [[v["labels"][c] if c in v["labels"] else v["median"][c] for c in table["columns"]]
            for v in table["variants"]]


def ratio_table(result: dict[str, Any]) -> dict[str, Any]:
    """The headline ratios as one more table: measured, target (≥ floor / ≤ ceiling), met."""
    flags = {True: "yes", False: "**no**", None: "-"}
    variants = [{"labels": {"ratio": r["label"], "basis": r.get("basis") or "-",
                            "target": (f"{GOAL_SIGN[r['goal']]} {r['target']:.2f}x"
                                       if r["target"] is not None else "-"),
                            "met": flags[schema.met(r)]},
                 "median": {"measured": r["value"]}, "samples": {}}
                for r in result["ratios"]]
    table: dict[str, Any] = {"caption": "Ratios" + (" against their targets" if any(
        r["target"] is not None for r in result["ratios"]) else ""),
        "columns": ["ratio", "basis", "measured", "target", "met"], "variants": variants,
        "formats": {"measured": "{:.2f}x"}}
    if all(r["value"] is not None for r in result["ratios"]):
        table["chart"] = {"kind": "bar", "label": ["ratio"], "value": "measured",
                          "targets": [r["target"] for r in result["ratios"]]}
    return table


def _fmt(value: Any, fmt: str | None) -> str:
    if value is None:
        return "-"
    if fmt and isinstance(value, int | float):
        return fmt.format(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.2f}" \
            if abs(value) >= 0.1 or value == 0 else f"{value:.3g}"
    return str(value)


def _label(row: list[Any], columns: list[str], names: list[str]) -> str:
    return " ".join(str(row[columns.index(n)]) for n in names)


def _command(result: dict[str, Any], table: dict[str, Any]) -> str:
    return str(table.get("command") or result["command"])


def when(result: dict[str, Any]) -> str:
    """'2026-11-26 09:12 UTC' or the date alone."""
    measured = result["measured"]
    return measured.replace("T", " ")[:16] + " UTC" if "T" in measured else measured


def machine_line(result: dict[str, Any]) -> str:
    """Date, machine, load and versions of the run, in one line."""
    m = result["machine"]
    parts = [f"Measured {when(result)}"]
    if m.get("git_commit"):
        parts.append(f"at commit `{m['git_commit'][:10]}`"
                     + (" (with uncommitted changes)" if m.get("git_dirty") else ""))
    where = m.get("description") or ", ".join(filter(None, [
        f"{m['cores']} cores" if m.get("cores") else None, m.get("cpu"),
        f"{m['memory_gb']} GB" if m.get("memory_gb") else None]))
    parts.append(f"on {where}")
    line = " ".join(parts) + "."
    if m.get("loadavg_before"):
        line += (f" Load average (1, 5, 15 min) before "
                 f"{', '.join(f'{x:.2f}' for x in m['loadavg_before'])}, after "
                 f"{', '.join(f'{x:.2f}' for x in m['loadavg_after'])}.")
    if m.get("versions"):
        line += " " + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v) + "."
    if result.get("duration_s") is not None:
        line += f" The run took {result['duration_s']:,.0f} s."
    return line


def draw(result: dict[str, Any], table: dict[str, Any], image: str = "svg") -> bytes:
    """One chart of one table, as SVG; the footer names the command reproducing it."""
    spec, columns, cells = table["chart"], table["columns"], rows(table)
    kind = spec["kind"]
    plt.rcParams.update({"svg.hashsalt": "headwater", "font.size": 9,
                         "svg.fonttype": "none"})
    if kind == "line":
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        x, y, series = columns.index(spec["x"]), columns.index(spec["y"]), \
            columns.index(spec["series"])
        for i, name in enumerate(dict.fromkeys(r[series] for r in cells)):
            points = [(r[x], r[y]) for r in cells if r[series] == name]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                    color=ACCENT[i % len(ACCENT)], label=str(name))
        if spec.get("logx"):
            ax.set_xscale("log")
        ax.set_xlabel(spec["x"])
        ax.set_ylabel(spec["y"])
        ax.legend(frameon=False)
    else:
        labels = [textwrap.fill(_label(r, columns, spec["label"]), 40) for r in cells]
        lines = max(label.count("\n") + 1 for label in labels)
        series = [spec["value"]] if kind == "bar" else spec["series"]
        height = max(2.2, 0.42 * len(cells) * max(lines * 0.7, 1 if kind == "bar"
                                                  else 0.6 + 0.3 * len(series)))
        fig, ax = plt.subplots(figsize=(7.5, height))
        band = 0.8 / len(series)
        for i, name in enumerate(series):
            col = columns.index(name)
            values = [float(r[col]) if isinstance(r[col], int | float) else 0.0 for r in cells]
            offsets = [n + (i - (len(series) - 1) / 2) * band for n in range(len(cells))]
            bars = ax.barh(offsets, values, height=band * 0.9, color=ACCENT[i % len(ACCENT)],
                           label=name)
            fmt = table.get("formats", {}).get(name)
            ax.bar_label(bars, labels=[_fmt(r[col], fmt) for r in cells], padding=3,
                         fontsize=8)
        targets = spec.get("targets") or []
        for n, target in enumerate(targets):  # a ratio's target: a mark across its bar
            if target is not None:
                ax.plot([target, target], [n - 0.45, n + 0.45], color="#d32f2f", lw=2,
                        label="target" if n == targets.index(target) and not any(
                            t is not None for t in targets[:n]) else None)
        ax.set_yticks(range(len(cells)), labels)
        ax.invert_yaxis()
        ax.set_xlabel(", ".join(series))
        ax.margins(x=0.18)
        if len(series) > 1 or any(t is not None for t in targets):
            ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{result['title']}\n{table['caption']}", fontsize=9, loc="left", wrap=True)
    older = " (older run)" if result.get("older_run") else ""
    fig.text(0.01, 0.005, f"reproduce: {_command(result, table)}   ·   measured "
             f"{when(result)}{older}", fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    out = io.BytesIO()
    fig.savefig(out, format=image, **({"metadata": {"Date": None}} if image == "svg" else {}))
    plt.close(fig)
    return out.getvalue()


def tables(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The file's tables, the ratios first when it has any."""
    return ([ratio_table(result)] if result["ratios"] else []) + result["tables"]


def charts() -> list[Chart]:
    return [Chart(f"{CHART_DIR}/{name}-{i}.svg", draw(result, table))
            for name, result in load()
            for i, table in enumerate(tables(result)) if "chart" in table]


def _markdown_table(table: dict[str, Any]) -> list[str]:
    fmts = table.get("formats", {})
    columns = table["columns"]
    cells = rows(table)
    numeric = [all(isinstance(r[c], int | float) or r[c] is None for r in cells)
               for c in range(len(columns))]
    out = ["| " + " | ".join(columns) + " |",
           "|" + "".join("---:|" if n else "---|" for n in numeric)]
    for row in cells:
        texts = [_fmt(v, fmts.get(c)) for v, c in zip(row, columns)]
        out.append("| " + " | ".join(t.replace("|", "\\|") for t in texts) + " |")
    return out + [""]


def _samples(table: dict[str, Any]) -> list[str]:
    """Every sample behind the table's medians, folded away."""
    lines = []
    for v in table["variants"]:
        if not v["samples"]:
            continue
        name = " ".join(str(x) for x in v["labels"].values()) or "-"
        per = "; ".join(f"{metric}: {', '.join(_fmt(x, None) for x in xs)}"
                        for metric, xs in v["samples"].items())
        lines.append(f"    - {name}: {per}")
    return ['??? info "Samples"', "", *lines, ""] if lines else []


def page(chart_prefix: str = "") -> str:
    """The Markdown of every result; ``chart_prefix`` leads from the page to CHART_DIR."""
    out: list[str] = []
    for name, result in load():
        out += [f"## {result['title']}", ""]
        if result.get("older_run"):
            out += ['!!! note "Older run"', "",
                    f"    Measured {when(result)}; {result['older_run']}. Rerun "
                    f"`{result['command']}` on a quiet machine to replace it.", ""]
        if result["parameters"].get("smoke"):
            out += ['!!! warning "Smoke run"', "",
                    "    A quick end-to-end check at the smallest sizes, not a measurement. "
                    f"Rerun `{schema.command_line(result['script'], [])} --json` "
                    "to replace it.", ""]
        out += [f"Reproduce: `{result['command']}` (`{result['script']}`).", "",
                machine_line(result), "", result["setup"], ""]
        for i, table in enumerate(tables(result)):
            out += [f"**{table['caption']}**", ""]
            if "chart" in table:
                out += [f"![{table['caption']}]({chart_prefix}{CHART_DIR}/{name}-{i}.svg)", ""]
            if table.get("command"):
                out += [f"Command: `{table['command']}`", ""]
            out += _markdown_table(table) + _samples(table)
        for note in result.get("notes", []):
            out += [note, ""]
        if result.get("findings"):
            out += [result["findings"], ""]
        out += [f"<small>Data: `benchmarks/results/{name}.json`</small>", ""]
    return "\n".join(out)
