"""Data-quality expectations on a pipeline table: warn, drop (to quarantine) or fail; on a
temporary view, checked inside each flow reading it (:func:`guard`).

Why this shape: counts must reach the streaming query's progress without an extra pass over
the data, so :func:`observe` attaches them to the streaming DataFrame with ``df.observe``;
Spark then reports them per micro-batch in ``StreamingQueryProgress.observedMetrics``. Dropping
and failing need the rows themselves, so :func:`split` runs inside ``foreachBatch``.

NULL: a condition that evaluates to NULL counts as *failed* (``NOT coalesce(cond, false)``), as
a Delta CHECK constraint rejects it. Write ``x IS NULL OR x > 0`` to let NULLs pass.

Spark reports the observed metrics of the *last* job that ran the micro-batch's plan (each
execution resets them; measured on Spark 4.3). So inside ``foreachBatch`` do not ``persist``
the batch and end with full passes over it (the writes of both outputs of :func:`split`),
never with a ``limit``/``take``/``show`` of it: those report partial counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from headwater.conf.layout import expectations_metrics
from headwater.errors import HeadwaterError
from headwater.errors.spark import first_line
from headwater.spark.jvm import observed_if_done

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation

ACTIONS = ("warn", "drop", "fail")
FAILED_RULES = "_failed_rules"
DROPPED = "dropped"  # the observed count of rows a "drop" rule removed
BATCH_ID = "_batch_id"
SAMPLE_CHARS = 500


@dataclass(frozen=True)
class Expectation:
    name: str
    condition: str  # a SQL boolean expression over the table's columns
    action: str  # "warn" | "drop" | "fail"


RuleLike = Expectation | tuple[str, str, str]


def _rules(rules: Iterable[RuleLike]) -> list[Expectation]:
    return [r if isinstance(r, Expectation) else Expectation(*r) for r in rules]


def metrics_name(table: str) -> str:
    """The name the counts carry in ``observedMetrics``."""
    return expectations_metrics(table)


def _invalid(table: str, rule: str, what: str, fix: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_EXPECTATION_INVALID", f"Expectation {rule!r} on table {table!r}: {what}.",
        "An expectation is a name, a SQL boolean condition over the table's columns, and an "
        f"action in {', '.join(ACTIONS)}.", fix)


def validate_rules(rules: Iterable[RuleLike], table: str, df: DataFrame | None = None) -> None:
    """Bad action, empty or duplicate name (case-insensitive), or a condition that does not
    parse (always checked) or resolve to a boolean over ``df``'s columns (when ``df`` is given)."""
    seen: set[str] = set()
    for rule in _rules(rules):
        if not isinstance(rule.name, str) or not rule.name.strip():
            raise _invalid(table, str(rule.name), "the name is empty", "Give every rule a name.")
        if rule.action not in ACTIONS:
            raise _invalid(table, rule.name, f"action {rule.action!r} is unknown",
                           f"Use one of: {', '.join(ACTIONS)}.")
        if rule.name.lower() in seen:
            raise _invalid(table, rule.name, "the name is used twice",
                           "Give each rule of a table its own name (names ignore case).")
        seen.add(rule.name.lower())
        try:
            cond = F.expr(rule.condition)  # parses eagerly
            if df is not None:
                dtype = df.select(cond.alias("c")).schema[0].dataType  # resolves eagerly
                if not isinstance(dtype, BooleanType):
                    raise _invalid(table, rule.name, f"condition {rule.condition!r} is "
                                   f"{dtype.simpleString()}, not boolean",
                                   "Write a comparison, e.g. 'amount > 0'.")
                _ = df.where(cond).schema  # no aggregates / window functions in a row filter
        except HeadwaterError:
            raise
        except Exception as exc:  # noqa: BLE001 - ParseException, AnalysisException
            detail = first_line(exc, 300)
            raise _invalid(table, rule.name, f"condition {rule.condition!r} is not valid: "
                           f"{detail}", "Fix the SQL so it names existing columns and "
                           "returns true/false per row.") from exc


def failed(rule: Expectation) -> Column:
    """True when a row fails ``rule``; a NULL condition result fails."""
    return ~F.coalesce(F.expr(rule.condition), F.lit(False))


