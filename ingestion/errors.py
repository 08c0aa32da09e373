"""Errors of ingestion."""

from __future__ import annotations

from methods.errors import InputError


class IngestError(InputError):
    """Ingestion cannot start or continue (bad inbox, busy, broken ledger); the message says why."""


class IngestBusyError(IngestError):
    """Another ingestion run holds the lock on this data root."""
