"""headwater: incremental data pipelines on Spark Structured Streaming over Delta Lake."""

from headwater.errors import HeadwaterError, translated, unwrap
from headwater.session import spark_session, stop_spark

__all__ = ["HeadwaterError", "spark_session", "stop_spark", "translated", "unwrap"]
__version__ = "0.1.0"
