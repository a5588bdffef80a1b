"""SQL on a lakehouse: :mod:`.router` (Spark's parser classifies a statement, ``HANDLERS``
names its handler), :mod:`.statements` (the router's vocabulary), and the handlers by what
they run: :mod:`.ddl` (CREATE / DROP / ALTER / DESCRIBE / INSERT), :mod:`.dml` (DELETE /
UPDATE / MERGE), :mod:`.delta_admin` (Delta's own grammar: OPTIMIZE, VACUUM, RESTORE, ...),
:mod:`.insert` (INSERT into tables with generated columns), :mod:`.constraints` (ADD / DROP
CONSTRAINT), :mod:`.json_paths` (Databricks' ``:`` on JSON strings) and :mod:`.event_log`
(the ``event_log()`` table function)."""
