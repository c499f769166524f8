"""The typed time of every vendor layout: ``L.timestamp`` of ALB's and ELB's ISO 8601 times, S3's bracketed
Apache time, HAProxy's milliseconds without a zone (read as UTC) and CloudFront's date and time columns
(``L.timestamp("date", "time")``), on both engines, byte for byte, with values worked out by hand.

Each case replaces the time in a vendor's documented example line (``vendor_lines``):

==========  ==================================  =======================  =====================================
preset      time as written                     UTC instant              why
==========  ==================================  =======================  =====================================
alb         2018-07-02T22:23:00.186641Z         2018-07-02T22:23:00Z     AWS's example; the fraction dropped
alb         2016-02-29T23:59:59.999999Z         2016-02-29T23:59:59Z     a leap day; dropped, not rounded
alb         2015-02-29T00:00:00.000000Z         null                     no 29 February in 2015
alb         2018-07-02T24:00:00.000000Z         null                     no hour 24
elb         2015-05-13T23:39:43.945958Z         2015-05-13T23:39:43Z     AWS's example
elb         1970-01-01T00:00:00Z                1970-01-01T00:00:00Z     no fraction; epoch 0
s3          06/Feb/2019:00:00:38 +0000          2019-02-06T00:00:38Z     AWS's example
s3          06/Feb/2019:00:00:38 +0100          2019-02-05T23:00:38Z     the zone applied, back across a day
haproxy     06/Feb/2009:12:14:14.655            2009-02-06T12:14:14Z     HAProxy's example, read as UTC
haproxy     31/Dec/1999:23:59:59.999            1999-12-31T23:59:59Z     dropped, not rounded into 2000
haproxy     30/Feb/2009:12:14:14.655            null                     no 30 February
haproxy     06/Feb/2009:12:14:14                null                     HAProxy writes milliseconds
cloudfront  2019-12-04 and 21:02:31             2019-12-04T21:02:31Z     AWS's example
cloudfront  2020-02-29 and 00:00:00             2020-02-29T00:00:00Z     a leap day
cloudfront  2019-13-04 and 21:02:31             null                     no month 13
caddy       ts 1646861401.5241024               2022-03-09T21:30:01Z     Caddy's example, a Unix epoch
caddy       ts 1646861401.9999999               2022-03-09T21:30:01Z     dropped, not rounded
caddy       ts 0                                1970-01-01T00:00:00Z     epoch 0
caddy       ts 253402300799.5                   9999-12-31T23:59:59Z     the last second of year 9999
caddy       ts 253402300800                     null                     year 10000
caddy       ts -1.5                             null                     negative
caddy       ts 1.6468614015241024e9             null                     an exponent (Caddy writes none)
traefik     2025-02-28T12:11:34.10912886Z       2025-02-28T12:11:34Z     Traefik's StartUTC
traefik     2021-03-04T10:20:30.123456789Z      2021-03-04T10:20:30Z     nine digits of fraction
traefik     2024-01-02T03:04:05+01:00           2024-01-02T02:04:05Z     StartLocal: the offset taken off
traefik     2024-01-01T00:30:00.999+01:00       2023-12-31T23:30:00Z     back across a year
traefik     2024-01-02T03:04:05-05:30           2024-01-02T08:34:05Z     a negative offset with minutes
traefik     0001-01-01T00:30:00+01:00           null                     before year 0001 in UTC
traefik     2024-01-02T03:04:05+24:00           null                     no offset of 24 hours
traefik     2024-01-02T03:04:05+0100            null                     RFC 3339 writes the colon
traefik     2023-02-29T00:00:00+01:00           null                     no 29 February in 2023
==========  ==================================  =======================  =====================================
"""
from __future__ import annotations

import calendar
import datetime as dt
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import parts
from test_json_formats import CADDY_DOC, TRAEFIK_DOC
from vendor_lines import ALB_HTTP, CLOUDFRONT_LINE, ELB_HTTP, HAPROXY_LINE, S3_LINE

import logetl.api as L
from logetl import expressions as E


def _replace(line: bytes, old: str, new: str) -> bytes:
    assert old.encode() in line
    return line.replace(old.encode(), new.encode(), 1)


#: Caddy's ``ts`` and Traefik's ``StartLocal`` (field ``start_local``) of the JSON cases
CADDY_TS = ("1646861401.5241024", "1646861401.9999999", "0", "253402300799.5", "253402300800", "-1.5",
            "1.6468614015241024e9")
