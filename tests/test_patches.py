"""The one table of headwater's changes to pyspark (headwater.spark.patches): installing changes
exactly its rows, ``headwater.uninstall()`` puts every attribute back (identity), a user's own
wrapper layered over or under headwater's survives and keeps working, scoped rows exist only
inside their block, and headwater never changes the active session or a running session's log
level.

Every test leaves the process as it found it: the ``pristine`` fixture uninstalls headwater for
the test and installs the scopes that were installed before again afterwards (the shared
session's ingest, kafka and session rows, and the lakehouse's if one is attached)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.catalog import Catalog
from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

import headwater
from headwater import Lakehouse
from headwater.conf.project_file import Project
from headwater.lakehouse import hooks
from headwater.pipeline.graph import Graph
from headwater.pipeline.live_schema import live_schema
from headwater.pipeline.loader import load_definitions
from headwater.spark import patches
from headwater.spark.active import kept_active
from headwater.spark.jvm import private_field
from headwater.spark.session import activated

CLASSES = (SparkSession, DataFrame, DataFrameReader, DataFrameWriter, DataStreamReader,
           DataStreamWriter, Catalog, dp)
# pyspark's own state, not methods: createDataFrame sets the active session itself
STATE = {"_activeSession", "_instantiatedSession"}
ROOT = Path(__file__).resolve().parents[1]


def snapshot() -> dict[object, dict[str, object]]:
    return {owner: {k: v for k, v in vars(owner).items() if k not in STATE} for owner in CLASSES}


def changed(before: dict, after: dict) -> set[str]:
    """``Owner.attribute`` of every attribute added, removed or replaced (by identity)."""
    missing = object()
    return {f"{getattr(owner, '__name__', owner)}.{name}".replace("pyspark.pipelines", "pipelines")
            for owner in CLASSES for name in set(before[owner]) | set(after[owner])
            if before[owner].get(name, missing) is not after[owner].get(name, missing)}


def row_names(*scopes: str) -> set[str]:
    """The table's rows of ``scopes`` that change something in this pyspark."""
    names = set()
    for patch in patches.PATCHES:
        owner = patches.resolve(patch.owner)
        if patch.scope in scopes and hasattr(owner, patch.attribute) != patch.added:
            names.add(patch.name.replace("pyspark.pipelines", "pipelines"))
    return names


def spark_active(spark) -> tuple[object, object]:
    """(pyspark's active session, the JVM's active session of this thread or None)."""
    found = spark._jvm.SparkSession.getActiveSession()
    return SparkSession._activeSession, found.get() if found.isDefined() else None


def _same(a, b) -> bool:
    """The same JVM session (or both none)."""
    return a is b or (a is not None and b is not None and a.equals(b))


@pytest.fixture(autouse=True)
def same_active_session(spark):
    """Whatever a test does, the next one starts with the active session it found."""
    with kept_active(spark):
        yield


@pytest.fixture
def pristine(spark):
    """pyspark as before headwater (every scope uninstalled) during the test; the scopes
    installed before are installed again after, in the same order."""
    scopes = patches.installed_scopes()
    headwater.uninstall()
    yield snapshot()
    headwater.uninstall()
    for scope in scopes:
        patches.install(scope)


# --- the table ------------------------------------------------------------------------------

