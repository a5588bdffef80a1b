"""Loan risk (python/Loan Risk.py, sql/Loan Risk.sql): parquet files shaped like
/databricks-datasets/samples/lending_club/parquet/ (Lending Club's columns and text formats:
"11.44%", "Dec-2015", "10+ years", "n/a"), read in batch; materialized views clean them and
split features into training (issue year <= 2015) and validation sets. Round 2 adds a file.

The answers follow Databricks' runtime, where ANSI mode is off: ``CAST('' AS FLOAT)`` (an
emp_length of "n/a" once its text is removed) is NULL."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from dltcorpus.cases.base import Case, Env, Row, TableCheck, f32, spark_round

FOLDER = "databricks-datasets/samples/lending_club/parquet"
SCHEMA = pa.schema([
    ("loan_amnt", pa.float64()), ("funded_amnt", pa.float64()), ("term", pa.string()),
    ("int_rate", pa.string()), ("installment", pa.float64()), ("grade", pa.string()),
    ("sub_grade", pa.string()), ("emp_title", pa.string()), ("emp_length", pa.string()),
    ("home_ownership", pa.string()), ("annual_inc", pa.float64()),
    ("verification_status", pa.string()), ("issue_d", pa.string()), ("loan_status", pa.string()),
    ("purpose", pa.string()), ("addr_state", pa.string()), ("dti", pa.float64()),
    ("delinq_2yrs", pa.float64()), ("earliest_cr_line", pa.string()), ("revol_util", pa.string()),
    ("total_acc", pa.float64()), ("total_pymnt", pa.float64()), ("application_type", pa.string()),
    ("avg_cur_bal", pa.float64())])
STATUSES = ("Fully Paid", "Charged Off", "Default", "Current", "Late (31-120 days)",
            "In Grace Period")
EMP = ("10+ years", "< 1 year", "1 year", "2 years", "3 years", "5 years", "7 years", "n/a", None)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
CATEGORICALS = ["term", "home_ownership", "purpose", "addr_state", "verification_status",
                "application_type"]
NUMERICS = ["loan_amnt", "emp_length", "annual_inc", "dti", "delinq_2yrs", "revol_util",
            "total_acc", "credit_length_in_years"]
KEPT = ("Default", "Charged Off", "Fully Paid")


@dataclass
class Loans(Case):
    sql: bool = False
    rows: list[Row] = field(default_factory=list)

    def write(self, env: Env, round_: int) -> None:
        rng = self.rng
        new = []
        for _ in range(260 if round_ == 1 else 90):
            amount = float(rng.randrange(1000, 35000, 25))
            rate = rng.choice(["5.32", "7.89", "11.44", "13.99", "17.27", "24.5"])
            new.append({
                "loan_amnt": amount, "funded_amnt": amount,
                "term": rng.choice([" 36 months", " 60 months"]),
                "int_rate": f"{rate}%", "installment": round(amount / 36 * 1.1, 2),
                "grade": rng.choice("ABCDEFG"), "sub_grade": rng.choice(["A1", "B3", "C5", "D2"]),
                "emp_title": rng.choice(["teacher", "nurse", "engineer", None]),
                "emp_length": rng.choice(EMP),
                "home_ownership": rng.choice(["RENT", "OWN", "MORTGAGE"]),
                "annual_inc": float(rng.randrange(20000, 200000, 500)),
                "verification_status": rng.choice(["Verified", "Source Verified", "Not Verified"]),
                "issue_d": f"{rng.choice(MONTHS)}-{rng.randint(2012, 2017)}",
                "loan_status": rng.choice(STATUSES),
                "purpose": rng.choice(["debt_consolidation", "credit_card", "home_improvement"]),
                "addr_state": rng.choice(["CA", "NY", "TX", "IL", "WA", None]),
                "dti": round(rng.uniform(0, 35), 2), "delinq_2yrs": float(rng.randint(0, 3)),
                "earliest_cr_line": f"{rng.choice(MONTHS)}-{rng.randint(1985, 2010)}",
                "revol_util": rng.choice([f"{rng.uniform(0, 100):.1f}%", None]),
                "total_acc": float(rng.randint(3, 60)),
                "total_pymnt": round(amount * rng.uniform(0.3, 1.3), 2),
                "application_type": rng.choice(["Individual", "Joint App"]),
                "avg_cur_bal": rng.choice([float(rng.randint(0, 40000))] * 8 + [None, -1.0]),
            })
        self.rows += new
        folder = env.data / FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(new, SCHEMA), folder / f"part-{round_:05d}.parquet")

    def _clean(self) -> list[Row]:
        out = []
        for raw in self.rows:
            if raw["loan_status"] not in KEPT:
                continue
            row = dict(raw) if not self.sql else {}
            issue_year = float(raw["issue_d"][4:8])
            earliest_year = float(raw["earliest_cr_line"][4:8])
            row.update(
                bad_loan="false" if raw["loan_status"] == "Fully Paid" else "true",
                int_rate=_percent(raw["int_rate"]), revol_util=_percent(raw["revol_util"]),
                issue_year=issue_year, earliest_year=earliest_year,
                credit_length_in_years=issue_year - earliest_year,
                emp_length=_emp_sql(raw["emp_length"]) if self.sql else _emp_py(raw["emp_length"]),
                verification_status=raw["verification_status"].replace(
                    "Source Verified", "Verified").strip(" "),
                net=spark_round(raw["total_pymnt"] - raw["loan_amnt"], 2))
            if self.sql:
                for column in ("grade", "loan_amnt", "annual_inc", "dti", "addr_state", "term",
                               "home_ownership", "purpose", "application_type", "delinq_2yrs",
                               "total_acc", "avg_cur_bal"):
                    row[column] = raw[column]
            if raw["avg_cur_bal"] is not None and raw["avg_cur_bal"] >= 0:
                out.append(row)
        return out

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        clean = self._clean()
        summary = [{c: r[c] for c in ("grade", "loan_amnt", "annual_inc", "dti",
                                       "credit_length_in_years", "addr_state", "bad_loan", "net")}
                   for r in clean if self.sql or r["addr_state"] is not None]
        feature_cols = (["term", "home_ownership", "purpose", "addr_state", "verification_status",
                         "application_type", "loan_amnt", "emp_length", "annual_inc", "dti",
                         "delinq_2yrs", "revol_util", "total_acc", "credit_length_in_years",
                         "bad_loan", "int_rate", "net", "issue_year"])
        features = [{c: r[c] for c in feature_cols} for r in clean]
        split_cols = CATEGORICALS + NUMERICS + ["bad_loan", "int_rate", "net", "issue_year"]
        train = [{c: r[c] for c in split_cols} for r in features if r["issue_year"] <= 2015]
        valid = [{c: r[c] for c in split_cols} for r in features if r["issue_year"] > 2015]
        return [
            TableCheck(self.table("lendingclub_raw"), [dict(r) for r in self.rows]),
            TableCheck(self.table("lendingclub_clean"), clean),
            TableCheck(self.table("summary_data"), summary),
            TableCheck(self.table("features"), features),
            TableCheck(self.table("train_data"), train),
            TableCheck(self.table("valid_data"), valid),
        ]


def _percent(text: str | None) -> float | None:
    return None if text is None else f32(float(text.replace("%", "")))


def _emp_py(text: str | None) -> float | None:
    """The Python notebook's chain: regexp_replace, trim, "< 1" -> "0", "10+" -> "10", cast."""
    if text is None:
        return None
    value = re.sub(r"([ ]*+[a-zA-Z].*)|(n/a)", "", text).strip(" ")
    value = re.sub("< 1", "0", value).strip(" ")
    value = re.sub(r"10\+", "10", value).strip(" ")
    return _float(value)


def _emp_sql(text: str | None) -> float | None:
    """The SQL notebook's: regexp_replace, "< 1" -> "", "+" -> "", cast (no trim)."""
    if text is None:
        return None
    value = re.sub(r"([ ]*+[a-zA-Z].*)|(n/a)", "", text).replace("< 1", "").replace("+", "")
    return _float(value)


def _float(text: str) -> float | None:
    """CAST(text AS FLOAT) with ANSI off: NULL when it is no number (Spark trims spaces)."""
    try:
        return f32(float(text.strip()))
    except ValueError:
        return None


def cases() -> list[Case]:
    return [Loans("loan-risk-python", ("python/Loan Risk.py",)),
            Loans("loan-risk-sql", ("sql/Loan Risk.sql",), sql=True)]