def _dropped(rules: Sequence[Expectation]) -> Column:
    """True when a row fails any "drop" rule."""
    dropped = F.lit(False)
    for rule in rules:
        if rule.action == "drop":
            dropped = dropped | failed(rule)
    return dropped


def observe(df: DataFrame, rules: Iterable[RuleLike], table: str) -> DataFrame:
    """``df`` with metrics ``<rule>_failed`` per rule, ``rows`` and ``dropped`` (rows failing
    a "drop" rule) attached under ``expectations:<table>``: every micro-batch's progress
    carries them."""
    rules = _rules(rules)
    validate_rules(rules, table, df)
    counts = [F.count(F.when(failed(r), F.lit(1))).alias(f"{r.name}_failed") for r in rules]
    return df.observe(metrics_name(table), *counts, F.count(F.lit(1)).alias("rows"),
                      F.count(F.when(_dropped(rules), F.lit(1))).alias(DROPPED))


def count_rules(df: DataFrame, rules: Iterable[RuleLike]) -> dict[str, int]:
    """The metrics :func:`observe` attaches, computed now by one aggregate over a batch
    DataFrame (a materialized view's refresh has no micro-batch progress to carry them)."""
    rules = _rules(rules)
    counts = [F.count(F.when(failed(r), F.lit(1))).alias(f"{r.name}_failed") for r in rules]
    row = df.agg(*counts, F.count(F.lit(1)).alias("rows"),
                 F.count(F.when(_dropped(rules), F.lit(1))).alias(DROPPED)).first()
    assert row is not None  # a global aggregate has one row
    return {k: int(v or 0) for k, v in row.asDict().items()}


def guard(df: DataFrame, rules: Iterable[RuleLike], view: str) -> DataFrame:
    """A view's expectations, applied where the view is read, as Databricks evaluates them:
    a view is not stored, so every flow reading it runs its query and checks its rules on the
    rows *that flow* reads. The counts therefore come once per reading flow (a view read by
    two flows counts its rows twice), in that flow's progress under ``expectations:<view>``
    (the event log names the view as their dataset). "warn" keeps and counts failing rows,
    "drop" removes and counts them (no quarantine table: the view has none), "fail" stops the
    reading flow's update with HW_EXPECTATION_FAILED naming the rule and the row.

    The check is part of the view's own query: ``spark.table(view)``, SQL and
    ``headwater.read*`` see the same guarded rows. A view no flow reads checks nothing (its
    query never runs). A flow that reads the same view twice in one query is refused by Spark
    (two observations of one name). Databricks' documentation says the same of its temporary
    views: their expectations are tracked in the event log and a FAIL UPDATE rule fails the
    update that computes the view's rows; headwater has no other place than the reading
    flows where those rows exist."""
    rules = _rules(rules)
    validate_rules(rules, view, df)
    observed = observe(df, rules, view)
    keep = ~_dropped(rules)
    fail_rules = [r for r in rules if r.action == "fail"]
    if fail_rules:
        row = F.substring(F.to_json(F.struct(*[_quote(c) for c in df.columns])), 1, SAMPLE_CHARS)
        check = None
        for rule in fail_rules:
            message = F.concat(F.lit(
                f"[HW_EXPECTATION_FAILED] View {view!r}: expectation {rule.name!r} "
                f"({rule.condition}) failed on a row: "), F.coalesce(row, F.lit("{}")), F.lit(
                " Why: The rule's action is 'fail', so the update stops before the flow reading "
                f"the view writes anything. Fix: Fix the input data, or change {rule.name!r} to "
                "action 'drop' (remove and count the rows) or 'warn' (keep and count them)."))
            check = (F.when(failed(rule), F.raise_error(message)) if check is None
                     else check.when(failed(rule), F.raise_error(message)))
        assert check is not None
        keep = check.otherwise(keep)
    return observed.where(keep)


