"""Unity-Catalog-style catalogs of a lakehouse: three-part names in SQL, the catalog
statements (``CREATE / USE / DROP CATALOG``, ``SHOW CATALOGS``, schemas of a catalog) and
``spark.catalog``'s catalog methods.

Spark has no Python catalog plugin, and its session catalog (where a lakehouse registers its
tables) has one level of databases. So a catalog's schema is a Spark database named
``<catalog>__<schema>`` (:mod:`headwater.conf.database`), and names are rewritten before Spark
parses a statement: :func:`spark_text` replaces each table name of a parsed statement that
Spark could not resolve (``main.sales.orders``; after ``USE CATALOG main`` also
``sales.orders``) by the Spark name of the same table (```main__sales`.`orders```), at the
name's exact place in the text, and ``current_catalog()`` / ``current_schema()`` by the
current ones. The session's current catalog and schema are Spark's current database
(``USE CATALOG main`` makes it ``main__default``): one-part names need no rewrite, and cloned
sessions (foreachBatch) keep them. Statements of a session that never named a catalog are not
touched (one scan of the parsed plan for three-part names).

The other ways considered: a catalog plugin (``spark.sql.catalog.main``) is a JVM class, so
it would need a compiler at install time (a JRE has none) and, to serve Python data source
tables, more of Spark's internals than a plugin may reach; rewriting names in the text with
no parser would mistake ``alias.struct.field`` for a table. The parser says which names are
tables, the text rewrite keeps everything else as written.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.conf.database import check_catalog, spark_database, split_database
from headwater.conf.layout import CATALOG_MARKER, CATALOG_SEPARATOR, DEFAULT_CATALOG, SCHEMA_MARKER
from headwater.errors import HeadwaterError
from headwater.lakehouse.catalog import lakehouse_of
from headwater.lakehouse.names import catalog_schemas, name_parts, spark_name
from headwater.lakehouse.sql.statements import Statement, children, option, seq, walk
from headwater.spark.active import data_frame
from headwater.spark.jvm import current_database, database_exists
from headwater.spark.raw_sql import raw_sql
from headwater.spark.sql_text import Token, tokens

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from headwater.lakehouse.sql.statements import SqlLakehouse as Lakehouse


def current_catalog(spark: SparkSession) -> str | None:
    """The session's current catalog, None for ``spark_catalog``."""
    return split_database(current_database(spark))[0]


def current_namespace(spark: SparkSession) -> tuple[str, str]:
    """(catalog, schema) as users name them: ``("spark_catalog", "default")``."""
    catalog, schema = split_database(current_database(spark))
    return catalog or DEFAULT_CATALOG, schema


# --- names in SQL text -------------------------------------------------------------------

# Parsed-plan nodes naming a table, and the field holding its parts.
_TABLE_NODES = {
    "UnresolvedRelation": "multipartIdentifier", "UnresolvedIdentifier": "nameParts",
    "UnresolvedTable": "multipartIdentifier", "UnresolvedTableOrView": "multipartIdentifier",
    "UnresolvedView": "multipartIdentifier",
}
_CURRENT_FUNCTIONS = {"CURRENT_CATALOG": 0, "CURRENT_SCHEMA": 1, "CURRENT_DATABASE": 1}
_NOT_CATALOGS = ("delta", "global_temp", DEFAULT_CATALOG)


