"""File formats of ``read_files``: how each turns a file's bytes into records.

Each module gives the reader (``ingest/parse.py``) and schema inference (``ingest/infer.py``)
the same records, so both see a file alike: ``json`` (lines and multi-line documents, plus
pyarrow's fast path for JSON lines), ``csv``, ``parquet``; ``common`` holds what they share.
"""
