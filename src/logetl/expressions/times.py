"""Times: the access log's time (``Day``, ``Hour``), and UTC instants (``timestamp``), their units,
truncation and parts."""
from __future__ import annotations

from logetl.expressions.base import Expr, ExpressionError, INTEGER, STRING, _need, _wrap


# --- the access log's time ----------------------------------------------------------------------------

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


#: a valid access-log time, ``dd/Mon/yyyy:HH:MM:SS ±hhmm`` (the day is checked against the month apart)
LOG_TIME_PATTERN = (r"^(0[1-9]|[12][0-9]|3[01])/(" + "|".join(MONTHS) + r")/"
                    r"([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3}):"
                    r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9] [+-]([01][0-9]|2[0-3])[0-5][0-9]$")


_YEAR = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
# divisible by 4 and not by 100, or by 400 (0000 is not a year)
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_CLOCK = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
_ZONE = r" [+-](?:[01][0-9]|2[0-3])[0-5][0-9]$"


def _log_time_valid(end: str = _ZONE) -> str:
    """``LOG_TIME_PATTERN`` with the calendar folded in: one regular expression that matches exactly the
    valid times (days 29-31 only in the months that have them, 29 February only in leap years of the
    proleptic Gregorian calendar). One pass of a regex engine decides validity, with no arithmetic.
    ``end``: what follows the clock (the zone; HAProxy's milliseconds)."""
    thirty_one = "|".join(m for i, m in enumerate(MONTHS) if i in (0, 2, 4, 6, 7, 9, 11))
    not_feb = "|".join(m for m in MONTHS if m != "Feb")
    return (r"^(?:(?:(?:0[1-9]|1[0-9]|2[0-8])/(?:" + "|".join(MONTHS) + r")|(?:29|30)/(?:" + not_feb
            + r")|31/(?:" + thirty_one + r"))/" + _YEAR + r"|29/Feb/" + _LEAP + r"):" + _CLOCK + end)


def _iso_time_valid(zone: str = "Z") -> str:
    """A valid UTC time of ISO 8601 as AWS load balancers write it, ``yyyy-mm-ddTHH:MM:SS[.fraction]Z``
    (one to nine digits of fraction), the calendar folded in as in ``_log_time_valid``. ``zone``: what
    follows the clock (RFC 3339's offset)."""
    day = r"(?:0[1-9]|1[0-9]|2[0-8])"
    date = (r"(?:" + _YEAR + r"-(?:(?:0[13578]|1[02])-(?:" + day + r"|29|30|31)|(?:0[469]|11)-(?:" + day
            + r"|29|30)|02-" + day + r")|" + _LEAP + r"-02-29)")
    return r"^" + date + r"T" + _CLOCK + r"(?:\.[0-9]{1,9})?" + zone + "$"


LOG_TIME_VALID = _log_time_valid()
#: HAProxy's time, ``dd/Mon/yyyy:HH:MM:SS.mmm``: no zone (read as UTC)
MS_TIME_VALID = _log_time_valid(r"\.[0-9]{3}$")
#: ALB's and ELB's time (and a CloudFront date and time joined by ``timestamp(date, time)``)
ISO_TIME_VALID = _iso_time_valid()
#: RFC 3339 with an offset, ``yyyy-mm-ddTHH:MM:SS[.fraction]±hh:mm`` (Traefik's ``time`` and ``StartLocal``;
#: the offset's ``hh`` 00-23 and ``mm`` 00-59, as the Apache layout's zone)
ISO_OFFSET_VALID = _iso_time_valid(r"[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]")
#: a Unix epoch in seconds as Caddy writes ``ts``: digits (no sign, no leading zero), an optional fraction;
#: at most twelve digits (MAX_EPOCH's), the range checked apart
EPOCH_VALID = r"^(?:0|[1-9][0-9]{0,11})(?:\.[0-9]+)?$"