def _quote(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def split(batch_df: DataFrame, rules: Sequence[RuleLike], table: str,
          batch_id: int, *, validated: bool = False,
          count_dropped: Observation | None = None) -> tuple[DataFrame, DataFrame]:
    """(rows passing every drop rule, quarantined rows + ``_failed_rules``, ``_batch_id``):
    :func:`kept` and :func:`quarantined` of ``batch_df``. Raises HW_EXPECTATION_FAILED first
    if a "fail" rule fails in this batch. Each output is a lazy query over ``batch_df``;
    writing both scans the batch twice (plus once for fail rules)."""
    return (kept(batch_df, rules, table, batch_id, validated=validated,
                 count_dropped=count_dropped),
            quarantined(batch_df, rules, batch_id))


def kept(batch_df: DataFrame, rules: Sequence[RuleLike], table: str, batch_id: int, *,
         validated: bool = False, count_dropped: Observation | None = None) -> DataFrame:
    """The rows of ``batch_df`` passing every drop rule, after raising HW_EXPECTATION_FAILED
    if a "fail" rule fails in this batch.

    validated: the rules were checked against ``batch_df``'s columns already (a flow's stream,
    by :func:`observe` at its start: each micro-batch has the stream's columns), so each
    batch does not analyze every condition again. count_dropped: an Observation the output
    carries, counting (``dropped``) the rows :func:`quarantined` holds: the action that
    writes the kept rows tells whether there is anything to quarantine, without a job of
    its own (see :func:`dropped_count`), and the quarantine query is built only then (each
    DataFrame step is a plan analysis on the driver, on the micro-batch's path).
    """
    rules = _rules(rules)
    if not validated:
        validate_rules(rules, table, batch_df)
    fail_rules = [r for r in rules if r.action == "fail"]
    if fail_rules:
        _raise_on_fail(batch_df, fail_rules, table, batch_id)
    dropped = _dropped(rules)
    if count_dropped is not None:
        batch_df = batch_df.observe(count_dropped,
                                    F.count(F.when(dropped, F.lit(1))).alias(DROPPED))
    return batch_df.where(~dropped)


def quarantined(batch_df: DataFrame, rules: Sequence[RuleLike], batch_id: int) -> DataFrame:
    """The rows of ``batch_df`` failing a drop rule, with ``_failed_rules`` (every rule the
    row fails) and ``_batch_id``."""
    rules = _rules(rules)
    names = F.array(*[F.when(failed(r), F.lit(r.name)) for r in rules]) if rules else \
        F.array().cast("array<string>")
    return batch_df.where(_dropped(rules)).select(
        "*", F.array_compact(names).alias(FAILED_RULES),
        F.lit(batch_id).cast("long").alias(BATCH_ID))


def dropped_count(observation: Observation) -> int | None:
    """The rows to quarantine that :func:`split`'s ``count_dropped`` counted, once the kept
    rows were written; None when that write ran no job over the batch (a replayed batch
    already committed): the caller then looks at the quarantined rows themselves."""
    metrics = observed_if_done(observation)
    return None if metrics is None else int(metrics[DROPPED] or 0)


def _raise_on_fail(batch_df: DataFrame, fail_rules: list[Expectation], table: str,
                   batch_id: int) -> None:
    any_failed = F.lit(False)
    for rule in fail_rules:
        any_failed = any_failed | failed(rule)
    row_json = F.to_json(F.struct(*[_quote(c) for c in batch_df.columns]))
    flags = [failed(r).alias(f"f{i}") for i, r in enumerate(fail_rules)]
    sample = batch_df.where(any_failed).select(row_json.alias("row"), *flags).limit(1).collect()
    if not sample:
        return
    row = sample[0]
    rule = next(r for i, r in enumerate(fail_rules) if row[f"f{i}"])
    text = row["row"] or ""
    if len(text) > SAMPLE_CHARS:
        text = text[:SAMPLE_CHARS] + "...(truncated)"
    raise HeadwaterError(
        "HW_EXPECTATION_FAILED",
        f"Table {table!r}: expectation {rule.name!r} ({rule.condition}) failed in batch "
        f"{batch_id}; sample row: {text}",
        "The rule's action is 'fail', so the flow stops before writing the batch.",
        f"Fix the input data, or change {rule.name!r} to action 'drop' (quarantine the rows) "
        "or 'warn' (keep and count them).",
    )