def spark_text(lake: Lakehouse, spark: SparkSession, text: str, plan: Any) -> str:
    """``text`` with every table name Spark cannot resolve by itself in its Spark form: three-
    part names of the lakehouse's catalogs, and in a session whose current catalog is one of
    them, two-part names and ``current_catalog()`` / ``current_schema()``. ``text`` when
    there is nothing to rewrite."""
    catalog = None
    if lake.catalogs():
        catalog = current_catalog(spark)
    names = _table_names(plan, catalog is not None)
    if not names and catalog is None:
        return text
    toks = tokens(text)
    spans: list[tuple[int, int, str]] = []
    i = 0
    while i < len(toks):
        literal = _identifier_literal(toks, i, names, catalog)
        if literal is not None:  # IDENTIFIER('main.sales.orders'): its text, rewritten
            spans.append((toks[i].start, toks[i].end, literal))
            i += 1
            continue
        chain = _chain(toks, i)
        if chain is None:
            i += 1
            continue
        parts, end = chain
        key = tuple(p.lower() for p in parts)
        replacement = None
        if len(key) >= 3 and key[:3] in names:
            replacement = ".".join([f"`{spark_database(key[0], key[1])}`",
                                    *(_quoted(p) for p in parts[2:])])
        elif len(key) == 2 and catalog is not None and key in names:
            replacement = f"`{spark_database(catalog, key[0])}`.{_quoted(parts[1])}"
        elif len(key) == 1 and catalog is not None and key[0].upper() in _CURRENT_FUNCTIONS \
                and _empty_call(toks, end):
            value = current_namespace(spark)[_CURRENT_FUNCTIONS[key[0].upper()]]
            replacement, end = f"'{value}'", end + 2
            if _whole_select_item(toks, i, end):  # named as Spark names the call
                replacement += f" AS `{key[0].lower()}()`"
        if replacement is not None:
            spans.append((toks[i].start, toks[end].end, replacement))
        i = end + 1
    for start, stop, replacement in sorted(spans, reverse=True):
        text = f"{text[:start]}{replacement}{text[stop:]}"
    return text


def _table_names(plan: Any, two_part: bool) -> set[tuple[str, ...]]:
    """The table names of a parsed plan Spark cannot resolve: three parts in a catalog other
    than Spark's (and, with ``two_part``, two parts not naming a Spark database)."""
    found: set[tuple[str, ...]] = set()
    if plan is None:
        return found
    for node in _every_node(plan):
        field = _TABLE_NODES.get(node.getClass().getSimpleName())
        if field is None:
            continue
        parts = tuple(str(p).lower() for p in seq(getattr(node, field)()))
        unresolved = len(parts) == 3 or (two_part and len(parts) == 2
                                         and split_database(parts[0])[0] is None)
        if unresolved and parts[0] not in _NOT_CATALOGS:
            found.add(parts)
    return found


def _identifier_literal(toks: list[Token], i: int, names: set[tuple[str, ...]],
                        catalog: str | None) -> str | None:
    """The Spark name, as a string literal, of ``IDENTIFIER('<name>')``'s literal at token
    ``i`` when it names a table Spark cannot resolve; None otherwise."""
    tok = toks[i]
    if tok.text[0] not in "'\"" or i < 2 or toks[i - 1].text != "(" \
            or toks[i - 2].upper != "IDENTIFIER":
        return None
    key = tuple(name_parts(tok.text[1:-1]))
    if len(key) == 3 and key in names:
        database = spark_database(key[0], key[1])
    elif len(key) == 2 and catalog is not None and key in names:
        database = spark_database(catalog, key[0])
    else:
        return None
    return f"'`{database}`.`{key[-1]}`'"


def _every_node(plan: Any) -> list[Any]:
    """Every node of a parsed plan, with what :func:`walk` does not reach: the bodies of
    WITH's common table expressions and INSERT's target (neither is a child)."""
    found, stack = [], [plan]
    while stack:
        for node in walk(stack.pop()):
            found.append(node)
            kind = node.getClass().getSimpleName()
            if kind == "UnresolvedWith":
                stack.extend(pair._2() for pair in seq(node.cteRelations()))
            elif kind == "InsertIntoStatement":
                stack.append(node.table())
    return found


def _chain(toks: list[Token], i: int) -> tuple[list[str], int] | None:
    """The dotted name starting at token ``i`` (its parts, its last token's index); None when
    token ``i`` is no name, or follows a dot (the middle of another name)."""
    if not _is_name(toks[i]) or (i > 0 and toks[i - 1].text == "."):
        return None
    parts, end = [_unquoted(toks[i].text)], i
    while end + 2 < len(toks) and toks[end + 1].text == "." and _is_name(toks[end + 2]):
        parts.append(_unquoted(toks[end + 2].text))
        end += 2
    return parts, end


