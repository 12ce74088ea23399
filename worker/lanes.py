"""How a worker shares its free slots between the interactive and the bulk lane.

Interactive jobs (one at a time from an app, a user waiting) and bulk jobs (runs, documents,
batches: thousands at once) wait in streams of their own. When both have work, each read gives
bulk ``bulk_share`` of the slots and interactive the rest, spread evenly over consecutive reads
(smooth weighted round robin), so that a worker freeing one slot at a time still gives bulk its
share and a flood of interactive jobs never starves a run. A lane with nothing waiting leaves its
slots to the other (the reader asks the other lane for them), so either lane alone gets the
whole worker.
"""

from __future__ import annotations

from contract.schemas import Priority


class LaneShares:
    """Splits each read's free slots between the lanes by weight, remembering the remainder between reads."""

    def __init__(self, bulk_share: float) -> None:
        if not 0 < bulk_share < 1:
            raise ValueError(f"bulk_share must be between 0 and 1 (exclusive), got {bulk_share}")
        self._weights = {Priority.INTERACTIVE: 1.0 - bulk_share, Priority.BULK: bulk_share}
        self._credit = dict.fromkeys(self._weights, 0.0)

    def split(self, slots: int) -> dict[Priority, int]:
        """How many of ``slots`` each lane is offered first (they add up to ``slots``)."""
        taken = dict.fromkeys(self._weights, 0)
        for _ in range(slots):
            for lane, weight in self._weights.items():
                self._credit[lane] += weight
            lane = max(self._credit, key=self._credit.__getitem__)  # ties: interactive (first)
            self._credit[lane] -= 1.0
            taken[lane] += 1
        return taken
