"""The one configuration mechanism: frozen dataclasses built from TOML tables and environment variables.

Every settings class of the project (the tool's `infra.settings.Settings`, the model's
`state.parameters.ShadowRedundancyParameters`, the simulator's and the lab's topologies) is a
frozen dataclass whose defaults are the documented ones. `build(cls, table, where)` makes one
from a mapping and refuses, in one line naming the file, the key, the value and what is
allowed: unknown keys, wrong types, and values outside a field's `allowed` range (declared on
the field with `metadata=at_least(1)` and friends). `env_overlay` reads the same keys from
environment variables named after them (`SHADOWTWIN_TWIN_WATERMARK_DELAY` for
`[twin] watermark_delay`), for containers, and refuses a variable with the prefix that names
no key.

This module imports nothing from the project: every layer may use it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import enum
import os
import re
import ssl
import types
import typing
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping


class ConfigError(ValueError):
    """A configuration file, variable or override that cannot be used as it stands."""


# ---- what a field allows --------------------------------------------------------------------

def allowed(description: str, test: Callable[[Any], bool], **more: Any) -> dict[str, Any]:
    """Field metadata: the value must pass `test`; `description` says what is allowed."""
    return {"allowed": description, "test": test, **more}


def written_as(key: str, **check: Any) -> dict[str, Any]:
    """Field metadata: the field is written `key` in files (`queue_time` for `queue_time_ms`)."""
    return {"key": key, **check}


def at_least(n: int | float) -> dict[str, Any]:
    return allowed(f"a number >= {n}", lambda v: v >= n)


def more_than(n: int | float) -> dict[str, Any]:
    return allowed(f"a number > {n}", lambda v: v > n)


def port() -> dict[str, Any]:
    return allowed("a port number from 1 to 65535", lambda v: 1 <= v <= 65535)


_BOOTSTRAP_SERVER = re.compile(r"(?:[A-Za-z_]+://)?(?:\[[0-9A-Fa-f:.]+\]|[^\s:/,\[\]]+)(?::(?P<port>[0-9]{1,5}))?")


def bootstrap_servers() -> dict[str, Any]:
    """Kafka's bootstrap.servers: HOST:PORT (or HOST, the client's default port) separated by commas; a port that is
    no number from 1 to 65535 is refused here, not answered by the clients' 'Broker transport failure'."""
    def valid(text: str) -> bool:
        entries = [entry.strip() for entry in text.split(",") if entry.strip()]
        matches = [_BOOTSTRAP_SERVER.fullmatch(entry) for entry in entries]
        return bool(entries) and all(m and (m["port"] is None or 1 <= int(m["port"]) <= 65535) for m in matches)
    return allowed("HOST:PORT,... (a port from 1 to 65535)", valid)


def readable_file() -> dict[str, Any]:
    return allowed("a file that exists and can be read",
                   lambda v: v is None or (v.is_file() and os.access(v, os.R_OK)))


def certificate_authorities() -> dict[str, Any]:
    """A PEM file of the authorities to trust, as `ssl` loads it (a file of something else: refused here, not a
    traceback when the first https connection is made)."""
    def loads(path: Path | None) -> bool:
        if path is None:
            return True
        try:
            ssl.create_default_context(cafile=path)
        except (ssl.SSLError, OSError, ValueError):
            return False
        return True
    return allowed("a readable PEM file of certificate authorities", loads)


def positive_duration() -> dict[str, Any]:
    return allowed("a duration longer than zero", lambda v: v > timedelta(0))


def non_negative_duration() -> dict[str, Any]:
    return allowed("a duration of zero or more", lambda v: v >= timedelta(0))


def timespan(check: dict[str, Any]) -> dict[str, Any]:
    """Field metadata for an Exchange parameter's duration: a whole number alone is days, as in Set-TransportConfig
    (elsewhere it is refused, being as likely seconds)."""
    return {**check, "days_alone": True}


