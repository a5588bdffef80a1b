"""AUTO CDC: what a flow asks for (:class:`CdcSpec`) and a micro-batch turned into events.

An event is one source row with three internal columns: ``__hw_seq`` (the ``sequence_by``
value, a struct when several columns order the events), ``__hw_op`` (upsert, delete or
truncate) and the selected output columns. Identical duplicates (a change delivered twice)
collapse into one event; two *different* events with the same key and sequence are an error,
as is a NULL sequence (the rows are named; filter or quarantine them upstream, e.g. with an
expectation ``sequence IS NOT NULL`` on the source).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from pyspark.sql import functions as F

from headwater.delta.dml.common import ColumnOrSql, sql_text, to_column
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SEQ, OP = "__hw_seq", "__hw_op"
UPSERT, DELETE, TRUNCATE = "upsert", "delete", "truncate"
START_AT, END_AT = "__START_AT", "__END_AT"
# Databricks documents no default we could check; two days keeps late events of a normal
# outage from resurrecting deleted rows.
DEFAULT_TOMBSTONE_GC_SECONDS = 2 * 24 * 3600

SequenceBy = Union[ColumnOrSql, list[str], tuple[str, ...]]


def _invalid(what: str, why: str, fix: str) -> HeadwaterError:
    return HeadwaterError("HW_CDC_INVALID", what, why, fix)


def column_names(value: Any, option: str) -> tuple[str, ...] | None:
    """A list of names or Columns (SDP passes Columns) -> names; None stays None."""
    if value is None:
        return None
    if isinstance(value, (str,)) or not hasattr(value, "__iter__"):
        value = [value]
    names = []
    for item in value:
        text = item if isinstance(item, str) else sql_text(item)
        if not isinstance(text, str) or not text.strip():
            raise _invalid(f"{option}: {item!r} is not a column name.",
                           "AUTO CDC column lists name columns of the source.",
                           f"Pass {option}=['id', ...].")
        text = text.strip()
        if text.startswith("`") and text.endswith("`"):
            text = text[1:-1].replace("``", "`")
        names.append(text)
    return tuple(names)


@dataclass(frozen=True)
class CdcSpec:
    """An AUTO CDC flow's semantics (Databricks' ``create_auto_cdc_flow`` arguments).

    keys: columns identifying a row. sequence_by: a column name, SQL expression or Column, or
        a list of column names (ordered as a struct, first column first).
    apply_as_deletes / apply_as_truncates: conditions (SQL or Column) marking an event as a
        delete / a truncate of the whole table (SCD type 1 only). Default: none.
    column_list / except_column_list: the source columns the target keeps (keys always).
    stored_as_scd_type: 1 (latest row per key) or 2 (history, ``__START_AT``/``__END_AT``).
    track_history_column_list / track_history_except_column_list: SCD2 only: the columns
        whose change opens a new history row; others update the current row in place.
        Default: every output column except the keys and the sequence columns.
    ignore_null_updates: a NULL in an update keeps the stored value (default False).
    tombstone_gc_seconds: how long a delete keeps older events from resurrecting its key
        (default two days; ``pipelines.cdc.tombstoneGCThresholdInSeconds``).
    """

    keys: tuple[str, ...]
    sequence_by: Any
    apply_as_deletes: Any = None
    apply_as_truncates: Any = None
    column_list: tuple[str, ...] | None = None
    except_column_list: tuple[str, ...] | None = None
    stored_as_scd_type: int = 1
    track_history_column_list: tuple[str, ...] | None = None
    track_history_except_column_list: tuple[str, ...] | None = None
    ignore_null_updates: bool = False
    tombstone_gc_seconds: int = DEFAULT_TOMBSTONE_GC_SECONDS

    @classmethod
    def build(cls, keys: Any, sequence_by: SequenceBy, *, stored_as_scd_type: Any = 1,
              **kwargs: Any) -> CdcSpec:
        """Normalize and check the user's arguments (HW_CDC_INVALID on a contradiction)."""
        names = column_names(keys, "keys")
        if not names:
            raise _invalid("AUTO CDC needs keys.", "Events are applied per key.",
                           "Pass keys=['id'].")
        if str(stored_as_scd_type) not in ("1", "2"):
            raise _invalid(f"stored_as_scd_type={stored_as_scd_type!r} is not 1 or 2.",
                           "AUTO CDC stores the latest row (1) or its history (2).",
                           "Pass stored_as_scd_type=1 or 2.")
        scd = int(str(stored_as_scd_type))
        if isinstance(sequence_by, (list, tuple)):
            sequence_by = column_names(sequence_by, "sequence_by")
        for option in ("column_list", "except_column_list", "track_history_column_list",
                       "track_history_except_column_list"):
            kwargs[option] = column_names(kwargs.get(option), option)
        spec = cls(keys=names, sequence_by=sequence_by, stored_as_scd_type=scd, **kwargs)
        spec.check()
        return spec

    def check(self) -> None:
        if self.sequence_by is None:
            raise _invalid("AUTO CDC needs sequence_by.", "Events are ordered by it per key.",
                           "Pass sequence_by='updated_at' (or a list of columns).")
        for a, b in (("column_list", "except_column_list"),
                     ("track_history_column_list", "track_history_except_column_list")):
            if getattr(self, a) and getattr(self, b):
                raise _invalid(f"Both {a} and {b} were given.", "They say the same thing two "
                               "ways; which one wins would be a guess.", "Pass one of them.")
        if self.stored_as_scd_type == 1 and (self.track_history_column_list
                                              or self.track_history_except_column_list):
            raise _invalid("track_history_* was given for SCD type 1.",
                           "Only SCD type 2 keeps history.", "Pass stored_as_scd_type=2.")
        if self.stored_as_scd_type == 2 and self.apply_as_truncates is not None:
            raise _invalid("apply_as_truncates was given for SCD type 2.",
                           "Databricks allows truncates on SCD type 1 only: a truncate would "
                           "erase history.", "Remove apply_as_truncates, or use SCD type 1.")

    # --- columns -------------------------------------------------------------------------

    def sequence_column(self) -> Column:
        if isinstance(self.sequence_by, tuple):
            return F.struct(*[F.col(f"`{c}`") for c in self.sequence_by])
        column = to_column(self.sequence_by, "sequence_by")
        assert column is not None
        return column

    def sequence_names(self) -> set[str]:
        """The columns the sequence is made of, when it names plain columns."""
        if isinstance(self.sequence_by, tuple):
            return {c.lower() for c in self.sequence_by}
        if isinstance(self.sequence_by, str):
            return {self.sequence_by.strip().strip("`").lower()}
        return set()

    def sequence_output_column(self, output: list[str]) -> str | None:
        """The output column that *is* the sequence (sequence_by names one plain column the
        target keeps), or None."""
        if not isinstance(self.sequence_by, str):
            return None
        names = self.sequence_names()
        by_lower = {c.lower(): c for c in output}
        return by_lower.get(next(iter(names))) if len(names) == 1 else None

    def output_columns(self, source_columns: list[str], where: str) -> list[str]:
        """The target's columns from the source's: the keys first, then the chosen rest."""
        by_lower = {c.lower(): c for c in source_columns}

        def resolve(names: tuple[str, ...], option: str) -> list[str]:
            missing = [n for n in names if n.lower() not in by_lower]
            if missing:
                raise HeadwaterError(
                    "HW_CDC_COLUMN_UNKNOWN", f"{where}: {option} names {missing}, which the "
                    f"source ({', '.join(source_columns)}) does not have.",
                    "AUTO CDC columns are columns of the change source.",
                    "Fix the names (or select them in the source query).")
            return [by_lower[n.lower()] for n in names]

        keys = resolve(self.keys, "keys")
        if self.column_list:
            chosen = resolve(self.column_list, "column_list")
            chosen = keys + [c for c in chosen if c not in keys]
        else:
            dropped = set(resolve(self.except_column_list or (), "except_column_list"))
            dropped -= set(keys)
            chosen = keys + [c for c in source_columns if c not in dropped and c not in keys]
        return chosen

    def tracked_columns(self, output: list[str], where: str) -> list[str]:
        """SCD2: the columns whose change opens a new history row."""
        keys = {k.lower() for k in self.keys}
        by_lower = {c.lower(): c for c in output}
        for option in ("track_history_column_list", "track_history_except_column_list"):
            names = getattr(self, option) or ()
            missing = [n for n in names if n.lower() not in by_lower]
            if missing:
                raise HeadwaterError(
                    "HW_CDC_COLUMN_UNKNOWN", f"{where}: {option} names {missing}, which are "
                    f"not columns of the target ({', '.join(output)}).",
                    "History is tracked on the target's columns.", "Fix the names.")
        if self.track_history_column_list:
            wanted = {n.lower() for n in self.track_history_column_list}
            return [c for c in output if c.lower() in wanted and c.lower() not in keys]
        skip = keys | self.sequence_names() | {
            n.lower() for n in self.track_history_except_column_list or ()}
        return [c for c in output if c.lower() not in skip]


