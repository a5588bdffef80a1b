"""Whether a streaming flow may resume from its checkpoint.

A checkpoint holds offsets and aggregation state computed by the definition that wrote it.
Each start saves what the checkpoint depends on (output mode, statefulness, late-row keeping,
an aggregate's output schema) next to it; the next start compares, and refuses a change the
checkpoint cannot survive before Spark fails obscurely on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.conf.layout import FLOW_STATE
from headwater.errors import HeadwaterError
from headwater.spark.jvm import analyzed_plan
from headwater.spark.plan import node_name, nodes

if TYPE_CHECKING:
    from headwater.pipeline.graph import ResolvedFlow

# Plan nodes whose state lives in the checkpoint: changing whether a flow has one breaks it.
_STATE_NODES = ("Aggregate", "Deduplicate", "Join", "FlatMapGroupsWithState")


def check_checkpoint(rf: ResolvedFlow, checkpoint: str) -> None:
    """Raise HW_CHECKPOINT_INCOMPATIBLE if ``rf`` changed in a way ``checkpoint`` cannot
    survive; nothing when the checkpoint is new or compatible."""
    state_file = Path(checkpoint) / FLOW_STATE
    if not state_file.exists():
        return
    saved = json.loads(state_file.read_text())
    now = flow_state(rf)
    changes = [k for k in ("output_mode", "stateful", "keep_late_rows")
               if saved.get(k) != now[k]]
    if now["stateful"] and saved.get("schema") != now["schema"]:
        changes.append("the aggregate's output columns")
    if changes:
        raise HeadwaterError(
            "HW_CHECKPOINT_INCOMPATIBLE",
            f"Flow {rf.key} changed in a way its checkpoint cannot survive: "
            f"{', '.join(changes)}.",
            "The checkpoint holds offsets and aggregation state computed by the old "
            "definition; resuming would mix the two.",
            f"Run `headwater run --full-refresh {rf.dataset.name}` to rebuild the table "
            "(and its downstream streaming tables) from the start.")


def save_state(rf: ResolvedFlow, checkpoint: str) -> None:
    """Record what ``checkpoint`` now depends on (after the flow started on it)."""
    (Path(checkpoint) / FLOW_STATE).write_text(json.dumps(flow_state(rf)))


def flow_state(rf: ResolvedFlow) -> dict[str, Any]:
    stateful = any(node_name(n) in _STATE_NODES and n.isStreaming()
                   for n in nodes(analyzed_plan(rf.df)))
    return {"output_mode": rf.output_mode, "stateful": stateful,
            "keep_late_rows": rf.dataset.keep_late_rows,
            "schema": rf.df.schema.simpleString()}