def _whole_select_item(toks: list[Token], first: int, last: int) -> bool:
    """True when tokens ``first..last`` are a whole item of a SELECT list (no alias after)."""
    before = toks[first - 1].upper if first > 0 else ""
    after = toks[last + 1].upper if last + 1 < len(toks) else ""
    return before in ("SELECT", ",", "DISTINCT") and after in ("", ",", "FROM", ";", ")")


def _empty_call(toks: list[Token], end: int) -> bool:
    return end + 2 < len(toks) and toks[end + 1].text == "(" and toks[end + 2].text == ")"


def _is_name(tok: Token) -> bool:
    return tok.text[0] == "`" or tok.text[0].isalpha() or tok.text[0] == "_"


def _unquoted(text: str) -> str:
    return text[1:-1].replace("``", "`") if text.startswith("`") else text


def _quoted(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


# --- statements ----------------------------------------------------------------------------

# Catalog statements Spark's parser does not know, by their leading keywords.
CATALOG_GRAMMAR = {
    ("USE", "CATALOG"): "UseCatalog", ("SET", "CATALOG"): "UseCatalog",
    ("CREATE", "CATALOG"): "CreateCatalog", ("DROP", "CATALOG"): "DropCatalog",
}


def done(spark: SparkSession) -> DataFrame:
    return data_frame(spark, [], "result string")


def use_catalog(lake: Lakehouse, st: Statement) -> DataFrame:
    """``USE CATALOG c`` / ``SET CATALOG c``: the current catalog, its ``default`` schema."""
    words = tokens(st.text)[2:]
    if len(words) != 1:
        raise _syntax(st, "USE CATALOG <name>")
    use(lake, st.session, _word(words[0]))
    return done(st.session)


def use(lake: Lakehouse, spark: SparkSession, name: str, schema: str | None = None) -> None:
    """Make catalog ``name`` (and ``schema``, default ``default``) the session's current."""
    catalog = check_catalog(name, "Catalog")
    if catalog is not None and catalog not in lake.catalogs():
        raise _no_catalog(lake, catalog)
    database = spark_database(catalog, schema)
    if schema is not None and not _schema_exists(lake, spark, catalog, schema):
        raise _no_schema(catalog, schema)
    if catalog is not None:
        raw_sql(spark, f"CREATE DATABASE IF NOT EXISTS `{database}`")
    raw_sql(spark, f"USE `{database}`")


def create_catalog(lake: Lakehouse, st: Statement) -> DataFrame:
    """``CREATE CATALOG [IF NOT EXISTS] c [COMMENT '...']``."""
    words = tokens(st.text)[2:]
    if_not_exists = [w.upper for w in words[:3]] == ["IF", "NOT", "EXISTS"]
    words = words[3:] if if_not_exists else words
    comment = None
    if len(words) == 3 and words[1].upper == "COMMENT" and words[2].text[0] in "'\"":
        comment, words = words[2].text[1:-1], words[:1]
    if len(words) != 1:
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"{st.text[:80]!r}: headwater's CREATE CATALOG takes a name, "
            "IF NOT EXISTS and a COMMENT.",
            "A catalog is a folder of the lakehouse root; MANAGED LOCATION, USING SHARE, "
            "OPTIONS and connections are Unity Catalog's.",
            "Write CREATE CATALOG [IF NOT EXISTS] name [COMMENT '...'].")
    name = _word(words[0])
    if not lake.create_catalog(name, comment) and not if_not_exists:
        raise HeadwaterError(
            "HW_CATALOG_EXISTS", f"Catalog {name} already exists in the lakehouse at "
            f"{lake.root}.", "CREATE CATALOG makes a new catalog.",
            "Add IF NOT EXISTS, or choose another name.", error_class="CATALOG_ALREADY_EXISTS")
    return done(st.session)