def events_of(batch: DataFrame, spec: CdcSpec, where: str, check: bool = True,
              distinct: bool = True) -> tuple[DataFrame, list[str]]:
    """The batch as events (output columns, ``__hw_seq``, ``__hw_op``), deduplicated and
    (check=True, one Spark job) checked; and the output columns. check=False leaves the check
    to the caller (:func:`raise_bad_events` on rows it found itself); distinct=False leaves
    identical copies in (the driver merges them itself, without Spark's shuffle)."""
    output = spec.output_columns(batch.columns, where)
    op = F.lit(UPSERT)
    if spec.apply_as_deletes is not None:
        op = F.when(F.coalesce(to_column(spec.apply_as_deletes, "apply_as_deletes"),
                               F.lit(False)), F.lit(DELETE)).otherwise(op)
    if spec.apply_as_truncates is not None:
        op = F.when(F.coalesce(to_column(spec.apply_as_truncates, "apply_as_truncates"),
                               F.lit(False)), F.lit(TRUNCATE)).otherwise(op)
    events = batch.select(*[F.col(f"`{c}`") for c in output],
                          spec.sequence_column().alias(SEQ), op.alias(OP))
    if distinct:
        events = events.dropDuplicates()
    if check:
        check_events(events, spec, output, where)
    return events, output