def timespans(cls: type) -> frozenset[str]:
    """The fields of the dataclass `cls` that are Exchange durations (`timespan`): a whole number alone is days."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("days_alone"))


def one_of(*choices: str) -> dict[str, Any]:
    return allowed(f"one of {', '.join(choices)}", lambda v: v in choices)


def matching(pattern: str, description: str) -> dict[str, Any]:
    compiled = re.compile(pattern)
    return allowed(description, lambda v: compiled.fullmatch(v) is not None)


# ---- durations --------------------------------------------------------------------------------

_EXCHANGE_SPAN = re.compile(
    r"^(?:(?P<days>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{1,2})(?::(?P<s>\d{1,2}(?:\.\d+)?))?$")
_DAYS = re.compile(r"^\d+$")
_SHORT_SPAN = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|min|h|d)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
LONGEST = timedelta(days=10675199, hours=2, minutes=48, seconds=5.4775807)  # .NET's TimeSpan.MaxValue


def parse_duration(value: object, *, days_alone: bool = False) -> timedelta:
    """"03:00:00", "2.00:00:00", "1:00" (Exchange's notation), "3h", "90s", "500ms", 180 (seconds), or a timedelta.

    Exchange's notation is read as .NET's TimeSpan.Parse (what Set-TransportConfig uses) reads it:
    "hh:mm", "hh:mm:ss", "d.hh:mm" and "d.hh:mm:ss", seconds with a fraction ("1:00" is an hour),
    and with `days_alone` (an Exchange parameter's value) "d": a whole number alone is days; without
    it such a text is refused, saying so, since it is as likely seconds; with it a number (TOML's
    `= 60`, seconds elsewhere) is refused, saying how to write its seconds or its days. Hours go from 0 to 23,
    minutes and seconds 0 to 59. Beyond that it is refused, saying how to write it: .NET refuses
    "00:61:00", and reads "25:00:00" as 25 days, not hours. So is a duration longer than TimeSpan holds (`LONGEST`, some 29,000 years)."""
    if isinstance(value, timedelta):
        return _within_longest(value, value)
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if value != value:  # NaN, which TOML can write
                raise DurationError(value, _EXAMPLES)
            if days_alone:  # seconds to TOML's number, days to Exchange's "60": neither is taken for the other
                raise DurationError(value, _bare_number(value))
            return _within_longest(value, timedelta(seconds=value))
        if isinstance(value, str):
            text = value.strip()
            if days_alone and _DAYS.match(text):
                return _within_longest(value, timedelta(days=int(text)))
            if match := _EXCHANGE_SPAN.match(text):
                seconds = float(match["s"] or 0)
                span = timedelta(days=int(match["days"] or 0), hours=int(match["h"]), minutes=int(match["m"]),
                                 seconds=seconds)
                _check_exchange_span(text, int(match["h"]), int(match["m"]), seconds, span,
                                     days=match["days"] is not None, with_seconds=match["s"] is not None)
                return _within_longest(value, span)
            if match := _SHORT_SPAN.match(text):
                return _within_longest(value, timedelta(seconds=float(match["n"]) * _UNITS[match["unit"]]))
            raise DurationError(value, _why_not(text))
    except (OverflowError, ValueError) as exc:  # timedelta's own limit (some 2.7 million years), inf
        if isinstance(exc, DurationError):
            raise
        raise DurationError(value, _TOO_LONG) from None
    raise DurationError(value, _EXAMPLES)


def _bare_number(value: int | float) -> str:
    """How to write a number an Exchange parameter was given: its seconds, or its days, in Exchange's notation."""
    seconds = exchange_span(_within_longest(value, timedelta(seconds=value)))
    days = f" or \"{value}.00:00:00\" ({value} days, as Exchange's TimeSpan reads \"{value}\")" \
        if isinstance(value, int) and 0 <= value <= LONGEST.days else ""
    return f"a bare number is ambiguous here: write \"{seconds}\" ({value} seconds){days}"


_TOO_LONG = 'longer than Exchange\'s TimeSpan holds: at most "10675199.02:48:05.4775807"'


def _within_longest(value: object, span: timedelta) -> timedelta:
    if abs(span) > LONGEST:
        raise DurationError(value, _TOO_LONG)
    return span


_EXAMPLES = 'use e.g. "03:00:00", "2.00:00:00", "3h", "90s"'
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")  # what .NET reads as days, when whole
_ISO_SPAN = re.compile(r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$", re.I)


class DurationError(ValueError):
    """A text that is no duration; `hint` says how to write what was likely meant."""

    def __init__(self, value: object, hint: str):
        super().__init__(f"not a duration: {value!r} ({hint})")
        self.hint = hint


def _why_not(text: str) -> str:
    """How to write what `text` likely meant: a number without a unit, or an ISO 8601 duration; or that it is
    negative (.NET's TimeSpan may be, no setting's duration is)."""
    if text.startswith("-"):
        return "a duration cannot be negative here"
    if _NUMBER.match(text):
        as_days = f" Exchange's TimeSpan reads \"{text}\" as {text} days;" if text.isdigit() else ""
        return f"a number needs a unit:{as_days} write \"{text}s\", \"{text}m\", \"{text}h\" or \"{text}d\""
    if (iso := _ISO_SPAN.match(text)) and any(iso.groups()):
        span = timedelta(days=int(iso["d"] or 0), hours=int(iso["h"] or 0), minutes=int(iso["m"] or 0),
                         seconds=float(iso["s"] or 0))
        return f"ISO 8601 is not Exchange's notation: write \"{exchange_span(span)}\""
    return _EXAMPLES


def _check_exchange_span(text: str, hours: int, minutes: int, seconds: float, span: timedelta, *, days: bool,
                         with_seconds: bool = True) -> None:
    """ValueError for a field of "d.hh:mm:ss" beyond .NET's range, naming the value and how to write it."""
    for name, value, top in (("hours", hours, 23), ("minutes", minutes, 59), ("seconds", int(seconds), 59)):
        if value > top:
            days_quirk = name == "hours" and not days and with_seconds
            quirk = f", which takes \"{value}:00:00\" for {value} days" if days_quirk else ""
            as_what = "as hours, " if quirk else ""
            why = f"as in Exchange's TimeSpan{quirk}; {as_what}write \"{exchange_span(span)}\""
            raise DurationError(text, f"{name} go from 0 to {top}, {why}")


def exchange_span(span: timedelta) -> str:
    """`span` in Exchange's notation: "03:00:00", "1.01:00:00", "00:00:01.5"."""
    hours, rest = divmod(span.seconds, 3600)
    fraction = f".{span.microseconds:06d}".rstrip("0") if span.microseconds else ""
    return f"{f'{span.days}.' if span.days else ''}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}{fraction}"


class Milliseconds(int):
    """A duration written as in `parse_duration`, held as whole milliseconds; a leading - makes it negative."""

    def __new__(cls, value: object) -> "Milliseconds":
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(value, Milliseconds):
            return value
        text = value.strip() if isinstance(value, str) else value
        sign = -1 if isinstance(text, str) and text.startswith("-") else 1
        if isinstance(text, str) and text[:1] in "+-" and text:
            text = text[1:]
        return super().__new__(cls, sign * int(parse_duration(text).total_seconds() * 1000))

    def __reduce__(self):  # pickled and copied as its milliseconds (int's way would read them again as seconds)
        return _milliseconds, (int(self),)


def _milliseconds(value: int) -> Milliseconds:
    return int.__new__(Milliseconds, value)


class Secret(str):
    """A password or key: used as its text, shown as `<secret>` (repr, str(), f-strings, messages),
    so that printing or logging settings never reveals it. `reveal()` is the text."""

    def __repr__(self) -> str:
        return "'<secret>'" if self else "''"

    def __str__(self) -> str:
        return "<secret>" if self else ""

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def reveal(self) -> str:
        return str.__str__(self)


class SparkInterval(str):
    """A Spark interval string ("30 seconds", "500 milliseconds", "1 minute"), checked when loaded; a
    number (TOML's `= 30`) is seconds, as for the project's other durations."""

    _FORM = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s+(?P<unit>millisecond|second|minute|hour|day)s?\s*$", re.I)
    _MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
    ALLOWED = 'a Spark interval such as "30 seconds", "500 milliseconds" or "1 minute"'

    def __new__(cls, text: str | int | float) -> "SparkInterval":
        if isinstance(text, (int, float)) and not isinstance(text, bool) and 0 <= text < 2**53:
            if text == int(text):
                text = f"{int(text)} seconds"
            elif text * 1000 == int(text * 1000):  # Spark's intervals count whole milliseconds
                text = f"{int(text * 1000)} milliseconds"
        if isinstance(text, str) and _NUMBER.match(text.strip()):
            raise ValueError(f'a number needs a unit: write "{text.strip()} seconds"')
        if not isinstance(text, str) or not cls._FORM.match(text):
            raise ValueError(f"not {cls.ALLOWED}: {text!r}")
        return super().__new__(cls, text.strip())

    @property
    def ms(self) -> int:
        match = self._FORM.match(self)
        assert match is not None
        return int(float(match["n"]) * self._MS[match["unit"].lower()])


# ---- building ----------------------------------------------------------------------------------

class Context(typing.NamedTuple):
    """Where a table comes from (for messages), what relative paths are relative to, and how a
    key as written becomes a field name (the model's parameters accept Exchange's CamelCase)."""

    where: str
    root: Path
    key: Callable[[str], str]


def build(cls: type, raw: Mapping[str, object], where: str = "settings", *, root: Path | None = None,
          key: Callable[[str], str] | None = None, base: object | None = None):
    """The frozen dataclass `cls` from `raw`, every name, type and value checked.

    `base`: an instance whose values stand for the keys `raw` does not give (else the defaults).
    """
    context = Context(where, root or Path.cwd(), key or (lambda name: name))
    return _build(cls, raw, "", context, base)


def _build(cls: type, raw: object, path: str, context: Context, base: object | None = None):
    if not isinstance(raw, Mapping):
        raise _refuse(context, path, raw, "a table")
    hints = typing.get_type_hints(cls)
    fields = {f.metadata.get("key", f.name): f for f in dataclasses.fields(cls) if f.init}
    values: dict[str, object] = {}
    for written, value in raw.items():
        key = context.key(str(written))
        if key not in fields:
            raise unknown_key(context.where, path, str(written), key, fields)
        name = fields[key].name
        values[name] = coerce(hints[name], value, _join(path, str(written)), context, fields[key].metadata)
    if base is not None:
        return dataclasses.replace(base, **values)
    for f in fields.values():
        if f.name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            key = f.metadata.get("key", f.name)
            raise ConfigError(f"{context.where}: {_join(path, key)}: missing; expected {_expected(hints[f.name])}")
    return cls(**values)


def unknown_key(where: str, path: str, written: str, key: str, known: Iterable[str]) -> ConfigError:
    """The error for a key (`written`, read as `key`) that no field has: the closest known key, and every known
    key, spelt as the key was written (Exchange's CamelCase for a parameter written so)."""
    known = list(known)
    spelt = _camel_case if key != written and not written.islower() else str
    meant = closest(key, known)
    return ConfigError(f"{where}: {_join(path, written)}: unknown key;" + (f" did you mean {spelt(meant)}?" if meant else "")
                       + f" known: {', '.join(sorted(map(spelt, known)))}")


def _camel_case(name: str) -> str:
    """shadow_resubmit_time_span -> ShadowResubmitTimeSpan: a key named as Exchange names its parameters."""
    return "".join(part.capitalize() for part in name.split("_"))


def coerce(hint: object, value: object, path: str, context: Context, metadata: Mapping[str, Any] = {}) -> object:
    """`value` as the type `hint`, checked against the field's `allowed` metadata."""
    try:
        days_alone = metadata.get("days_alone", False) and hint is timedelta
        result = parse_duration(value, days_alone=True) if days_alone else _as(hint, value, path, context)
    except ConfigError:
        raise
    except DurationError as exc:  # the value is shown already: only what to write instead
        raise _refuse(context, path, value, _expected(hint), "" if exc.hint == _EXAMPLES else exc.hint) from None
    except (ValueError, TypeError) as exc:
        raise _refuse(context, path, value, _expected(hint), str(exc)) from None
    test = metadata.get("test")
    if test is not None and not test(result):
        resolved = f"taken as {result}" if isinstance(result, Path) and str(result) != value else ""  # relative, ~
        raise _refuse(context, path, value, metadata["allowed"], resolved)
    return result


def _as(hint: object, value: object, path: str, context: Context) -> object:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [o for o in typing.get_args(hint) if o is not type(None)]
        if value is None or (isinstance(value, str) and value == "" and len(options) < len(typing.get_args(hint))):
            return None
        return _as(options[0], value, path, context)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, path, context)  # type: ignore[arg-type]
    if origin is tuple:
        items = _split(value)
        item_type = typing.get_args(hint)[0]
        return tuple(_as(item_type, item, f"{path}[{i}]", context) for i, item in enumerate(items))
    if origin in (dict, collections.abc.Mapping) or hint in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ValueError("expected a table")
        item_type = typing.get_args(hint)[1] if typing.get_args(hint) else object
        return {str(k): _as(item_type, v, _join(path, str(k)), context) for k, v in value.items()}
    if hint is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower().lstrip("$") if isinstance(value, str) else None
        if text in ("true", "false", "1", "0", "yes", "no"):
            return text in ("true", "1", "yes")
        raise ValueError("expected true or false")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not re.fullmatch(r"[-+]?\d+", str(value).strip()):
            raise ValueError("expected a whole number")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError("expected a number")
        return float(value)
    if hint is timedelta:
        return parse_duration(value)
    if hint is Path:
        if not isinstance(value, str) or not value:
            raise ValueError("expected a path")
        path_value = Path(value).expanduser()
        return path_value if path_value.is_absolute() else context.root / path_value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        for member in hint:
            if str(value).strip().lower() in (str(member.value).lower(), member.name.lower()):
                return member
        raise ValueError(f"expected one of {', '.join(str(m.value) for m in hint)}")
    if hint in (SparkInterval, Milliseconds):
        return hint(value)  # type: ignore[operator]
    if hint is Secret:
        if not isinstance(value, str):
            raise ValueError("expected a string")
        return Secret(value)
    if hint is str:
        if not isinstance(value, str):
            raise ValueError("expected a string")
        return value
    if hint is object:
        return value
    raise TypeError(f"no conversion to {hint!r}")


def _split(value: object) -> list[object]:
    """An array as written in TOML, or a comma-separated string from an environment variable."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    raise ValueError("expected an array")


def _expected(hint: object) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return _expected(next(o for o in typing.get_args(hint) if o is not type(None)))
    if hint is SparkInterval:
        return SparkInterval.ALLOWED
    if hint in (timedelta, Milliseconds):
        return 'a duration such as "03:00:00", "2.00:00:00", "3h" or "90s"'
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return f"one of {', '.join(str(m.value) for m in hint)}"
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "a string", Path: "a path",
             Secret: "a string"}
    if typing.get_origin(hint) is tuple:
        return f"an array of {names.get(typing.get_args(hint)[0], 'values')}"
    return names.get(hint, getattr(hint, "__name__", str(hint)))  # type: ignore[arg-type]


def _refuse(context: Context, path: str, value: object, allowed_text: str, detail: str = "") -> ConfigError:
    shown = value if not isinstance(value, Mapping) else "a table"
    if any(word in path.lower() for word in ("password", "secret", "token")):
        shown, detail = Secret(str(shown)), ""
    extra = f" ({detail})" if detail and not detail.startswith("expected") and allowed_text not in detail else ""
    return ConfigError(f"{context.where}: {path or 'the file'} = {shown!r}: expected {allowed_text}{extra}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ---- environment variables ---------------------------------------------------------------------

def env_overlay(cls: type, env: Mapping[str, str], prefix: str,
                extra_keys: Mapping[str, Callable[[], list[str]]] | None = None,
                other_names: Iterable[str] = ()) -> dict[str, object]:
    """The keys of `cls` (nested tables included) that environment variables set, as a raw table.

    `[twin] watermark_delay` is `<prefix>_TWIN_WATERMARK_DELAY`. `extra_keys` lists the keys of
    tables whose fields are not those of their type (a table parsed by its own function). A
    variable with the prefix that names no key (nor one of `other_names`, used for something
    else) is refused: a misspelt variable would otherwise change nothing, silently.
    """
    names = env_names(cls, prefix, extra_keys)
    known = {**names, **{name: () for name in other_names}}
    for name in sorted(env):
        if name.startswith(f"{prefix}_") and name not in known:
            raise ConfigError(f"environment variable {name}: no such setting{_did_you_mean(name, known, prefix)}")
    raw: dict[str, object] = {}
    for name, path in names.items():
        if name in env:
            table: dict[str, Any] = raw
            for key in path[:-1]:
                table = table.setdefault(key, {})
            table[path[-1]] = env[name]
    return raw


def env_names(cls: type, prefix: str,
               extra_keys: Mapping[str, Callable[[], list[str]]] | None = None) -> dict[str, tuple[str, ...]]:
    """Every environment variable that sets a key of `cls` -> the key's path in the tables."""
    names: dict[str, tuple[str, ...]] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        name = f"{prefix}_{f.name.upper()}"
        if extra_keys and f.name in extra_keys:
            names.update({f"{name}_{key.upper()}": (f.name, key) for key in extra_keys[f.name]()})
        elif dataclasses.is_dataclass(hints[f.name]):
            names.update({nested: (f.name, *path) for nested, path in env_names(hints[f.name], name).items()})
        else:
            names[name] = (f.name,)
    return names


def _did_you_mean(name: str, known: Mapping[str, tuple[str, ...]], prefix: str) -> str:
    """`; did you mean <variable> (<setting>)?` for the closest known variable, if one is close."""
    short = {known_name.removeprefix(f"{prefix}_"): known_name for known_name in known}
    close = closest(name.removeprefix(f"{prefix}_"), short)
    if close is None:
        return f" (a setting's variable is {prefix}_<TABLE>_<KEY>)"
    meant = short[close]
    setting = f" ({'.'.join(known[meant])})" if known[meant] else ""
    return f"; did you mean {meant}{setting}?"


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like `name` (what a misspelt name most likely meant), or None when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return close[0] if close else None


def merge(base: Mapping[str, object], over: Mapping[str, object]) -> dict[str, object]:
    """`over` laid on `base`, table by table."""
    merged = dict(base)
    for k, v in over.items():
        merged[k] = merge(merged[k], v) if isinstance(v, Mapping) and isinstance(merged.get(k), Mapping) else v
    return merged