TRAEFIK_LOCAL = ("2025-02-28T12:11:34.10912886Z", "2021-03-04T10:20:30.123456789Z", "2024-01-02T03:04:05+01:00",
                 "2024-01-01T00:30:00.999+01:00", "2024-01-02T03:04:05-05:30", "0001-01-01T00:30:00+01:00",
                 "2024-01-02T03:04:05+24:00", "2024-01-02T03:04:05+0100", "2023-02-29T00:00:00+01:00")

#: preset -> (the lines, the expected instants in order: text or None for null)
CASES = {
    "alb": ([_replace(ALB_HTTP, "2018-07-02T22:23:00.186641Z", t) for t in (
        "2018-07-02T22:23:00.186641Z", "2016-02-29T23:59:59.999999Z", "2015-02-29T00:00:00.000000Z",
        "2018-07-02T24:00:00.000000Z")],
        ["2018-07-02T22:23:00Z", "2016-02-29T23:59:59Z", None, None]),
    "elb": ([_replace(ELB_HTTP, "2015-05-13T23:39:43.945958Z", t) for t in (
        "2015-05-13T23:39:43.945958Z", "1970-01-01T00:00:00Z")],
        ["2015-05-13T23:39:43Z", "1970-01-01T00:00:00Z"]),
    "s3": ([_replace(S3_LINE, "06/Feb/2019:00:00:38 +0000", t) for t in (
        "06/Feb/2019:00:00:38 +0000", "06/Feb/2019:00:00:38 +0100")],
        ["2019-02-06T00:00:38Z", "2019-02-05T23:00:38Z"]),
    "haproxy": ([_replace(HAPROXY_LINE, "06/Feb/2009:12:14:14.655", t) for t in (
        "06/Feb/2009:12:14:14.655", "31/Dec/1999:23:59:59.999", "30/Feb/2009:12:14:14.655",
        "06/Feb/2009:12:14:14")],
        ["2009-02-06T12:14:14Z", "1999-12-31T23:59:59Z", None, None]),
    "cloudfront": ([_replace(CLOUDFRONT_LINE, "2019-12-04\t21:02:31", t) for t in (
        "2019-12-04\t21:02:31", "2020-02-29\t00:00:00", "2019-13-04\t21:02:31")],
        ["2019-12-04T21:02:31Z", "2020-02-29T00:00:00Z", None]),
    "caddy": ([_replace(CADDY_DOC, "1646861401.5241024", t) for t in CADDY_TS],
              ["2022-03-09T21:30:01Z", "2022-03-09T21:30:01Z", "1970-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
               None, None, None]),
    "traefik": ([_replace(TRAEFIK_DOC, '"2025-02-28T12:11:34.10912886Z","StartUTC"', f'"{t}","StartUTC"')
                 for t in TRAEFIK_LOCAL],
                ["2025-02-28T12:11:34Z", "2021-03-04T10:20:30Z", "2024-01-02T02:04:05Z", "2023-12-31T23:30:00Z",
                 "2024-01-02T08:34:05Z", None, None, None, None]),
}


