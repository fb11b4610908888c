"""Server names: one spelling per server, however an event or the configuration spells it.

Exchange reads server names in any case, as DNS reads host names (RFC 1035, RFC 4343: ASCII
letters only), so MBX01 in the configuration, mbx01 in message-tracking logs and Mbx01 in a
shadow's event are one server. The rule, used by every engine (the reference replay, the
streaming twin's grouping key and its operator) and by the configuration's checks:

- `server_key(name)`: the name with its ASCII letters in lower case; two names are the same
  server when their keys are equal;
- `ServerNames.spelling(name)`: the one spelling the model works with, and that alerts, commands
  and the state say: as `[shadow_redundancy] servers` declares it, else the key. It depends on the name and the configuration alone, so every group, every engine and every
  run spells a server alike (alert and command ids are made of these spellings).

Events are respelled before the model sees them (`respelled`); their other names (next hops,
senders, mailbox servers) are not servers of the model's and keep their spelling.
"""

from __future__ import annotations

import dataclasses
import string
from operator import attrgetter
from typing import Iterable

from schemas import events as ev

__all__ = ["FOLD_FROM", "FOLD_TO", "ServerNames", "server_key"]

FOLD_FROM, FOLD_TO = string.ascii_uppercase, string.ascii_lowercase  # what Spark's translate() is given too
_FOLD = str.maketrans(FOLD_FROM, FOLD_TO)
_REMEMBERED = 4096  # spellings remembered; a real organisation has far fewer servers

# The fields of an event that name a server of the model: the group (primary) and the servers it compares.
_SERVER_FIELDS = {kind: tuple(f for f in ("node", "primary_server", "shadow_server", "candidate", "server")
                              if f in {x.name for x in dataclasses.fields(kind)})
                  for kind in ev.EVENT_TYPES.values()}
_SERVERS_OF = {kind: attrgetter(*fields) for kind, fields in _SERVER_FIELDS.items()}  # each: a tuple (2 fields or more)


def server_key(name: str) -> str:
    """The name as a key: its ASCII letters in lower case (`MBX01.contoso.com` -> `mbx01.contoso.com`)."""
    return name.translate(_FOLD)


class ServerNames:
    """The spelling of each server: as declared, else its key (see the module's docstring)."""

    def __init__(self, declared: Iterable[str] = ()):
        self.declared: dict[str, str] = {}
        for name in declared:
            self.declared.setdefault(server_key(name), name)
        self._spelled: dict[str, str] = {}  # every spelling met -> the server's
        self._as_spelled = {""}  # the spellings that need none (an empty name is no server's)

    def spelling(self, name: str) -> str:
        try:
            return self._spelled[name]
        except KeyError:
            if len(self._spelled) >= _REMEMBERED:  # names made up by bad input must not pile up
                self._spelled.clear()
                self._as_spelled.intersection_update({""})
            key = server_key(name)
            spelled = self._spelled[name] = self.declared.get(key, key)
            if spelled == name:
                self._as_spelled.add(name)
            return spelled

    def respelled(self, event: ev.Event) -> ev.Event:
        """`event` with its servers spelled as the model spells them (itself when they are, the usual case:
        one look-up of its names, which the operator pays for every event it reads)."""
        servers = _SERVERS_OF.get(type(event))
        if servers is None or self._as_spelled.issuperset(servers(event)):
            return event
        fields = _SERVER_FIELDS[type(event)]
        return dataclasses.replace(event, **{f: self.spelling(name) for f in fields if (name := getattr(event, f))})
