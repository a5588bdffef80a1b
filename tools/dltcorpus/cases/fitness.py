"""Kafka fitness trackers (kafka-dlt-streaminganalytics/K-DLT-Python.py): JSON events made the
way K-GenerateEvents.py makes them (ip, time, version, model incl. "undef", color, heart_bpm
with 5% zeros, kcal) produced to the topic ``fitness-tracker`` on the test broker (Tansu, as
tests/test_kafka.py starts it), plus two records that are no JSON. The pipeline reads the
topic, parses the payload in a temporary table, drops invalid readings with four expectations
and keeps global statistics. Round 2 produces more events.

Configuration: KAFKA_SERVER (the test broker), confluentApiKey / confluentSecret (read by
the notebook into its JAAS line, which headwater turns into librdkafka's sasl.username /
sasl.password; the edit removes only kafka.security.protocol, so the plaintext test broker
never asks for them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dltcorpus.cases.base import Case, Env, Row, TableCheck, sample_stddev

TOPIC = "fitness-tracker"
PARTITIONS = 2
START = datetime(2022, 4, 11, 12, 0, 0)


@dataclass
class Fitness(Case):
    records: list[bytes] = field(default_factory=list)
    events: list[Row] = field(default_factory=list)

    def configuration(self, env: Env) -> dict[str, str]:
        return {"KAFKA_SERVER": env.kafka or "", "confluentApiKey": "corpus",
                "confluentSecret": "corpus"}

    def write(self, env: Env, round_: int) -> None:
        rng = self.rng
        if round_ == 1:
            env.broker.create_topic(TOPIC, PARTITIONS)
        new: list[bytes] = []
        for i in range(150 if round_ == 1 else 60):
            when = START + timedelta(minutes=round_ * 100, seconds=i * 7,
                                     microseconds=rng.randint(0, 999999))
            model = rng.choices(["Apple Watch", "Garmin", "Fitbit", "undef"],
                                [0.4, 0.3, 0.2, 0.1])[0]
            bpm = rng.choices([int(rng.gauss(90, 10)) + i // 60, 0], [0.95, 0.05])[0]
            event = {"ip": f"54.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                     "time": str(when), "version": rng.randrange(3, 7), "model": model,
                     "color": rng.choice(["navy", "teal", "olive"]), "heart_bpm": bpm,
                     "kcal": int(rng.gauss(2800, 400))}
            self.events.append(event)
            new.append(json.dumps(event).encode())
        new += [b"not json " + str(round_).encode(), b"{\"ip\": "]
        self.records += new
        env.broker.produce(TOPIC, [(n % PARTITIONS, None, value) for n, value in enumerate(new)])

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        clean = [{"time": datetime.fromisoformat(e["time"]), "bpm": e["heart_bpm"],
                  "model": e["model"]} for e in self.events
                 if e["heart_bpm"] > 0 and e["model"] != "undef"]
        bpms = [float(r["bpm"]) for r in clean]
        stat = {"eventsTotal": len(bpms), "max": max(bpms), "min": min(bpms),
                "average": sum(bpms) / len(bpms), "stddev": sample_stddev(bpms)}
        return [TableCheck(self.table("kafka_events"), [{"value": v} for v in self.records]),
                TableCheck(self.table("bpm_cleansed"), clean),
                TableCheck(self.table("global_stat"), [stat])]


def cases() -> list[Case]:
    return [Fitness("kafka-fitness", ("kafka-dlt-streaminganalytics/K-DLT-Python.py",),
                    needs_kafka=True)]
