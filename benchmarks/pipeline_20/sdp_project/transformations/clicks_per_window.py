"""The watermark aggregate of the 20-dataset benchmark pipeline: clicks per page in 5-minute
event-time windows, a 10-minute watermark, each window written once the watermark passes its
end. `spark-pipelines run` (pyspark 4.3) gets the project without this file: it refuses a
`withWatermark` on a read of a pipeline table while registering the flow
(TABLE_OR_VIEW_NOT_FOUND for the table read, before the graph exists)."""

import transforms20 as t
from pyspark import pipelines as dp


@dp.table
def clicks_per_window():
    return t.clicks_per_window(spark.readStream.table("clicks_clean"), stream=True)  # noqa: F821