def _describe_sequence(spec: CdcSpec) -> str:
    if isinstance(spec.sequence_by, tuple):
        return ", ".join(spec.sequence_by)
    return str(sql_text(spec.sequence_by))


def check_events(events: DataFrame, spec: CdcSpec, output: list[str], where: str) -> None:
    keys = output[:len(spec.keys)]
    # One job for both checks: (key, sequence) groups that are NULL or hold two events.
    bad = (events.where(F.col(OP) != TRUNCATE).groupBy(*keys, SEQ).count()
           .where(F.col(SEQ).isNull() | (F.col("count") > 1)).limit(6).collect())
    raise_bad_events(spec, keys, [r for r in bad if r[SEQ] is None][:3],
                     [r for r in bad if r[SEQ] is not None][:3], where)


def raise_bad_events(spec: CdcSpec, keys: list[str], nulls: list[Any], dups: list[Any],
                     where: str) -> None:
    """HW_CDC_SEQUENCE_NULL / HW_CDC_DUPLICATE_SEQUENCE naming up to 3 of the (key, sequence)
    groups found (rows or dicts with the key columns and ``__hw_seq``); nothing when none."""
    if nulls:
        raise HeadwaterError(
            "HW_CDC_SEQUENCE_NULL", f"{where}: events with a NULL sequence_by value "
            f"({_describe_sequence(spec)}) for keys {[tuple(r[k] for k in keys) for r in nulls]}."
            " Nothing of this batch was applied.",
            "Events are ordered by sequence_by; a NULL cannot be placed.",
            "Give every event a sequence value, or drop such rows before the flow (e.g. an "
            "expectation 'seq IS NOT NULL' with on_violation='drop' quarantines them).")
    if dups:
        named = [(tuple(r[k] for k in keys), r[SEQ]) for r in dups]
        raise HeadwaterError(
            "HW_CDC_DUPLICATE_SEQUENCE", f"{where}: different events share a key and a "
            f"sequence value: {named} (key, sequence). Nothing of this batch was applied.",
            "Per key, the event with the highest sequence wins; two different events at the "
            "same sequence leave the winner undefined (identical copies are merged).",
            "Make sequence_by unique per key, e.g. add a tie-breaking column: "
            "sequence_by=['ts', 'lsn'].")
