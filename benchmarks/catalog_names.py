"""What three-part names cost a statement's planning: ``spark.sql`` on a lakehouse with and
without catalogs, against Spark alone.

    bash dev.sh bench-catalogs                 # 300 statements per variant, 3 rounds
    bash dev.sh bench-catalogs --smoke         # 30 statements, 1 round
    bash dev.sh bench-catalogs --json          # into benchmarks/results/catalog_names.json

One ``local[2]`` session, one table of 1,000 rows, the same query shape in every variant
(``SELECT id, n FROM <name> WHERE id = <i>``, a new literal each time so nothing is cached),
timed through ``spark.sql`` (parse, route, analyze: what planning costs; nothing is run):

- Spark alone: Spark's own ``spark.sql`` on the table's Spark name (no routing);
- routed, two-part: headwater's router, a lakehouse without catalogs (``sales.orders``);
- routed, two-part, catalogs present: the same statement, the lakehouse has a catalog (the
  parsed plan is walked for three-part names);
- three-part: ``main.sales.orders`` (a token scan, the rewrite and a second parse);
- USE CATALOG, one part: ``orders`` after ``USE CATALOG main; USE SCHEMA sales``.

Per variant: the median milliseconds per statement of ``--rounds`` rounds (rotating order, one
discarded warm-up round). Ratios: each routed variant ÷ Spark alone, three-part ÷ two-part.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import headwater  # noqa: E402
import results as results_file  # noqa: E402 - benchmarks/results.py
from headwater.spark.raw_sql import raw_sql  # noqa: E402

VARIANTS = ("Spark alone", "routed, two-part", "routed, two-part, catalogs present",
            "three-part", "USE CATALOG, one part")
SETUP = (
    "One `local[2]` session, a 1,000-row table, `SELECT id, n FROM <name> WHERE id = <i>` with "
    "a new literal per statement, timed through `spark.sql` (parse, route, analyze; nothing "
    "runs): Spark's own `spark.sql` on the table's Spark name, headwater's router on "
    "`sales.orders` without and with a catalog in the lakehouse, on `main.sales.orders`, and "
    "on `orders` after `USE CATALOG main; USE SCHEMA sales`. One discarded warm-up round, "
    "then the median of the rotating rounds.")


def timed(spark, variant: str, count: int, start: int) -> float:
    """Milliseconds per statement of ``count`` statements of ``variant``."""
    if variant == "USE CATALOG, one part":
        spark.sql("USE CATALOG main")
        spark.sql("USE SCHEMA sales")
    name = {"Spark alone": "`main__sales`.`orders`", "three-part": "main.sales.orders",
            "USE CATALOG, one part": "orders"}.get(variant, "sales.orders")
    run = (lambda text: raw_sql(spark, text)) if variant == "Spark alone" else spark.sql
    t0 = time.perf_counter()
    for i in range(start, start + count):
        run(f"SELECT id, n FROM {name} WHERE id = {i}")
    elapsed = (time.perf_counter() - t0) * 1000 / count
    if variant == "USE CATALOG, one part":
        spark.sql("USE CATALOG spark_catalog")
    return elapsed


def round_of(spark, lake, variants: tuple[str, ...], count: int, start: int
             ) -> dict[str, float]:
    found = {}
    for variant in variants:
        if variant == "routed, two-part":  # the lakehouse without its catalog
            lake.forget_catalog("main")
            found[variant] = timed(spark, variant, count, start)
            lake.create_catalog("main")
        else:
            found[variant] = timed(spark, variant, count, start)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--statements", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="30 statements, 1 round")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args(argv)
    if args.smoke:
        args.statements, args.rounds = 30, 1
    record = results_file.Run(
        __file__, "Three-part names: planning a statement", SETUP, order=12,
        parameters={"statements": args.statements, "rounds": args.rounds,
                    "smoke": args.smoke}, argv=argv)
    root = Path(tempfile.mkdtemp(prefix="hw-bench-catalogs-"))
    spark = headwater.spark_session("local[2]", lakehouse=root,
                                    conf={"spark.ui.enabled": "false"})
    lake = headwater.Lakehouse.of(spark)
    spark.sql("CREATE CATALOG main")
    spark.range(1000).selectExpr("id", "CAST(id % 7 AS INT) AS n").write \
        .saveAsTable("main.sales.orders")
    spark.range(1000).selectExpr("id", "CAST(id % 7 AS INT) AS n").write \
        .saveAsTable("sales.orders")
    round_of(spark, lake, VARIANTS, max(args.statements // 3, 10), 0)  # warm-up, discarded
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for i in range(args.rounds):
        order = VARIANTS[i % len(VARIANTS):] + VARIANTS[:i % len(VARIANTS)]
        for variant, ms in round_of(spark, lake, order, args.statements,
                                    (i + 1) * args.statements).items():
            samples[variant].append(ms)
    median = {v: statistics.median(s) for v, s in samples.items()}
    alone, two = median["Spark alone"], median["routed, two-part"]
    print(f"\n{args.statements} statements per variant, median of {args.rounds} rounds\n")
    print("| variant | ms per statement | ÷ Spark alone |")
    print("|---|---:|---:|")
    rows = []
    for variant in VARIANTS:
        print(f"| {variant} | {median[variant]:.2f} | {median[variant] / alone:.2f}x |")
        rows.append(results_file.variant({"variant": variant},
                                         {"ms per statement": samples[variant]},
                                         {"÷ Spark alone": median[variant] / alone}))
    for variant in VARIANTS[1:]:
        record.ratio(f"{variant} ÷ Spark alone", median[variant] / alone,
                     basis="ms per statement")
    record.ratio("three-part ÷ routed two-part", median["three-part"] / two,
                 basis="ms per statement")
    record.ratio("catalogs present ÷ routed two-part",
                 median["routed, two-part, catalogs present"] / two, basis="ms per statement")
    record.table(f"{args.statements} statements per variant: medians",
                 ["variant", "ms per statement", "÷ Spark alone"], rows,
                 chart={"kind": "bar", "label": ["variant"], "value": "ms per statement"},
                 formats={"÷ Spark alone": "{:.2f}x"})
    headwater.stop_spark()
    record.write(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
