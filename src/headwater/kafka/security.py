"""Java Kafka client security properties, as Databricks' DLT notebooks set them, made
librdkafka's.

Notebooks for Confluent Cloud, Event Hubs or MSK with SCRAM authenticate with a JAAS line:
``.option("kafka.sasl.jaas.config", "kafkashaded.org.apache.kafka.common.security.plain
.PlainLoginModule required username='KEY' password='SECRET';")`` (``kafkashaded.`` is
Databricks' relocated package). librdkafka has no JAAS; the same credentials are its
``sasl.username`` / ``sasl.password``. So the PLAIN and SCRAM login modules are translated;
any other module (OAUTHBEARER, Kerberos, AWS IAM) is HW_KAFKA_CLIENT_CONFIG naming librdkafka's
own properties. ``ssl.endpoint.identification.algorithm=""`` (the Java way to turn host name
checks off) is librdkafka's ``none``. Every other ``kafka.*`` property goes to librdkafka as
written; it names its own refusals (e.g. Java trust stores: use ``ssl.ca.location``).
"""

from __future__ import annotations

import re

from headwater.errors import HeadwaterError

JAAS = "sasl.jaas.config"
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_ENTRY = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
                    r"(?P<rest>.*?);?\s*$", re.DOTALL)
_PAIR = re.compile(r"(?P<key>[\w.]+)\s*=\s*(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|(?P<bare>[^\s;]+))")


def _refused(value: str, why: str, fix: str) -> HeadwaterError:
    # every value masked (passwords, client secrets, tokens): only the module and the keys
    shown = re.sub(r"([\w.]+\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s;]+)", r"\1***", value)
    return HeadwaterError("HW_KAFKA_CLIENT_CONFIG",
                          f"The Kafka option kafka.{JAAS}={shown!r} cannot be used.", why, fix)


def librdkafka_config(config: dict[str, str]) -> dict[str, str]:
    """``config`` (``kafka.*`` options without the prefix) with the Java-only properties
    above translated; the rest unchanged."""
    config = dict(config)
    if config.get("ssl.endpoint.identification.algorithm") == "":
        config["ssl.endpoint.identification.algorithm"] = "none"
    jaas = config.pop(JAAS, None)
    if jaas is None:
        return config
    entry = _ENTRY.match(jaas)
    if entry is None:
        raise _refused(jaas, "It is not a JAAS login module line.",
                       "Write it as '<LoginModule> required username=\"...\" "
                       "password=\"...\";', or set kafka.sasl.username and "
                       "kafka.sasl.password instead.")
    module = entry.group("module").removeprefix("kafkashaded.")
    if module not in (_PLAIN, _SCRAM):
        raise _refused(
            jaas, f"headwater's Kafka client is librdkafka, which has no JAAS; only "
            f"{_PLAIN.rsplit('.', 1)[1]} and {_SCRAM.rsplit('.', 1)[1]} (a user name and a "
            f"password) are translated, not {module.rsplit('.', 1)[-1]}.",
            "Remove kafka.sasl.jaas.config and set librdkafka's properties for that mechanism "
            "as kafka.* options, e.g. kafka.sasl.oauthbearer.method=oidc with "
            "kafka.sasl.oauthbearer.client.id / .client.secret / .token.endpoint.url, or "
            "kafka.sasl.kerberos.* for GSSAPI.")
    pairs = {m.group("key"): next(v for v in (m.group("dq"), m.group("sq"), m.group("bare"))
                                  if v is not None)
             for m in _PAIR.finditer(entry.group("rest"))}
    if "username" not in pairs or "password" not in pairs:
        raise _refused(jaas, "The login module line has no username or no password.",
                       "Give both: username='KEY' password='SECRET'.")
    config.setdefault("sasl.username", pairs["username"])
    config.setdefault("sasl.password", pairs["password"])
    mechanism = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
    if module == _PLAIN and mechanism is None:
        config["sasl.mechanism"] = "PLAIN"
    if module == _SCRAM and not (mechanism or "").upper().startswith("SCRAM-"):
        raise _refused(jaas, f"ScramLoginModule needs kafka.sasl.mechanism SCRAM-SHA-256 or "
                       f"SCRAM-SHA-512, not {mechanism!r}.",
                       "Add .option('kafka.sasl.mechanism', 'SCRAM-SHA-512') (the one your "
                       "cluster uses).")
    return config