def epoch(text: str | None) -> str:
    """The epoch seconds of an instant's text, by the standard library (an independent computation)."""
    if text is None:
        return ""
    return str(calendar.timegm(dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").timetuple()))


def run(spec: str, engine: str, tmp_path, instant) -> bytes:
    from logetl.job import run_flow

    log = tmp_path / f"{spec}.log"
    log.write_bytes(b"".join(line + b"\n" for line in CASES[spec][0]))
    out = (L.read(spec).derive(ts=instant).derive(e=L.epoch("ts")).select("ts", "e").write("out"))
    run_flow(L.Flow(f"vendor_time_{spec}", [out]), str(log), {"out": str(tmp_path / "out")}, engine=engine)
    return parts(tmp_path / "out")


@pytest.mark.parametrize("spec", ["alb", "elb", "s3", "haproxy"])
def test_timestamp_of_the_time_field(engine, spec, tmp_path):
    want = "".join(f"{t or ''}\t{epoch(t)}\n" for t in CASES[spec][1])
    assert run(spec, engine, tmp_path, L.timestamp("time")).decode() == want


def test_timestamp_of_caddys_epoch(engine, tmp_path):
    want = "".join(f"{t or ''}\t{epoch(t)}\n" for t in CASES["caddy"][1])
    assert run("caddy", engine, tmp_path, L.timestamp("time")).decode() == want


def test_timestamp_of_traefiks_rfc3339_times(engine, tmp_path):
    """``StartLocal`` (field ``start_local``) in each case; ``time`` (``StartUTC``) is Traefik's example."""
    want = "".join(f"{t or ''}\t{epoch(t)}\n" for t in CASES["traefik"][1])
    assert run("traefik", engine, tmp_path, L.timestamp("start_local")).decode() == want
    utc = "2025-02-28T12:11:34Z"
    (tmp_path / "utc").mkdir()
    assert run("traefik", engine, tmp_path / "utc", L.timestamp("time")).decode() == f"{utc}\t{epoch(utc)}\n" * 9


def test_hour_and_day_of_caddys_time(engine, tmp_path):
    """``L.hour_of_day`` and ``L.trunc`` of the instant; ``L.day`` reads the access-log layout only (null)."""
    from logetl.job import run_flow

    log = tmp_path / "caddy.log"
    log.write_bytes(b"".join(line + b"\n" for line in CASES["caddy"][0][:5]))
    ts = L.timestamp("time")
    out = (L.read("caddy").derive(h=L.hour_of_day(ts), d=L.trunc(ts, "day"), written=L.day("time"))
           .select("h", "d", "written").write("out"))
    run_flow(L.Flow("caddy_hours", [out]), str(log), {"out": str(tmp_path / "out")}, engine=engine)
    assert parts(tmp_path / "out").decode() == ("21\t2022-03-09T00:00:00Z\t\n" * 2 + "0\t1970-01-01T00:00:00Z\t\n"
                                                 + "23\t9999-12-31T00:00:00Z\t\n" + "\t\t\n")


def test_the_json_cases_agree_with_the_standard_library():
    """The instants of the table worked out by hand again by ``datetime`` (fraction dropped)."""
    utc = dt.timezone.utc
    for ts, want in zip(CADDY_TS, CASES["caddy"][1]):
        try:
            got = dt.datetime.fromtimestamp(int(ts.split(".")[0]), utc) if re.fullmatch(r"[0-9.]+", ts) else None
        except (ValueError, OverflowError):
            got = None
        assert (got.strftime("%Y-%m-%dT%H:%M:%SZ") if got else None) == want, ts
    for text, want in zip(TRAEFIK_LOCAL, CASES["traefik"][1]):
        try:
            clock = dt.datetime.fromisoformat(re.sub(r"\.[0-9]+", "", text))
            got = clock.astimezone(utc).strftime("%Y-%m-%dT%H:%M:%SZ") if re.search(r"(Z|[+-]..:..)$", text) else None
        except (ValueError, OverflowError):
            got = None
        assert got == want, text


def test_timestamp_of_cloudfronts_date_and_time(engine, tmp_path):
    want = "".join(f"{t or ''}\t{epoch(t)}\n" for t in CASES["cloudfront"][1])
    assert run("cloudfront", engine, tmp_path, L.timestamp("date", "time")).decode() == want


def test_cloudfronts_time_alone_has_no_date(engine, tmp_path):
    """``21:02:31`` names no day: null, not a guess."""
    assert run("cloudfront", engine, tmp_path, L.timestamp("time")).decode() == "\t\n" * 3


def test_two_argument_timestamp_is_described_and_checked():
    assert L.timestamp("date", "time").describe() == "timestamp(date, time)"
    with pytest.raises(E.ExpressionError, match="timestamp"):
        L.timestamp("date", L.lit(3)).check({"date": E.STRING})


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10000), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25), st.integers(0, 61),
       st.sampled_from(["", ".5", ".123456", ".123456789", ".1234567890", "."]))
def test_the_iso_regex_accepts_exactly_the_valid_times(y, mo, d, h, mi, frac):
    """``ISO_TIME_VALID`` (the calendar folded in) against the standard library's calendar."""
    text = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{mi:02d}{frac}Z"
    try:
        dt.datetime(y, mo, d, h, mi, mi)
        valid = len(frac) != 1 and len(frac) <= 10
    except ValueError:
        valid = False
    assert bool(re.search(E.ISO_TIME_VALID, text)) == valid, text


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9999), st.integers(1, 12), st.integers(1, 32), st.sampled_from([".655", ".65", "", " +0000"]))
def test_the_haproxy_regex_accepts_exactly_the_valid_times(y, mo, d, tail):
    text = f"{d:02d}/{E.MONTHS[mo - 1]}/{y:04d}:12:14:14{tail}"
    try:
        dt.date(y, mo, d)
        valid = tail == ".655"
    except ValueError:
        valid = False
    assert bool(re.search(E.MS_TIME_VALID, text)) == valid, text