def drop_catalog(lake: Lakehouse, st: Statement) -> DataFrame:
    """``DROP CATALOG [IF EXISTS] c [RESTRICT | CASCADE]``: CASCADE drops its tables (their
    data, as DROP TABLE does); without it a catalog holding tables is refused."""
    words = tokens(st.text)[2:]
    if_exists = [w.upper for w in words[:2]] == ["IF", "EXISTS"]
    words = words[2:] if if_exists else words
    cascade = bool(words) and words[-1].upper == "CASCADE"
    if words and words[-1].upper in ("CASCADE", "RESTRICT"):
        words = words[:-1]
    if len(words) != 1:
        raise _syntax(st, "DROP CATALOG [IF EXISTS] <name> [RESTRICT | CASCADE]")
    catalog = check_catalog(_word(words[0]), "Catalog")
    if catalog is None:
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", "DROP CATALOG spark_catalog: Spark's own catalog cannot be "
            "dropped.", "It holds the lakehouse's schemas outside catalogs.",
            "Drop its tables or schemas instead.")
    if catalog not in lake.catalogs():
        if if_exists:
            return done(st.session)
        raise _no_catalog(lake, catalog)
    _drop_tables(lake, "HW_CATALOG_NOT_EMPTY", "Catalog", catalog, cascade)
    if current_catalog(st.session) == catalog:
        raw_sql(st.session, "USE `default`")
    _drop_databases(st.session, f"{catalog}{CATALOG_SEPARATOR}")
    lake.forget_catalog(catalog)
    _remove_if_empty(lake.root / catalog)  # other files in it (a landing folder) stay
    return done(st.session)


def _drop_tables(lake: Lakehouse, code: str, kind: str, name: str, cascade: bool) -> None:
    """DROP CATALOG / SCHEMA's tables (those named ``name.``...): refused without CASCADE,
    else each dropped as DROP TABLE drops it (an external one's name only)."""
    tables = [n for n in lake.tables() if n.startswith(f"{name}.")]
    if tables and not cascade:
        raise HeadwaterError(
            code, f"{kind} {name} holds tables: {', '.join(tables)}.",
            f"DROP {kind.upper()} without CASCADE drops only an empty {kind.lower()}.",
            "Drop its tables first, or add CASCADE (which deletes their data).",
            error_class="SCHEMA_NOT_EMPTY")
    for table in tables:
        lake.drop(table)


def _drop_databases(spark: SparkSession, prefix: str) -> None:
    """Drop Spark's databases named ``prefix...`` (a catalog's, or one schema's)."""
    for row in raw_sql(spark, "SHOW DATABASES").collect():
        if row[0] == prefix or (prefix.endswith(CATALOG_SEPARATOR) and row[0].startswith(prefix)):
            raw_sql(spark, f"DROP DATABASE IF EXISTS `{row[0]}` CASCADE")


def _remove_if_empty(folder: Any) -> None:
    """Remove ``folder``'s markers and empty folders, bottom up; anything else stays."""
    if not folder.is_dir():
        return
    for entry in list(folder.iterdir()):
        if entry.is_dir():
            _remove_if_empty(entry)
        elif entry.name in (CATALOG_MARKER, SCHEMA_MARKER):
            entry.unlink()
    if isinstance(folder, Path) and not any(folder.iterdir()):
        folder.rmdir()


def show_catalogs(lake: Lakehouse, st: Statement) -> DataFrame:
    """``SHOW CATALOGS [[LIKE] 'pattern']``: ``spark_catalog`` and the lakehouse's."""
    pattern = option(st.plan.pattern())
    names = [DEFAULT_CATALOG, *lake.catalogs()]
    if pattern is not None:
        names = [n for n in names if _like(n, str(pattern))]
    return data_frame(st.session, [(n,) for n in names], "catalog string")


def _like(name: str, pattern: str) -> bool:
    """Spark's SHOW pattern: ``*`` any characters, ``|`` alternatives, case-insensitive."""
    return any(fnmatch.fnmatchcase(name.lower(), alt.strip().lower())
               for alt in pattern.split("|"))


