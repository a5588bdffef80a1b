"""Every pipeline of the repository the corpus runs, one case per pipeline."""

from __future__ import annotations

from pathlib import Path

from dltcorpus.cases import (
    audit_logs,
    cdc,
    covid,
    fitness,
    ingestion,
    integrals,
    loans,
    retail,
    snapshots,
    wikipedia,
)
from dltcorpus.cases.base import Case


def all_cases(repo: Path) -> list[Case]:
    return [*wikipedia.cases(), *loans.cases(), *retail.cases(), *covid.cases(),
            *audit_logs.cases(), *cdc.cases(repo), *snapshots.cases(), *fitness.cases(),
            *ingestion.cases(), *integrals.cases()]
