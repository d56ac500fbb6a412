"""Archived records: copies of what was archived, dead-letter topics, and redrive. The face is
``ArchivedRecords``: the archive log listed and its records produced back once."""

from shareproxy.runtime.archive.redrive import (
    ArchivedRecords,
    RedriveAsk,
    RedriveOutcome,
    RedriveResult,
    result_of,
)

__all__ = ["ArchivedRecords", "RedriveAsk", "RedriveOutcome", "RedriveResult", "result_of"]
