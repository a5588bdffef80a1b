"""Messages: Kafka as a Spark source and sink (``format("headwater.kafka")``).

Imports nothing above ``headwater.errors``; clients are created only where they are used.
"""

from headwater.messages.kafka_source import FORMAT_NAME, KafkaDataSource

__all__ = ["FORMAT_NAME", "KafkaDataSource"]
