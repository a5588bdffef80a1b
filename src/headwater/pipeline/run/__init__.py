"""Running a pipeline, split by job:

- project_run.py: ``run_project`` / ``load_project``, project -> session -> graph -> runner;
- scheduler.py: ``Runner``, triggered runs (datasets start as their inputs end), the
  continuous loop, stop handling;
- flow_writer.py: a streaming table's foreachBatch writer, side tables, ``write_table``;
- native.py: stateless Delta-to-Delta flows read with Spark's parquet reader;
- refresh.py: materialized views recomputed (``Lakehouse.replace``: one commit each);
- compat.py: whether a flow may resume from its checkpoint;
- progress.py: ``FlowResult``, batches and metrics counted, summaries;
- full_refresh.py: ``--full-refresh``, tables and checkpoints dropped with their cascade.
"""

from headwater.pipeline.run.progress import FlowResult
from headwater.pipeline.run.project_run import LoadedProject, RunOutcome, load_project, run_project
from headwater.pipeline.run.scheduler import Runner

__all__ = ["FlowResult", "LoadedProject", "RunOutcome", "Runner", "load_project", "run_project"]
