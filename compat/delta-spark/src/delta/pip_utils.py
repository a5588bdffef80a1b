"""``configure_spark_with_delta_pip``: a headwater session instead of delta-spark's jars."""

from headwater.lakehouse.delta_spark.pip_utils import configure_spark_with_delta_pip

__all__ = ["configure_spark_with_delta_pip"]
