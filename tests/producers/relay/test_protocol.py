"""XSHADOW / XQDISCARD argument syntax and reply parsing."""

import pytest

from producers.relay import protocol
from producers.relay.protocol import DiscardAnswer, DiscardQuery, ProtocolError, ShadowRequest


def test_xshadow_round_trip_and_keys_in_any_order():
    request = ShadowRequest("ex01", "3f9a2c1b", "ex01.3f9a2c1b.17")
    assert protocol.parse_xshadow(request.argument()) == request
    assert protocol.parse_xshadow("id=ex01.a.1 qdb=a PRIMARY=ex01") == ShadowRequest("ex01", "a", "ex01.a.1")


@pytest.mark.parametrize("arg, message", [
    (None, "missing PRIMARY, QDB, ID"),
    ("PRIMARY=ex01 QDB=a", "missing ID"),
    ("PRIMARY=ex01 QDB=a ID=1 EXTRA=2", "unexpected 'EXTRA=2'"),
    ("PRIMARY=ex01 PRIMARY=ex02 QDB=a ID=1", "PRIMARY given twice"),
    ("PRIMARY=ex01 QDB=a ID=x;rm", "bad value for ID"),
    ("PRIMARY ex01", "unexpected 'PRIMARY'"),
])
def test_xshadow_refuses_bad_arguments(arg, message):
    with pytest.raises(ProtocolError, match=message):
        protocol.parse_xshadow(arg)


def test_xqdiscard_round_trip():
    query = DiscardQuery("ex02", "77aa")
    assert protocol.parse_xqdiscard(query.argument()) == query
    with pytest.raises(ProtocolError, match="missing QDB"):
        protocol.parse_xqdiscard("SHADOW=ex02")


def test_discard_reply_as_smtplib_returns_it():
    answer = DiscardAnswer("db1", ("ex01.db1.1", "ex01.db1.2"))
    lines = answer.reply_lines()
    assert lines == ["250-QDB=db1", "250-DISCARD ex01.db1.1", "250-DISCARD ex01.db1.2", "250 DISCARDS=2"]
    text = "\n".join(line[4:] for line in lines)  # smtplib strips the codes and joins with newlines
    assert protocol.parse_discard_reply(250, text) == answer
    assert protocol.parse_discard_reply(250, "QDB=db2\nDISCARDS=0") == DiscardAnswer("db2", ())


@pytest.mark.parametrize("code, text, message", [
    (530, "5.7.0 Authentication required for XQDISCARD", "refused"),
    (250, "DISCARDS=0", "malformed reply"),
    (250, "QDB=db1\nDISCARD a\nDISCARDS=2", "announces 2 discards, carries 1"),
    (250, "QDB=db1\nKEEP a\nDISCARDS=1", "malformed line"),
])
def test_discard_reply_refuses_what_is_not_an_answer(code, text, message):
    with pytest.raises(ProtocolError, match=message):
        protocol.parse_discard_reply(code, text)


def test_ehlo_advertising():
    ehlo = "ex01\nSIZE 33554432\nAUTH LOGIN PLAIN\nXSHADOW\nXQDISCARD\nHELP"
    assert protocol.advertises(ehlo, "XSHADOW") and protocol.advertises(ehlo, "XQDISCARD")
    assert not protocol.advertises("ex01\nXQDISCARD\nHELP", "XSHADOW")
    assert not protocol.advertises("XSHADOW\nHELP", "XSHADOW"), "the first line is the server's name"
