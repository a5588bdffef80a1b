"""Every seed scenario in examples/ runs on the shared session, and its output rows are
checked, not only that it ran."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_table_to_table_appends_new_rows_on_a_timer(spark, tmp_path):
    rows = example("table_to_table").main(str(tmp_path / "lake"), "1 second", spark)
    assert rows == [(1, "alpha"), (2, "beta"), (3, "gamma")]


def _device_counts(truth, batches: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in truth.of("devices"):
        if entry["batch"] < batches:
            device = entry["record"]["device_id"]
            out[device] = out.get(device, 0) + 1
    return out


def test_device_counts_change_as_the_factory_lands_data(spark, tmp_path):
    from headwater.factory import DataFactory

    root = tmp_path / "lake"
    before, after = example("device_counts").main(str(root), "1 second", spark)
    truth = DataFactory(root).truth()
    assert before == _device_counts(truth, 1)
    assert after == _device_counts(truth, 2) and after != before
