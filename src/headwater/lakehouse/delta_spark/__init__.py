"""delta-spark's Python API on headwater: :mod:`.delta_table` (``DeltaTable`` and its
builders), :mod:`.table_builder` (``DeltaTable.create`` / ``replace`` ...), :mod:`.pip_utils`
(``configure_spark_with_delta_pip``). compat/delta-spark ships these as ``delta.tables`` and
``delta.pip_utils``."""
