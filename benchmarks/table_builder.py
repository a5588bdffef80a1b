"""The table builder's CREATE + first write against a plain ``df.write.format("delta")``.

    bash dev.sh bench-builder                  # 2M rows, warm-up + 3 interleaved runs
    bash dev.sh bench-builder --smoke          # 100k rows, 1 run
    bash dev.sh bench-builder --json           # into benchmarks/results/table_builder.json

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
import results as results_file  # noqa: E402 - benchmarks/results.py
from delta_io import tree_cpu_seconds  # noqa: E402
from headwater import DeltaTable  # noqa: E402

VARIANTS = ("plain", "builder", "builder + generated")
SETUP = (
    "The same rows (id long, n int, x double, 40-char string), one `local[2]` session, each "
    "variant into a fresh folder: `df.write.format(\"delta\").save(path)` (plain) against "
    "`DeltaTable.create(spark).location(path).addColumns(schema).execute()` then an append "
    "(builder), and the same with a `GENERATED ALWAYS AS (n * 2)` column. One discarded "
    "warm-up round, then the median of the rotating rounds; CPU of the process tree.")


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
    parser.add_argument("--smoke", action="store_true", help="100k rows, 1 run")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows, args.runs = 100_000, 1
    record = results_file.Run(
        __file__, "DeltaTable.create + first write vs a plain write", SETUP, order=8,
        parameters={"rows": args.rows, "runs": args.runs, "smoke": args.smoke}, argv=argv)
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
    variants = []
    for variant in VARIANTS:
        wall = statistics.median(w for w, _ in results[variant])
        cpu = statistics.median(c for _, c in results[variant])
        print(f"| {variant} | {wall:.2f} | {cpu:.1f} | {wall / plain:.2f}x |")
        variants.append(results_file.variant(
            {"variant": variant}, {"wall s": [w for w, _ in results[variant]],
                                   "CPU s": [c for _, c in results[variant]]},
            {"÷ plain": wall / plain}))
        if variant != "plain":
            record.ratio(f"{variant} ÷ plain", wall / plain, basis="wall time")
    record.table(f"{args.rows:,} rows: medians", ["variant", "wall s", "÷ plain", "CPU s"],
                 variants, chart={"kind": "bar", "label": ["variant"], "value": "wall s"},
                 formats={"÷ plain": "{:.2f}x"})
    headwater.stop_spark()
    record.write(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