def use_namespace(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """``USE [SCHEMA | DATABASE] s`` / ``USE c.s`` / ``USE c``: in the current catalog, or a
    named one of the lakehouse; Spark's own statement otherwise."""
    if st.kind == "SetNamespaceCommand":  # USE SCHEMA s
        parts, schema_only = [str(p).lower() for p in seq(st.plan.namespace())], True
    else:  # SetCatalogAndNamespace(UnresolvedNamespace)
        parts = [str(p).lower() for p in seq(st.plan.child().multipartIdentifier())]
        schema_only = False
    current = current_catalog(st.session)
    if len(parts) == 1 and not schema_only and (parts[0] in lake.catalogs()
                                                or (parts[0] == DEFAULT_CATALOG and current)):
        use(lake, st.session, parts[0])  # USE c: Spark's rule, a catalog name first
        return done(st.session)
    if len(parts) == 2 and parts[0] in (*lake.catalogs(), DEFAULT_CATALOG):
        catalog, schema = parts
    elif len(parts) == 1 and current is not None:
        catalog, schema = current, parts[0]
    else:
        return None
    use(lake, st.session, catalog, schema)
    return done(st.session)


def create_namespace(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """``CREATE SCHEMA [IF NOT EXISTS] c.s`` (or ``s`` in the current catalog): its folder."""
    found = _catalog_schema(lake, st, st.plan.name())
    if found is None:
        return None
    catalog, schema = found
    if catalog not in lake.catalogs():
        raise _no_catalog(lake, catalog)
    if _schema_exists(lake, st.session, catalog, schema):
        if bool(st.plan.ifNotExists()):
            return done(st.session)
        raise HeadwaterError(
            "HW_SCHEMA_EXISTS", f"Schema {catalog}.{schema} already exists.",
            "CREATE SCHEMA makes a new schema.", "Add IF NOT EXISTS, or choose another name.",
            error_class="SCHEMA_ALREADY_EXISTS")
    check_catalog(schema, "Schema")  # a folder name, without "__"
    (lake.root / catalog / schema).mkdir(parents=True, exist_ok=True)
    # a marker: an object store has no empty folders
    (lake.root / catalog / schema / SCHEMA_MARKER).write_text(json.dumps({"name": schema}))
    raw_sql(st.session, f"CREATE DATABASE IF NOT EXISTS `{spark_database(catalog, schema)}`")
    return done(st.session)


def drop_namespace(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """``DROP SCHEMA [IF EXISTS] c.s [RESTRICT | CASCADE]`` of a catalog."""
    found = _catalog_schema(lake, st, st.plan.namespace())
    if found is None:
        return None
    catalog, schema = found
    if not _schema_exists(lake, st.session, catalog, schema):
        if bool(st.plan.ifExists()):
            return done(st.session)
        raise _no_schema(catalog, schema)
    _drop_tables(lake, "HW_SCHEMA_NOT_EMPTY", "Schema", f"{catalog}.{schema}",
                 bool(st.plan.cascade()))
    database = spark_database(catalog, schema)
    if current_database(st.session) == database:
        raw_sql(st.session, "USE `default`")
    _drop_databases(st.session, database)
    _remove_if_empty(lake.root / catalog / schema)
    return done(st.session)


def show_namespaces(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """``SHOW SCHEMAS [IN c] [LIKE 'p']``: a catalog's schemas; ``spark_catalog``'s without
    the catalogs' Spark databases."""
    node = next(children(st.plan))
    kind = node.getClass().getSimpleName()
    parts = [str(p).lower() for p in seq(node.multipartIdentifier())] \
        if kind == "UnresolvedNamespace" else []
    catalog = parts[0] if len(parts) == 1 else (current_catalog(st.session) if not parts
                                                else None)
    pattern = option(st.plan.pattern())
    if catalog is None or catalog == DEFAULT_CATALOG:
        if parts not in ([], [DEFAULT_CATALOG]) or not lake.catalogs():
            return None
        rows = raw_sql(st.session, "SHOW SCHEMAS").collect()
        names = [r[0] for r in rows if split_database(r[0])[0] not in lake.catalogs()]
    elif catalog not in lake.catalogs():
        raise _no_catalog(lake, catalog)
    else:
        names = sorted(set(catalog_schemas(lake.root, catalog)) | {
            split_database(r[0])[1] for r in raw_sql(st.session, "SHOW SCHEMAS").collect()
            if split_database(r[0])[0] == catalog})
    if pattern is not None:
        names = [n for n in names if _like(n, str(pattern))]
    return data_frame(st.session, [(n,) for n in names], "namespace string")


def show_tables(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """``SHOW TABLES [IN c.s] [LIKE 'p']`` in a catalog: Spark's answer, the schema named as
    users name it."""
    node = st.plan.namespace()
    if node.getClass().getSimpleName() == "UnresolvedNamespace":
        found = _catalog_schema(lake, st, node)
        if found is None:
            return None
        catalog, schema = found
        if not _schema_exists(lake, st.session, catalog, schema):
            raise _no_schema(catalog, schema)
    else:
        catalog, schema = split_database(current_database(st.session))
        if catalog is None:
            return None
    pattern = option(st.plan.pattern())
    like = "" if pattern is None else " LIKE '" + str(pattern).replace("'", "\\'") + "'"
    rows = raw_sql(st.session, f"SHOW TABLES IN `{spark_database(catalog, schema)}`{like}")
    return data_frame(st.session, [(schema if r[0] else r[0], r[1], r[2]) for r in rows.collect()],
                      rows.schema)


def _catalog_schema(lake: Lakehouse, st: Statement, node: Any) -> tuple[str, str] | None:
    """(catalog, schema) a namespace node names in one of the lakehouse's catalogs (two parts,
    or one in the current catalog); None for Spark's own."""
    parts = [str(p).lower() for p in seq(node.multipartIdentifier())]
    current = current_catalog(st.session)
    if len(parts) == 2 and parts[0] in lake.catalogs():
        return parts[0], parts[1]
    if len(parts) == 1 and current is not None:
        return current, parts[0]
    return None


def _schema_exists(lake: Lakehouse, spark: SparkSession, catalog: str | None, schema: str) -> bool:
    if catalog is None:
        return database_exists(spark, schema)
    return schema in catalog_schemas(lake.root, catalog)  # its folder: the Spark database
    # may be left from another lakehouse of the session


def _word(tok: Token) -> str:
    text = tok.text
    return text[1:-1] if text[0] in "`'\"" else text


def _syntax(st: Statement, form: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_SQL_UNSUPPORTED", f"{st.text[:80]!r} is not a valid statement.",
        f"The statement is written {form}.", f"Write {form}.",
        error_class="PARSE_SYNTAX_ERROR")


def _no_catalog(lake: Lakehouse, catalog: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_CATALOG_NOT_FOUND", f"The catalog {catalog} does not exist in the lakehouse at "
        f"{lake.root} (catalogs: {', '.join([DEFAULT_CATALOG, *lake.catalogs()])}).",
        "A catalog is made by CREATE CATALOG, or by the first table created with a "
        "three-part name in it.", f"Run CREATE CATALOG {catalog}, or check the name.",
        error_class="CATALOG_NOT_FOUND")


def _no_schema(catalog: str | None, schema: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_SCHEMA_NOT_FOUND", f"The schema {catalog or DEFAULT_CATALOG}.{schema} does not "
        "exist.", "A catalog's schema is made by CREATE SCHEMA or by its first table.",
        f"Run CREATE SCHEMA {catalog or DEFAULT_CATALOG}.{schema}, or check the name.",
        error_class="SCHEMA_NOT_FOUND")


# --- spark.catalog (the lakehouse rows of headwater.spark.patches) --------------------------

def _current_catalog(original: Any) -> Any:
    def currentCatalog(self: Any) -> str:  # noqa: N802 (Spark's name)
        if lakehouse_of(self._sparkSession) is None:
            return original(self)
        return current_namespace(self._sparkSession)[0]

    currentCatalog.__doc__ = original.__doc__
    return currentCatalog


def _set_current_catalog(original: Any) -> Any:
    def setCurrentCatalog(self: Any, catalogName: str) -> None:  # noqa: N802, N803
        lake = lakehouse_of(self._sparkSession)
        if lake is None:
            return original(self, catalogName)
        use(lake, self._sparkSession, catalogName)
        return None

    setCurrentCatalog.__doc__ = original.__doc__
    return setCurrentCatalog


def _current_database(original: Any) -> Any:
    def currentDatabase(self: Any) -> str:  # noqa: N802 (Spark's name)
        if lakehouse_of(self._sparkSession) is None:
            return original(self)
        return current_namespace(self._sparkSession)[1]

    currentDatabase.__doc__ = original.__doc__
    return currentDatabase


def _set_current_database(original: Any) -> Any:
    def setCurrentDatabase(self: Any, dbName: str) -> None:  # noqa: N802, N803
        lake = lakehouse_of(self._sparkSession)
        catalog = None if lake is None else current_catalog(self._sparkSession)
        if lake is None or catalog is None:
            return original(self, dbName)
        use(lake, self._sparkSession, catalog, dbName.strip("`").lower())
        return None

    setCurrentDatabase.__doc__ = original.__doc__
    return setCurrentDatabase


def _list_catalogs(original: Any) -> Any:
    def listCatalogs(self: Any, pattern: str | None = None) -> list[Any]:  # noqa: N802
        found = original(self, pattern) if pattern is not None else original(self)
        lake = lakehouse_of(self._sparkSession)
        if lake is None or not found:
            return found
        kind = type(found[0])
        have = {c.name for c in found}
        extra = [kind(name=c, description=None) for c in lake.catalogs()
                 if c not in have and (pattern is None or _like(c, pattern))]
        return [*found, *extra]

    listCatalogs.__doc__ = original.__doc__
    return listCatalogs


def _spark_database_name(lake: Any, spark: SparkSession, name: str) -> str:
    """A schema as Spark's catalog knows it: ``main.sales`` (or ``sales`` in catalog main)
    is ``main__sales``; any other name as written."""
    parts = name_parts(name)
    if len(parts) == 2 and parts[0] in lake.catalogs():
        return spark_database(parts[0], parts[1])
    current = current_catalog(spark)
    if len(parts) == 1 and current is not None:
        return spark_database(current, parts[0])
    return name


def _table_exists(original: Any) -> Any:
    def tableExists(self: Any, tableName: str, dbName: str | None = None) -> bool:  # noqa: N802, N803
        lake = lakehouse_of(self._sparkSession)
        if lake is None:
            return bool(original(self, tableName, dbName))
        name = f"{dbName}.{tableName}" if dbName else tableName
        return bool(original(self, spark_name(name, self._sparkSession)))

    tableExists.__doc__ = original.__doc__
    return tableExists


def _get_table(original: Any) -> Any:
    def getTable(self: Any, tableName: str) -> Any:  # noqa: N802, N803
        lake = lakehouse_of(self._sparkSession)
        if lake is None:
            return original(self, tableName)
        return original(self, spark_name(tableName, self._sparkSession))

    getTable.__doc__ = original.__doc__
    return getTable


def _list_tables(original: Any) -> Any:
    def listTables(self: Any, dbName: str | None = None,  # noqa: N802, N803
                   pattern: str | None = None) -> list[Any]:
        lake = lakehouse_of(self._sparkSession)
        if lake is not None and dbName is not None:
            dbName = _spark_database_name(lake, self._sparkSession, dbName)  # noqa: N806
        return list(original(self, dbName, pattern))

    listTables.__doc__ = original.__doc__
    return listTables
