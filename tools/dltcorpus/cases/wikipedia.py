"""Wikipedia clickstream (python/Wikipedia.py, sql/Wikipedia.sql): one JSON-lines file shaped
like /databricks-datasets' 2015_2_clickstream.json (prev_id, curr_id, n, prev_title,
curr_title, type), read in batch; materialized views clean it and keep the top referrers of
Apache_Spark and the top 50 pages. Round 2 appends rows to the same file."""

from __future__ import annotations

from dataclasses import dataclass, field

from dltcorpus.cases.base import Case, Env, Row, TableCheck, write_json_lines

FILE = ("databricks-datasets/wikipedia-datasets/data-001/clickstream/raw-uncompressed-json/"
        "2015_2_clickstream.json")
EXTERNAL = ("other-google", "other-empty", "other-wikipedia", "other-bing", "other-yahoo")


@dataclass
class Wikipedia(Case):
    sql: bool = False
    rows: list[Row] = field(default_factory=list)

    def write(self, env: Env, round_: int) -> None:
        rng = self.rng
        pages = [(1000 + i, f"Page_{i:03d}") for i in range(70)]
        spark_page = (4235, "Apache_Spark")
        new: list[Row] = []
        for _ in range(300 if round_ == 1 else 120):
            curr = rng.choice(pages)
            new.append(self._row(rng, curr, pages))
        # links into Apache_Spark, each referrer once per round with its own count
        for i, prev in enumerate(rng.sample(pages, 14 if round_ == 1 else 6)):
            row = self._row(rng, spark_page, pages)
            row.update(prev_id=prev[0], prev_title=prev[1], type="link",
                       n=1000 * round_ + 37 * i + 5)
            new.append(row)
        # rows with no current page: kept (a warning expectation)
        missing = self._row(rng, pages[0], pages)
        missing.update(curr_id=None, curr_title=None)
        new.append(missing)
        rng.shuffle(new)
        self.rows += new
        write_json_lines(env.data / FILE, self.rows)

    @staticmethod
    def _row(rng, curr: tuple[int, str], pages: list[tuple[int, str]]) -> Row:
        if rng.random() < 0.3:
            prev_id, prev_title, kind = None, rng.choice(EXTERNAL), "external"
        else:
            prev_id, prev_title = rng.choice(pages)
            kind = "link" if rng.random() < 0.9 else "other"
        return {"prev_id": prev_id, "curr_id": curr[0], "n": rng.randint(1, 400),
                "prev_title": prev_title, "curr_title": curr[1], "type": kind}

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        clean = [{"current_page_id": r["curr_id"], "current_page_title": r["curr_title"],
                  "click_count": r["n"], "previous_page_id": r["prev_id"],
                  "previous_page_title": r["prev_title"]} for r in self.rows]
        referrers = [{"referrer": r["previous_page_title"], "click_count": r["click_count"]}
                     for r in clean if r["current_page_title"] == "Apache_Spark"]
        totals: dict[str | None, int] = {}
        for r in clean:
            title = r["current_page_title"]
            totals[title] = totals.get(title, 0) + r["click_count"]
        top = [{"current_page_title": t, "total_clicks": n} for t, n in totals.items()]
        return [
            TableCheck(self.table("clickstream_raw"), [dict(r) for r in self.rows]),
            TableCheck(self.table("clickstream_clean"), clean),
            TableCheck(self.table("top_spark_referers" if self.sql else "top_spark_referrers"),
                       referrers, limit=(10, "click_count")),
            TableCheck(self.table("top_pages"), top, limit=(50, "total_clicks")),
        ]


def cases() -> list[Case]:
    return [Wikipedia("wikipedia-python", ("python/Wikipedia.py",)),
            Wikipedia("wikipedia-sql", ("sql/Wikipedia.sql",), sql=True)]