class _LogTime(Expr):
    """Parts of an access-log time ``dd/Mon/yyyy:HH:MM:SS ±hhmm`` as written (no zone conversion); null
    unless the time is valid: ``dd`` a real day of that month and year (proleptic Gregorian calendar),
    ``Mon`` one of Jan..Dec, year 0001-9999, ``HH`` 00-23, ``MM`` and ``SS`` 00-59, one space, a zone
    ``+`` or ``-`` with ``hh`` 00-23 and ``mm`` 00-59, nothing before or after."""

    word = ""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        _need(self.args[0], types, STRING, self.word)
        return STRING

    def describe(self):
        return f"{self.word}({self.args[0].describe()})"


class Day(_LogTime):
    """``YYYY-MM-DD`` of an access-log time (see ``_LogTime`` for when it is null)."""

    word = "day"


class Hour(_LogTime):
    """``YYYY-MM-DDTHH`` of an access-log time (see ``_LogTime`` for when it is null)."""

    word = "hour"


# --- times: UTC instants, truncation ------------------------------------------------------------------
# A ``timestamp`` is an instant in UTC, to the second (held as microseconds: Polars' Datetime("us", "UTC"),
# Spark's TimestampType; no operation makes a fraction of a second). Written as ``2015-05-17T10:05:03Z``
# in TSV and JSON Lines, as Parquet's timestamp (microseconds, adjusted to UTC).

TIMESTAMP = "timestamp"


#: the instants a timestamp holds: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, in epoch seconds
MIN_EPOCH, MAX_EPOCH = -62135596800, 253402300799


#: the units of ``trunc`` and ``trunc_local``
TIME_UNITS = ("minute", "hour", "day", "week", "month")


#: how ``trunc_local`` writes each unit: the first characters of ``YYYY-MM-DDTHH:MM`` (``day`` and
#: ``hour`` as ``day()`` and ``hour()`` write them)
LOCAL_WIDTH = {"minute": 16, "hour": 13, "day": 10, "week": 10, "month": 7}


def _unit(unit, what: str) -> str:
    if unit not in TIME_UNITS:
        raise ExpressionError(f"{what}: unit {unit!r} is not one of {', '.join(TIME_UNITS)}")
    return unit


class Timestamp(Expr):
    """The UTC instant of a log time, in any of the layouts the log formats write:

    - ``dd/Mon/yyyy:HH:MM:SS ±hhmm`` (Apache, nginx, S3): the time as written minus its zone
      (``10:05:03 +0200`` is ``08:05:03Z``; across a day, month or year when the zone says so);
    - ``yyyy-mm-ddTHH:MM:SS[.fraction]Z`` (ALB, ELB, Traefik's ``StartUTC``; one to nine digits of
      fraction): that instant;
    - ``yyyy-mm-ddTHH:MM:SS[.fraction]±hh:mm`` (RFC 3339 with an offset: Traefik's ``time`` and
      ``StartLocal``): the clock minus the offset;
    - a Unix epoch in seconds, ``digits[.fraction]`` (Caddy's ``ts``, e.g. ``1646861401.5241024``): no
      sign, no exponent, no leading zero, at most ``MAX_EPOCH``;
    - ``dd/Mon/yyyy:HH:MM:SS.mmm`` (HAProxy, which writes no zone): the clock read as UTC;
    - with two arguments, a date ``yyyy-mm-dd`` and a time ``HH:MM:SS[.fraction]`` (CloudFront's two
      columns, in UTC): that instant.

    A timestamp holds whole seconds: a fraction is dropped (the instant's second is kept). Null unless the
    time is valid (a real day of that month and year, proleptic Gregorian calendar; year 0001-9999, ``HH``
    00-23, ``MM`` and ``SS`` 00-59; for the first layout the zone's rule of ``_LogTime``; nothing before or
    after) and its instant falls in years 0001-9999 in UTC (``01/Jan/0001:00:30:00 +0100`` is null; so is
    a negative epoch)."""

    def __init__(self, arg: Expr, time: Expr | None = None):
        if time is None:
            self.parts = (_wrap(arg),)
            self.args = self.parts
        else:
            # the date and the time joined as the ISO 8601 layout: the engines read one string
            from logetl.expressions.strings import Concat
            from logetl.expressions.base import Lit

            self.parts = (_wrap(arg), _wrap(time))
            self.args = (Concat(self.parts[0], Lit("T"), self.parts[1], Lit("Z")),)

    def check(self, types):
        for a in self.parts:
            _need(a, types, STRING, "timestamp")
        return TIMESTAMP

    def describe(self):
        return f"timestamp({', '.join(a.describe() for a in self.parts)})"


