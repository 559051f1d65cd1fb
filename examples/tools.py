"""Example tools for ``configs/agents/front-desk.yaml``: a tiny in-memory appointment book.

They show how an agent's tools are declared (``tools:`` in the config, each with
``side_effects`` and ``confirm``) and how the trust policy treats them. The book
is per process and resets on restart; a real deployment calls its own systems.
"""

from __future__ import annotations

__all__ = ["lookup_appointment", "cancel_appointment", "reset_book"]

_BOOK: dict[str, dict[str, str]] = {}


def reset_book() -> None:
    """Restore the example appointments."""
    _BOOK.clear()
    _BOOK.update(
        {
            "A100": {"name": "Dana Smith", "when": "Tuesday at 10:00", "status": "booked"},
            "A101": {"name": "Lee Chen", "when": "Wednesday at 14:30", "status": "booked"},
        }
    )


reset_book()


async def lookup_appointment(appointment_id: str) -> str:
    """Look up an appointment by its id (read-only).

    Args:
        appointment_id: The appointment id, for example "A100".
    """
    entry = _BOOK.get(appointment_id.strip().upper())
    if entry is None:
        return f"No appointment {appointment_id} was found."
    return f"Appointment {appointment_id.upper()} is {entry['status']} for {entry['when']}."


async def cancel_appointment(appointment_id: str) -> str:
    """Cancel an appointment by its id.

    Args:
        appointment_id: The appointment id, for example "A100".
    """
    key = appointment_id.strip().upper()
    entry = _BOOK.get(key)
    if entry is None:
        return f"No appointment {appointment_id} was found."
    entry["status"] = "cancelled"
    return f"Appointment {key} for {entry['when']} is cancelled."
