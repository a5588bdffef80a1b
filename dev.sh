#!/usr/bin/env bash
# One entry point for a fresh clone: creates .venv, installs headwater pinned, runs a command.
#   bash dev.sh demo    the main job: headwater demo for 60 s (pass your own options instead)
#   bash dev.sh test    the test suite (what CI runs)
#   bash dev.sh fast    the fast tier: every test that starts no other JVM (target 8 minutes; 7:33 on 2 cores)
#   bash dev.sh lint    ruff, mypy, and the import rules (rooms import only downward, no cycles)
#   bash dev.sh bench   the Delta I/O benchmark (outside CI)
#   bash dev.sh bench-pipeline   headwater run vs Spark Declarative Pipelines (outside CI)
#   bash dev.sh bench-pipeline20 a 20-dataset pipeline vs hand-written PySpark and SDP (outside CI)
#   bash dev.sh bench-ingest     read_files vs Spark's file source, 1k..100k files (outside CI)
#   bash dev.sh bench-eventlog   the demo pipeline with and without the event log (outside CI)
#   bash dev.sh bench-freshness  a landed file -> its rows in gold, continuous pipelines (outside CI)
#   bash dev.sh bench-cdc        AUTO CDC vs a hand-written deltalake MERGE, SCD1 and 2 (outside CI)
#   bash dev.sh bench-dml        MERGE / DELETE: Spark vs delta-rs vs hand-written deltalake (outside CI)
#   bash dev.sh bench-builder    DeltaTable.create + first write vs a plain df.write.format("delta") (outside CI)
#   bash dev.sh bench-catalogs   planning a statement with three-part names vs Spark alone (outside CI)
#   bash dev.sh bench-kafka      Kafka -> Delta vs the Python transfer limit, broker on this machine (outside CI)
#   bash dev.sh bench-s3         the Delta sink on S3 (moto) vs a local folder (outside CI)
#   bash dev.sh bench-autocompact  files after 1,000 micro-batches, with and without auto compaction
#   bash dev.sh bench-all        every bench-* command at full size, each writing benchmarks/results/*.json
#                                (any bench-* command: --json writes its results file, --smoke is quick)
#   bash dev.sh conformance      delta-spark's own Python tests and examples on headwater, pass counts
#   bash dev.sh docs             the docs site, built in strict mode into site/ (`docs serve`: preview)
#   bash dev.sh corpus PATH      Databricks' DLT notebooks (a snapshot of delta-live-tables-notebooks) on headwater
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.headwater-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] \
    || [ compat/delta-spark/pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # the docs extra too: the suite runs every code block of the docs (tests/test_docs.py)
  .venv/bin/python -m pip install -q -e ".[test,docs]"
  # delta-spark's Python names (`from delta.tables import DeltaTable`) for the conformance run
  # and users' delta-spark code: a distribution of its own (compat/delta-spark/README.md)
  .venv/bin/python -m pip install -q -e compat/delta-spark
  touch "$stamp"
fi
cmd=${1:-demo}
shift || true
case "$cmd" in
  demo)  if [ $# -eq 0 ]; then set -- --duration 60; fi
         exec .venv/bin/headwater demo "$@" ;;
  test)  exec .venv/bin/python -m pytest -n 2 --dist loadfile --durations=15 "$@" ;;
  fast)  exec .venv/bin/python -m pytest -n 2 --dist loadfile --durations=15 -m "not procs" "$@" ;;
  lint)  .venv/bin/ruff check src tests benchmarks examples tools
         .venv/bin/mypy
         exec .venv/bin/python tools/check_imports.py ;;
  bench) exec .venv/bin/python benchmarks/delta_io.py "$@" ;;
  bench-pipeline) exec .venv/bin/python benchmarks/pipeline_vs_sdp.py "$@" ;;
  bench-pipeline20) exec .venv/bin/python benchmarks/pipeline_20.py "$@" ;;
  bench-ingest) exec .venv/bin/python benchmarks/ingest_scale.py "$@" ;;
  bench-eventlog) exec .venv/bin/python benchmarks/event_log_overhead.py "$@" ;;
  bench-freshness) exec .venv/bin/python benchmarks/freshness.py "$@" ;;
  bench-cdc) exec .venv/bin/python benchmarks/cdc_apply.py "$@" ;;
  bench-dml) exec .venv/bin/python benchmarks/dml.py "$@" ;;
  bench-builder) exec .venv/bin/python benchmarks/table_builder.py "$@" ;;
  bench-catalogs) exec .venv/bin/python benchmarks/catalog_names.py "$@" ;;
  bench-kafka) exec .venv/bin/python benchmarks/kafka_throughput.py "$@" ;;
  bench-s3) exec .venv/bin/python benchmarks/s3_sink.py "$@" ;;
  bench-autocompact) exec .venv/bin/python benchmarks/autocompact_files.py "$@" ;;
  bench-all)  # one after another (they share the machine badly); a failure does not stop the rest
         failed=()
         for c in $(sed -n 's/^  \(bench-[a-z0-9-]*\)) exec .*/\1/p' dev.sh; sed -n 's/^  \(bench\)) exec .*/\1/p' dev.sh); do
           echo "== bash dev.sh $c --json $*" >&2
           bash dev.sh "$c" --json "$@" || failed+=("$c")
         done
         if [ ${#failed[@]} -gt 0 ]; then echo "bench-all: failed: ${failed[*]}" >&2; exit 1; fi ;;
  conformance) exec .venv/bin/python tools/delta_conformance.py "$@" ;;
  docs)  export NO_MKDOCS_2_WARNING=1  # mkdocs-material's banner about a successor
         if [ "${1:-}" = serve ]; then shift; exec .venv/bin/mkdocs serve "$@"; fi
         exec .venv/bin/mkdocs build --strict "$@" ;;
  corpus) exec .venv/bin/python tools/dlt_corpus.py "$@" ;;
  *) echo "usage: bash dev.sh demo|test|fast|lint|docs|bench|bench-pipeline|bench-pipeline20|bench-ingest|bench-eventlog|bench-freshness|bench-cdc|bench-dml|bench-builder|bench-catalogs|bench-kafka|bench-s3|bench-autocompact|bench-all|conformance|corpus" >&2; exit 2 ;;
esac
