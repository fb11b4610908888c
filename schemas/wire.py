"""The wire format: Avro single-object encoding, and the reasons a record cannot be read.

    C3 01 | 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema | Avro binary body

(the Avro specification's "single object encoding"). The reasons are shared by the Python
decoder (`schemas.codec.DecodeError`) and the Spark one (`streaming.decode`), so a dead
letter says the same thing whichever side set it aside: `"<reason>: <detail>"`.
"""

from __future__ import annotations

MAGIC = b"\xc3\x01"
FINGERPRINT_SIZE = 8
HEADER_SIZE = len(MAGIC) + FINGERPRINT_SIZE  # the body starts at this offset (byte 11, 1-based)

# Why a record was set aside; the text after each in a dead letter's reason gives the detail.
BAD_MAGIC = "bad magic"                    # does not start with C3 01 (or is empty)
TRUNCATED_HEADER = "truncated header"      # starts with C3 01 but is shorter than the header
UNKNOWN_FINGERPRINT = "unknown fingerprint"  # no catalogued writer schema has that fingerprint
WRONG_SCHEMA = "wrong schema"              # a known schema, but not the one this topic carries
UNKNOWN_EVENT_KIND = "unknown event kind"  # a newer writer's event kind this reader does not know
CORRUPT_BODY = "corrupt body"              # the body is not a valid record of its writer schema
REASONS = (BAD_MAGIC, TRUNCATED_HEADER, UNKNOWN_FINGERPRINT, WRONG_SCHEMA, UNKNOWN_EVENT_KIND, CORRUPT_BODY)


class DecodeError(ValueError):
    """A record that cannot be decoded; `reason` is one of `REASONS`, `detail` says precisely what."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def header(fingerprint: bytes) -> bytes:
    return MAGIC + fingerprint


def split(data: bytes | None) -> tuple[bytes, memoryview]:
    """The writer fingerprint and the body of a single-object-encoded record (None: a Kafka tombstone)."""
    if data is None or data[:2] != MAGIC:
        raise DecodeError(BAD_MAGIC, bad_magic_detail((data or b"")[:2].hex(), looks_like(data)))
    if len(data) < HEADER_SIZE:
        raise DecodeError(TRUNCATED_HEADER, truncated_detail(len(data)))
    return bytes(data[2:HEADER_SIZE]), memoryview(data)[HEADER_SIZE:]


# The detail texts, written once for both decoders (Spark builds the same strings in SQL).

def bad_magic_detail(first_two_hex: str, looks_like: str = "") -> str:
    return (f"starts with {first_two_hex or 'nothing'}, expected {MAGIC.hex()} (an event is Avro single-object"
            f" encoded: schemas/README.md){looks_like}")


# What a record that does not start with the magic looks like, when other Kafka clients write such
# records: a bad magic's detail ends with it (`looks_like`; Spark asks the same of the bytes). Text tools
# (kafka-console-producer, kcat reading a terminal) decode what they are given as UTF-8, where the magic's
# c3 is no character: they send U+FFFD in its place, so no event can be typed or piped in with them.
TOMBSTONE = "; a tombstone (no value at all), which deletes a key from a compacted topic"
EMPTY = "; an empty value (0 bytes, not a tombstone), as kafka-console-producer sends an empty line"
CONFLUENT_FIRST_BYTE, CONFLUENT_HEADER_SIZE = b"\x00", 5
JSON_FIRST_BYTE = b"{"
REPLACEMENT_CHARACTER = "\ufffd".encode()
TYPED_TEXT = ("; perhaps an event that a text tool such as kafka-console-producer wrote: it reads lines as UTF-8,"
              " where c3, the first byte of every event, is no character, and sent efbfbd (U+FFFD) in its place;"
              " `shadowtwin replay FILE.jsonl` publishes JSON Lines as events")
JSON_TEXT = ("; perhaps JSON text, which the twin does not read (`shadowtwin replay FILE.jsonl` publishes JSON Lines"
             " as events)")


def confluent_framing(schema_id: int | str) -> str:
    return (f"; perhaps Confluent's framing (byte 0, then schema id {schema_id} of a schema registry), which the"
            " twin does not read")


def looks_like(data: bytes | None) -> str:
    """A tombstone, an empty value, Confluent's framing, JSON text or an event a text tool wrote, in words; else
    nothing."""
    if data is None:
        return TOMBSTONE
    if not data:
        return EMPTY
    if len(data) >= CONFLUENT_HEADER_SIZE and data[:1] == CONFLUENT_FIRST_BYTE:
        return confluent_framing(int.from_bytes(data[1:CONFLUENT_HEADER_SIZE], "big"))
    if data.startswith(REPLACEMENT_CHARACTER):
        return TYPED_TEXT
    return JSON_TEXT if data[:1] == JSON_FIRST_BYTE else ""


def truncated_detail(length: int | str) -> str:
    return f"{length} bytes, the single-object header alone has {HEADER_SIZE}"


def unknown_fingerprint_detail(fingerprint_hex: str) -> str:
    return f"{fingerprint_hex} is no catalogued writer schema"


def wrong_schema_detail(writer: str, expected: str) -> str:
    return f"written with {writer}, expected {expected}"


def corrupt_body_detail(writer: str) -> str:
    return f"not a valid {writer} record"


def unknown_kind_detail(kind: str, writer: str) -> str:
    return f"{kind} (written with {writer}) is not known to this reader"
