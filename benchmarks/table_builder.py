"""The table builder's CREATE + first write against a plain ``df.write.format("delta")``.

    bash dev.sh bench-builder                  # 2M rows, warm-up + 3 interleaved runs
    bash dev.sh bench-builder --smoke          # 100k rows, 1 run

The same rows (id long, n int, x double, s 40-char string) on both sides, one Spark session
(``local[2]``), each variant into a fresh folder:

- plain: ``df.write.format("delta").save(path)`` (creates the table on its first commit);
- builder: ``DeltaTable.create(spark).location(path).addColumns(schema).execute()`` and then
  ``df.write.format("delta").mode("append").save(path)`` (what delta-spark users write when
  they declare a table first);
- builder + generated: the same with one more column ``GENERATED ALWAYS AS (n * 2)``, whose
  values headwater computes on the DataFrame before the write.

Per run: wall seconds and CPU seconds of the whole process tree; medians of ``--runs`` after
one discarded warm-up round. The ratio is builder ÷ plain wall time (1.0 = no cost).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import headwater  # noqa: E402
from delta_io import tree_cpu_seconds  # noqa: E402
from headwater import DeltaTable  # noqa: E402

VARIANTS = ("plain", "builder", "builder + generated")


def rows(spark, count: int):
    return spark.range(count).selectExpr(
        "id", "CAST(id % 1000 AS INT) AS n", "id * 0.5 AS x",
        "rpad(CAST(id AS STRING), 40, 'x') AS s")


def run(spark, variant: str, df, folder: Path) -> tuple[float, float]:
    path = str(folder / variant.replace(" ", "_").replace("+", "and"))
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    if variant == "plain":
        df.write.format("delta").save(path)
    else:
        builder = DeltaTable.create(spark).location(path).addColumns(df.schema)
        if variant == "builder + generated":
            builder = builder.addColumn("n2", "INT", generatedAlwaysAs="n * 2")
        builder.execute()
        df.write.format("delta").mode("append").save(path)
    wall, cpu = time.perf_counter() - t0, tree_cpu_seconds() - cpu0
    count = spark.read.format("delta").load(path).count()
    assert count == df.count(), (variant, count)
    shutil.rmtree(path)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows, args.runs = 100_000, 1
    spark = headwater.spark_session("local[2]", conf={"spark.ui.enabled": "false"})
    folder = Path(tempfile.mkdtemp(prefix="hw-bench-builder-"))
    df = rows(spark, args.rows).cache()
    df.count()
    for variant in VARIANTS:  # warm-up round, discarded
        run(spark, variant, df, folder)
    results: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    for i in range(args.runs):
        order = VARIANTS[i % 3:] + VARIANTS[:i % 3]  # rotate who goes first
        for variant in order:
            results[variant].append(run(spark, variant, df, folder))
    shutil.rmtree(folder, ignore_errors=True)
    plain = statistics.median(w for w, _ in results["plain"])
    print(f"\n{args.rows:,} rows, median of {args.runs} after a warm-up\n")
    print("| variant | wall s | CPU s | ÷ plain (wall) |")
    print("|---|---:|---:|---:|")
    for variant in VARIANTS:
        wall = statistics.median(w for w, _ in results[variant])
        cpu = statistics.median(c for _, c in results[variant])
        print(f"| {variant} | {wall:.2f} | {cpu:.1f} | {wall / plain:.2f}x |")
    headwater.stop_spark()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