class FromEpoch(Expr):
    """The instant ``n`` seconds after 1970-01-01T00:00:00Z (before it when negative); null outside
    years 0001-9999 (``MIN_EPOCH`` to ``MAX_EPOCH``)."""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        _need(self.args[0], types, INTEGER, "from_epoch")
        return TIMESTAMP

    def describe(self):
        return f"from_epoch({self.args[0].describe()})"


class Epoch(Expr):
    """Seconds from 1970-01-01T00:00:00Z to the instant (negative before it): an integer."""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        t = self.args[0].check(types)
        if t != TIMESTAMP:
            raise ExpressionError(f"epoch: {self.args[0].describe()} is {t}, not timestamp"
                                  + (" (timestamp() makes one of a log time)" if t == STRING else ""))
        return INTEGER

    def describe(self):
        return f"epoch({self.args[0].describe()})"


class Trunc(Expr):
    """The instant truncated in UTC to the start of its ``unit``: ``minute``, ``hour``, ``day``, ``week``
    (Monday 00:00Z, ISO 8601 weeks: a week may start in the year before) or ``month`` (the 1st, 00:00Z).
    A timestamp."""

    def __init__(self, arg: Expr, unit: str):
        self.args, self.unit = (_wrap(arg),), _unit(unit, "trunc")

    def check(self, types):
        t = self.args[0].check(types)
        if t != TIMESTAMP:
            raise ExpressionError(f"trunc: {self.args[0].describe()} is {t}, not timestamp"
                                  + (" (timestamp() for UTC, or trunc_local() for the time as written)"
                                     if t == STRING else ""))
        return TIMESTAMP

    def describe(self):
        return f"trunc({self.args[0].describe()}, {self.unit!r})"


class TruncLocal(Expr):
    """An access-log time truncated *as written* (in its own zone, the zone left out) to the start of its
    ``unit``, as a string: ``minute`` ``YYYY-MM-DDTHH:MM``, ``hour`` ``YYYY-MM-DDTHH`` (as ``hour``),
    ``day`` ``YYYY-MM-DD`` (as ``day``), ``week`` the ``YYYY-MM-DD`` of its Monday (ISO 8601 weeks),
    ``month`` ``YYYY-MM``. Null unless the time is valid (see ``_LogTime``)."""

    def __init__(self, arg: Expr, unit: str):
        self.args, self.unit = (_wrap(arg),), _unit(unit, "trunc_local")

    def check(self, types):
        _need(self.args[0], types, STRING, "trunc_local")
        return STRING

    def describe(self):
        return f"trunc_local({self.args[0].describe()}, {self.unit!r})"


class _TimePart(Expr):
    """A part of a time: of a timestamp in UTC, of an access-log time (a string) as written, null unless
    the time is valid (see ``_LogTime``). An integer."""

    word = ""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        t = self.args[0].check(types)
        if t not in (TIMESTAMP, STRING):
            raise ExpressionError(f"{self.word}: {self.args[0].describe()} is {t}, not a timestamp or a log time")
        return INTEGER

    def describe(self):
        return f"{self.word}({self.args[0].describe()})"


class DayOfWeek(_TimePart):
    """The ISO 8601 day of the week: 1 Monday to 7 Sunday (of a timestamp in UTC, of a log time as
    written)."""

    word = "day_of_week"


class HourOfDay(_TimePart):
    """The hour of the day, 0 to 23 (of a timestamp in UTC, of a log time as written)."""

    word = "hour_of_day"
