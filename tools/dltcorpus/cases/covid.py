"""JHU COVID-19 (sql/JHU COVID-19.sql): one JSON file per day, shaped like Johns Hopkins' daily
reports, whose columns changed over time: the first files have Province/State,
Country/Region, Last_Update, Confirmed, Deaths, Recovered; later ones add Latitude/Longitude;
the newest use FIPS, Admin2, Province_State, Country_Region, Lat, Long_, Active,
Combined_Key, Incident_Rate, Case_Fatality_Ratio. The notebook infers the schema from 2 files
(``SET spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles = 2``) in rescue mode,
so the newer columns arrive in ``_rescued_data`` and the cleansed view picks them out with
get_json_object. Round 2 adds two more days.

Files are named ``yyyy-MM-dd.json``: the notebook turns the file name into ``curr_date`` with
``TO_DATE(name without .json)``, which parses that form (Johns Hopkins' own files are
``MM-dd-yyyy.csv``; the JSON copy's names are not public)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, timedelta

from dltcorpus.cases.base import Case, Env, Row, TableCheck, write_json_lines

FOLDER = "databricks-datasets/COVID/CSSEGISandData/json"
PLACES = (("Washington", "US", "King", 53033, 47.4914, -121.8346),
          ("Washington", "US", "Snohomish", 53061, 48.0479, -121.6974),
          ("New York", "US", "New York City", 36061, 40.7672, -73.9715),
          ("Hubei", "China", None, None, 30.9756, 112.2707),
          (None, "Italy", None, None, 41.8719, 12.5674))
FIRST_DAY = date(2020, 1, 22)


@dataclass
class Covid(Case):
    files: list[tuple[str, list[Row]]] = field(default_factory=list)

    def write(self, env: Env, round_: int) -> None:
        days = range(8) if round_ == 1 else range(8, 10)
        for n in days:
            day = FIRST_DAY + timedelta(days=n * 7)
            records = [self._record(n, day, place) for place in PLACES]
            name = f"{day.isoformat()}.json"
            self.files.append((name, records))
            write_json_lines(env.data / FOLDER / name, records)

    def _record(self, n: int, day: date, place: tuple) -> Row:  # type: ignore[type-arg]
        province, country, admin2, fips, lat, lon = place
        rng = self.rng
        confirmed = None if rng.random() < 0.1 else rng.randint(0, 5000) * (n + 1)
        deaths = rng.randint(0, 100)
        # the sampled first files type every column (a column NULL there would be typed string)
        recovered = rng.randint(0, 1000) if n < 2 else rng.choice([rng.randint(0, 1000), None])
        if n < 4:        # the first format (the two sampled files are among these)
            return {"Province/State": province, "Country/Region": country,
                    "Last_Update": f"{day.isoformat()}T17:00:00", "Confirmed": confirmed,
                    "Deaths": deaths, "Recovered": recovered}
        if n < 6:        # Latitude / Longitude added
            return {"Province/State": province, "Country/Region": country,
                    "Last_Update": f"{day.isoformat()}T23:45:00", "Confirmed": confirmed,
                    "Deaths": deaths, "Recovered": recovered, "Latitude": lat,
                    "Longitude": lon}
        key = ", ".join(p for p in (admin2, province, country) if p)
        return {"FIPS": fips, "Admin2": admin2, "Province_State": province,
                "Country_Region": country, "Last_Update": f"{day.isoformat()} 23:45:00",
                "Lat": lat, "Long_": lon, "Confirmed": confirmed, "Deaths": deaths,
                "Recovered": recovered, "Active": rng.randint(0, 900),
                "Combined_Key": key, "Incident_Rate": round(rng.uniform(0, 500), 3),
                "Case_Fatality_Ratio": round(rng.uniform(0, 9), 3)}

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        sampled = sorted(self.files)[:2]
        schema = {k for _, records in sampled for r in records for k in r}
        raw, cleansed = [], []
        for name, records in self.files:
            for r in records:
                raw.append({"Confirmed": r.get("Confirmed"), "source_file_name": name})
                rescued = {k: v for k, v in r.items() if k not in schema}

                def col(name: str, r: Row = r) -> object:
                    return r.get(name) if name in schema else None

                def got(key: str, rescued: Row = rescued) -> str | None:
                    return _json_text(rescued.get(key))

                if col("Confirmed") is None:
                    continue
                cleansed.append({
                    "fips": got("FIPS"), "admin2": got("Admin2"),
                    "country_region": col("Country/Region") or got("Country_Region"),
                    "province_state": col("Province/State") or got("Province_State"),
                    "combined_key": got("Combined_Key"),
                    "lat": got("Latitude") or got("Lat"), "lon": got("Longitude") or got("Long_"),
                    "active": got("Active"), "confirmed": col("Confirmed"),
                    "deaths": col("Deaths"), "recovered": col("Recovered"),
                    "case_fatality_ratio": got("Case_Fatality_Ratio"),
                    "incident_rate": got("Incident_Rate"),
                    "curr_date": date.fromisoformat(name[:-len(".json")])})
        wa = [r for r in cleansed if r["province_state"] == "Washington"]
        return [TableCheck(self.table("jhu_covid19_raw"), raw),
                TableCheck(self.table("jhu_covid19_cleansed"), cleansed),
                TableCheck(self.table("jhu_covid19_wa"), wa)]


def _json_text(value: object) -> str | None:
    """What get_json_object returns for a value: a string as it is, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def cases() -> list[Case]:
    return [Covid("jhu-covid-sql", ("sql/JHU COVID-19.sql",))]
