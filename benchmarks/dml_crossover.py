"""Where Spark's copy-on-write DML becomes faster than delta-rs on the driver.

    .venv/bin/python benchmarks/dml_crossover.py [--rows 10000,100000,1000000] [--runs 3] [--ops DELETE,MERGE]

For each target size: a DELETE of 1% of the rows and a MERGE updating 1% (source of 1% of the
keys), on engine="spark" and engine="delta-rs", each on a fresh copy of the same table (copied
outside the timing). One discarded warm-up per variant, then interleaved runs; medians of wall
time and CPU seconds of the whole process tree (driver, JVM, Python workers). The result sets
DELTA_RS_MAX_TARGET_BYTES in src/headwater/delta/dml/engine.py.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

sys.path.insert(0, str(Path(__file__).parent))
import headwater  # noqa: E402
from delta_io import tree_cpu_seconds  # noqa: E402
from headwater.delta import dml  # noqa: E402

FILES = 4


def make_table(path: Path, rows: int) -> int:
    per = rows // FILES
    for i in range(FILES):
        ids = pa.array(range(i * per, (i + 1) * per), pa.int64())
        write_deltalake(str(path), pa.table({"id": ids, "v": pa.compute.multiply(ids, 2),
                                             "s": pa.array([f"name-{n}" for n in
                                                            range(i * per, (i + 1) * per)])}),
                        mode="append", configuration={"delta.enableChangeDataFeed": "true"})
    return sum(f.stat().st_size for f in path.glob("*.parquet"))


def run_one(spark, template: Path, work: Path, op: str, engine: str, rows: int) -> tuple:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(template, work)
    source = spark.range(0, rows, 100).selectExpr("id", "id * 3 AS v", "'new' AS s").alias("s")
    cpu, wall = tree_cpu_seconds(), time.perf_counter()
    if op == "DELETE 1%":
        result = dml.delete(spark, str(work), "id % 100 = 0", engine=engine)
    else:
        spec = dml.MergeSpec(path=str(work), source=source, condition="t.id = s.id",
                             target_alias="t")
        spec.clauses.append(dml.MergeClause("matched", "update", None, None))
        result = dml.merge(spark, spec, engine=engine)
    assert result.engine == engine and result.num_affected_rows == rows // 100, result
    return time.perf_counter() - wall, tree_cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="10000,100000,1000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ops", default="DELETE,MERGE", help="Statements to measure.")
    args = parser.parse_args()
    spark = headwater.spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                      "spark.ui.enabled": "false"})
    base = Path(tempfile.mkdtemp(prefix="hw-dml-crossover-"))
    print(f"{'rows':>9} {'MB':>6} {'statement':<10} {'spark s':>8} {'delta-rs s':>10} "
          f"{'spark cpu':>9} {'d-rs cpu':>8} {'faster':>8}")
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            template = base / f"t{rows}"
            size = make_table(template, rows)
            for op in (f"{o.strip()} 1%" for o in args.ops.split(",")):
                times: dict[str, list[tuple]] = {"spark": [], "delta-rs": []}
                for i in range(args.runs + 1):  # run 0: warm-up, discarded
                    for engine in ("spark", "delta-rs"):
                        measured = run_one(spark, template, base / "work", op, engine, rows)
                        if i:
                            times[engine].append(measured)
                med = {e: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
                       for e, v in times.items()}
                faster = min(med, key=lambda e: med[e][0])
                print(f"{rows:>9} {size / 2**20:>6.1f} {op:<10} {med['spark'][0]:>8.2f} "
                      f"{med['delta-rs'][0]:>10.2f} {med['spark'][1]:>9.2f} "
                      f"{med['delta-rs'][1]:>8.2f} {faster:>8}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        headwater.stop_spark()


if __name__ == "__main__":
    main()
