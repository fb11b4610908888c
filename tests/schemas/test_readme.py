"""schemas/README.md keeps its event catalogue in step with the classes."""

import re
from pathlib import Path

from schemas.events import EVENT_TYPES
from schemas.shape import OUTPUT_TYPES

README = Path(__file__).resolve().parents[2] / "schemas" / "README.md"


def catalogue_rows() -> dict[str, list[str]]:
    rows = {}
    for line in README.read_text().splitlines():
        match = re.match(r"^\| `(\w+)` \|(.*)\|$", line)
        if match:
            rows[match[1]] = [cell.strip() for cell in match[2].split("|")]
    return rows


def test_every_record_kind_has_a_row_in_the_catalogue():
    assert list(catalogue_rows()) == [*EVENT_TYPES, *OUTPUT_TYPES]


def test_each_row_gives_the_tracking_event_id_of_its_class():
    rows = catalogue_rows()
    for kind, cls in EVENT_TYPES.items():
        emitted_by, when, tracking = rows[kind]
        assert emitted_by in ("primary", "shadow", "any node", "the twin", "the SMTP probe") and when
        ids = [t.strip() for t in tracking.split(",") if t.strip()]
        assert (ids[0] if ids else None) == cls.tracking_event_id, kind
