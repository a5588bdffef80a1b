"""The DLT notebook corpus: Databricks' published Delta Live Tables notebooks run on headwater.

``tools/dlt_corpus.py`` is the command (``bash dev.sh corpus PATH``); this package holds its
parts: ``files`` (a status for every file of the repository), ``edits`` (the mechanical edits
a notebook gets), ``cases`` (per pipeline: its notebooks, configuration, generated input data
and the answers computed without headwater), ``project`` (an SDP project folder, run with
``headwater run``), ``compare`` (Delta tables read with deltalake against the answers) and
``page`` (docs/dlt-notebooks-compatibility.md).
"""