def test_importing_headwater_changes_nothing_in_pyspark():
    """A fresh process: every attribute of pyspark's classes is the same object after
    ``import headwater`` and every public name (and each module holding a wrapper) loaded."""
    script = textwrap.dedent("""
        import importlib, json
        from pyspark import pipelines as dp
        from pyspark.sql import DataFrame, SparkSession
        from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
        from pyspark.sql.catalog import Catalog
        from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter
        owners = (SparkSession, DataFrame, DataFrameReader, DataFrameWriter, DataStreamReader,
                  DataStreamWriter, Catalog, dp)
        before = {o: dict(vars(o)) for o in owners}
        import headwater
        for name in headwater.__all__:
            getattr(headwater, name)
        from headwater.spark import patches
        for patch in patches.PATCHES:
            patches.resolve(patch.wrapper)
        after = {o: dict(vars(o)) for o in owners}
        out = sorted(f"{getattr(o, '__name__', o)}.{k}" for o in owners
                     for k in set(before[o]) | set(after[o])
                     if before[o].get(k) is not after[o].get(k))
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_every_row_resolves_and_names_an_attribute_pyspark_has_or_lacks_on_purpose():
    assert {p.scope for p in patches.PATCHES} == set(patches.SCOPES)
    for patch in patches.PATCHES:
        owner = patches.resolve(patch.owner)
        assert callable(patches.resolve(patch.wrapper)), patch
        if not patch.added:
            assert callable(vars(owner)[patch.attribute]), patch  # a method of its own
    keys = [(p.owner, p.attribute, p.scope) for p in patches.PATCHES]
    assert len(keys) == len(set(keys))  # one row per attribute and scope


def test_install_changes_exactly_the_rows_and_uninstall_puts_back_every_attribute(
        spark, pristine):
    before = pristine
    for owner in CLASSES:
        assert not any(patches.is_patch(v) for v in vars(owner).values()), owner
    assert not hasattr(DataStreamWriter, "table")
    assert not hasattr(dp, "create_auto_cdc_from_snapshot_flow")

    expected = row_names(*patches.SCOPES)  # (an added row counts while pyspark lacks it)
    assert "DataStreamWriter.table" in expected
    handles = [patches.install(scope) for scope in patches.SCOPES]
    after = snapshot()
    assert changed(before, after) == expected
    for patch in patches.PATCHES:
        owner = patches.resolve(patch.owner)
        if patch.name.replace("pyspark.pipelines", "pipelines") in expected:
            assert patches.is_patch(vars(owner)[patch.attribute]), patch
            if not patch.added:
                assert patches.original(owner, patch.attribute) \
                    is before[owner][patch.attribute], patch
    assert all(h.active for h in handles)
    assert patches.install(patches.SESSION) is handles[patches.SCOPES.index(patches.SESSION)]

    headwater.uninstall()
    assert changed(before, snapshot()) == set()
    assert patches.installed_scopes() == [] and not any(h.active for h in handles)
    headwater.uninstall()  # twice: nothing more to do
    assert changed(before, snapshot()) == set()


def test_one_scope_comes_off_alone_and_scopes_layer_in_any_order(spark, pristine, no_lakehouse):
    before = pristine
    patches.install(patches.KAFKA)
    with_kafka = snapshot()
    expected = row_names(patches.LAKEHOUSE)
    lakehouse = patches.install(patches.LAKEHOUSE)  # over kafka's DataFrameWriter.format
    assert changed(with_kafka, snapshot()) == expected
    lakehouse.restore()
    assert changed(with_kafka, snapshot()) == set()

    # kafka over the lakehouse's format, then the lakehouse taken off first: its shell stays
    # under kafka's, disabled, and the chain still reaches Spark's format
    patches.install(patches.LAKEHOUSE)
    patches.restore(patches.KAFKA)
    patches.install(patches.KAFKA)
    patches.restore(patches.LAKEHOUSE)
    assert patches.is_patch(vars(DataFrameWriter)["format"])
    writer = spark.range(1).write.format("kafka")
    assert str(private_field(writer._jwrite, "source")) == "headwater.kafka"  # kafka's runs
    assert hooks._formats.get(writer) is None  # the lakehouse's does not
    patches.restore(patches.KAFKA)
    assert changed(before, snapshot()) == set()  # its disabled shell was swept


def test_a_scope_whose_wrapper_fails_to_build_changes_nothing(spark, monkeypatch):
    before = snapshot()
    broken = patches.Patch("pyspark.sql:SparkSession", "range", "headwater.spark.patches:nothing",
                           patches.LIVE, "a factory that is not there")
    monkeypatch.setattr(patches, "PATCHES", (*patches.PATCHES, broken))
    with pytest.raises(AttributeError), live_schema():
        pass
    assert changed(before, snapshot()) == set()
    assert not patches.installed(patches.LIVE)
    monkeypatch.undo()
    with live_schema():  # the table without the broken row: the block works again
        assert changed(before, snapshot()) == row_names(patches.LIVE)
    assert changed(before, snapshot()) == set()


# --- wrappers of the user's -----------------------------------------------------------------

def test_a_users_wrapper_over_headwaters_survives_uninstall_and_still_works(
        spark, pristine, tmp):
    before = pristine
    for scope in (patches.INGEST, patches.KAFKA, patches.SESSION):
        patches.install(scope)
    theirs = vars(DataFrameWriter)["save"]
    calls: list[str] = []

    def save(self, *args, **kwargs):  # the user's own, over headwater's
        calls.append("save")
        return theirs(self, *args, **kwargs)

    DataFrameWriter.save = save  # type: ignore[method-assign]
    spark.range(3).write.format("delta").save(str(tmp / "on"))  # headwater's: no mode is fine
    assert calls == ["save"]

    headwater.uninstall()
    assert vars(DataFrameWriter)["save"] is save
    assert changed(before, snapshot()) == {"DataFrameWriter.save"}
    # the chain still works: the user's wrapper, headwater's (now a pass-through), Spark's
    spark.range(2).write.format("parquet").mode("overwrite").save(str(tmp / "p"))
    spark.range(2).write.format("parquet").mode("append").save(str(tmp / "p"))
    assert spark.read.parquet(str(tmp / "p")).count() == 4
    assert calls == ["save"] * 3
    # headwater's no longer runs: a Python data source write without a mode is Spark's refusal
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        spark.range(1).write.format("delta").save(str(tmp / "off"))
    assert calls == ["save"] * 4

    DataFrameWriter.save = theirs  # type: ignore[method-assign]  # the user unwraps
    headwater.uninstall()  # headwater's disabled shell, on top again, comes off
    assert changed(before, snapshot()) == set()


def test_a_users_wrapper_under_headwaters_is_what_uninstall_puts_back(spark, pristine):
    before = pristine
    spark_format = vars(DataFrameReader)["format"]
    seen: list[str] = []

    def format(self, source):  # noqa: A001 (Spark's name)
        seen.append(source)
        return spark_format(self, source)

    DataFrameReader.format = format  # type: ignore[method-assign]
    try:
        patches.install(patches.KAFKA)
        assert patches.original(DataFrameReader, "format") is format
        spark.read.format("kafka")
        assert seen == ["headwater.kafka"]  # headwater's alias ran first, then the user's
        headwater.uninstall()
        assert vars(DataFrameReader)["format"] is format
    finally:
        DataFrameReader.format = spark_format  # type: ignore[method-assign]
    assert changed(before, snapshot()) == set()


# --- scoped rows ----------------------------------------------------------------------------

def test_live_schema_rows_exist_only_while_a_block_runs(spark, no_lakehouse):
    spark.range(2).createOrReplaceTempView("live_probe")
    outside = snapshot()
    assert not patches.installed(patches.LIVE)
    entered = threading.Event()
    leave = threading.Event()

    def other_block() -> None:
        with live_schema():
            entered.set()
            leave.wait(30)

    with live_schema():
        inside = snapshot()
        assert changed(outside, inside) == row_names(patches.LIVE)
        assert spark.table("LIVE.live_probe").count() == 2
        assert spark.sql("SELECT * FROM LIVE.live_probe").count() == 2
        thread = threading.Thread(target=other_block)
        thread.start()
        assert entered.wait(30)
        with live_schema():  # nested: the same install
            assert changed(inside, snapshot()) == set()
    # the other thread's block still runs: the rows stay until the last block ends
    assert changed(inside, snapshot()) == set()
    leave.set()
    thread.join(30)
    assert changed(outside, snapshot()) == set()
    assert not patches.installed(patches.LIVE)
    spark.catalog.dropTempView("live_probe")


def test_pyspark_pipelines_definitions_load_in_a_headwater_session(spark, lake, tmp):
    """SDP's own guard (block_session_mutations, over Spark Connect's classes) around
    headwater's loading of ``pyspark.pipelines`` definitions and a graph's build, in a
    session with a lakehouse: both work, and every class is as it was after."""
    block = pytest.importorskip("pyspark.pipelines.block_session_mutations")
    connect = [m["class"] for m in block.BLOCKED_METHODS]
    connect_before = {cls: dict(vars(cls)) for cls in connect}
    before = snapshot()
    active = spark_active(spark)
    root = tmp / "proj"
    (root / "defs").mkdir(parents=True)
    (root / "headwater.toml").write_text(
        '[pipeline]\nname = "p"\nroot = "lake"\ndefinitions = ["defs/*.py"]\n')
    (root / "defs" / "a.py").write_text(textwrap.dedent("""
        from pyspark import pipelines as dp
        assert hasattr(dp, "create_auto_cdc_from_snapshot_flow")  # lent while loading

        @dp.materialized_view
        def numbers():
            return spark.range(3)

        @dp.materialized_view
        def doubled():
            return spark.table("LIVE.numbers").selectExpr("id * 2 AS id")
    """))
    other = spark.newSession()
    with activated(other):  # the application's active session is another one
        mine = spark_active(spark)
        with block.block_session_mutations():
            registry = load_definitions(Project.load(root), spark)  # spark active meanwhile
            assert changed(before, snapshot()) == set()
        assert set(registry.datasets) == {"numbers", "doubled"}
        graph = Graph(registry, lake, dry=True).build()
        graph.close()
        now = spark_active(spark)
        assert now[0] is mine[0] is other and _same(now[1], mine[1])
    assert changed(before, snapshot()) == set()
    assert not hasattr(dp, "create_auto_cdc_from_snapshot_flow")
    assert {cls: dict(vars(cls)) for cls in connect} == connect_before
    now = spark_active(spark)
    assert now[0] is active[0] and _same(now[1], active[1])


# --- sessions -------------------------------------------------------------------------------

def test_new_sessions_without_a_lakehouse_each_get_one_or_none(spark, no_lakehouse, tmp):
    before = spark_active(spark)
    first = spark.newSession()
    with activated(first):  # the user's own choice of active session
        mine = spark_active(spark)
        second = spark.newSession()  # headwater's newSession leaves the active one alone
        now = spark_active(spark)
        assert now[0] is mine[0] is first and _same(now[1], mine[1])
    path = str(tmp / "both_sessions")
    first.range(3).write.format("delta").save(path)
    assert second.read.format("delta").load(path).count() == 3

    lake = Lakehouse(tmp / "first_lake", first)
    try:
        first.sql("CREATE TABLE only_first (id LONG) USING delta")
        first.sql("INSERT INTO only_first VALUES 1, 2")
        assert lake.exists("only_first")
        assert Lakehouse.of(second) is None and Lakehouse.of(spark) is None
        second.range(2).write.format("delta").mode("append").save(path)  # Spark's writers
        assert first.read.format("delta").load(path).count() == 5
        third = first.newSession()  # a session of a session with a lakehouse shares it
        assert Lakehouse.of(third) is lake
        assert sorted(r.id for r in third.table("only_first").collect()) == [1, 2]
    finally:
        lake.detach()
    # statements on a session that is not the active one (a lakehouse's SQL, whose results
    # headwater builds as frames) leave the active session alone, as Spark's own do
    now = spark_active(spark)
    assert now[0] is before[0] and _same(now[1], before[1])


def test_new_sessions_of_a_session_with_a_lakehouse_share_it(spark, lake, tmp):
    spark.sql("CREATE TABLE shared_both (id LONG) USING delta")
    before = spark_active(spark)
    first, second = spark.newSession(), spark.newSession()
    after = spark_active(spark)
    assert after[0] is before[0] and _same(after[1], before[1])
    first.sql("INSERT INTO shared_both VALUES 7")
    assert Lakehouse.of(first) is lake and Lakehouse.of(second) is lake
    assert [r.id for r in second.table("shared_both").collect()] == [7]
    second.range(1).write.saveAsTable("second_table")  # into the shared lakehouse
    assert lake.exists("second_table")


def test_spark_session_leaves_a_running_sessions_log_level_and_active_session(spark):
    logger = spark._jvm.org.apache.logging.log4j.LogManager.getRootLogger()
    level = str(logger.getLevel())
    other = spark.newSession()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with activated(other):
            active = spark_active(spark)
            # the shared session's own settings, so nothing else changes for later tests
            again = headwater.spark_session(
                "local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                  "spark.ui.enabled": "false"})
            assert again is spark
            now = spark_active(spark)
            assert now[0] is active[0] is other and _same(now[1], active[1])
        assert str(logger.getLevel()) == "ERROR"
    finally:
        spark.sparkContext.setLogLevel(level)


def test_spark_session_leaves_a_running_sessions_settings(spark):
    """headwater's defaults are for a SparkContext it starts; an application's running
    session keeps its own settings (only the ``conf`` passed is applied)."""
    manager = "spark.sql.streaming.checkpointFileManagerClass"
    before = {key: spark.conf.get(key, None) for key in (manager, "spark.sql.shuffle.partitions")}
    spark.conf.unset(manager)
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        assert headwater.spark_session() is spark
        assert spark.conf.get(manager, None) is None
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
        headwater.spark_session(conf={"spark.sql.shuffle.partitions": "4"})
        assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def test_the_architecture_page_lists_every_patch():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text[text.index("## What headwater changes in pyspark"):]
    for patch in patches.PATCHES:
        assert f"`{patch.name}`" in table, patch.name
