"""The CDC target of the 20-dataset benchmark pipeline: the customer change feed applied as
SCD type 1 (the newest change per customer by `seq`; a delete removes the customer).
`spark-pipelines run` gets the project without this file: SDP's AUTO CDC needs a table format
with MERGE, and SDP without jars writes parquet."""

import transforms20 as t
from pyspark import pipelines as dp

dp.create_streaming_table(t.CDC_TARGET)
dp.create_auto_cdc_flow(target=t.CDC_TARGET, source="changes_raw", keys=t.CDC_KEYS,
                        sequence_by=t.CDC_SEQUENCE, apply_as_deletes=t.CDC_DELETE,
                        except_column_list=["op", "seq"], stored_as_scd_type=1)
