"""The admission side of the gateway's group commit (issue 10; issue 24 for the rate writer).

Each is a `quiz_servicekit.group_commit.GroupCommit` over the repository, as the settle writer
(`settlement/writer.py`): a caller's admission returns once its hold committed (before its
provider request); a failed batch is retried entry by entry.
"""

from __future__ import annotations

from quiz_llm_gateway.rows import Admission, AdmitArgs, Repository
from quiz_servicekit.group_commit import GroupCommit


class RateWriter(GroupCommit[AdmitArgs, Admission]):
    """Rate checks of calls held in this replica's slice of the cap (issue 24), in batches."""

    def __init__(self, repo: Repository) -> None:
        super().__init__("rate", repo.admit_rates)


class AdmitWriter(GroupCommit[AdmitArgs, Admission]):
    """Admissions (rate check, hold under the cap, or the refusal's ledger row) in batches."""

    def __init__(self, repo: Repository) -> None:
        super().__init__("admit", repo.admit_many, one=repo.admit_one)
