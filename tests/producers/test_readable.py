"""A dead letter's line (producers/readable.py): its key and headers are bytes a person can read on a terminal."""

from producers.readable import line
from schemas.events import DeadLetter, KafkaHeader


def letter(key, headers=()):
    return DeadLetter(original=b"\xc3\x01", key=key, topic="shadowtwin.events", partition=0, offset=7,
                      reason="truncated header: 2 bytes", at_ms=0, headers=headers)


def test_a_key_that_is_not_printable_text_is_escaped_and_a_long_one_cut_with_its_size():
    not_utf8, line_feed, quote, right_to_left = b"\xff", b"\n", b'"', "\u202e".encode()
    key = b"ex" + not_utf8 + line_feed + quote + b"01" + right_to_left
    assert ' key "ex\\xff\\n\\"01\\u202e": ' in line(letter(key))
    assert ' key "' + "x" * 40 + '..." (1000 bytes): ' in line(letter(b"x" * 1000))
    assert ' key "": ' in line(letter(b"")) and " key " not in line(letter(None))


def test_the_first_five_headers_are_shown_with_how_many_more():
    headers = tuple(KafkaHeader(f"h{i}", None if i == 1 else b"v") for i in range(8))
    assert line(letter(None, headers)).endswith(
        ' headers h0="v", h1=null, h2="v", h3="v", h4="v" and 3 more: truncated header: 2 bytes')
