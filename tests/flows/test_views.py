"""Typed views (logetl.views): integers with '-' as null, the time in UTC, the request's parts, the client
behind trusted proxies."""
from __future__ import annotations

import datetime as dt

import polars as pl

from logetl import views


def test_typed_view_of_nginx_records():
    frame = pl.DataFrame({
        "ip": ["10.0.0.5", "198.51.100.2", "10.0.0.5"],
        "time": ["17/May/2015:10:05:03 +0000", "17/May/2015:12:05:03 +0200", "bad"],
        "request": ["GET /images/a b.png HTTP/1.1", "GET /", "\\x16\\x03"],
        "response": ["200", "304", "4x4"],
        "size": ["123", "-", ""],
        "request_time": ["0.004", "-", "1"],
        "x_forwarded_for": ["203.0.113.7, 10.0.0.9", "-", "-"],
    })
    t = views.typed(frame, trusted=["10.0.0.0/8"])
    assert t.schema["response"] == pl.Int64 and t.schema["size"] == pl.Int64
    assert t["response"].to_list() == [200, 304, None]
    assert t["size"].to_list() == [123, None, None]
    assert t["request_time"].to_list() == [0.004, None, 1.0]
    utc = dt.timezone.utc
    assert t["time"].to_list() == [dt.datetime(2015, 5, 17, 10, 5, 3, tzinfo=utc),
                                   dt.datetime(2015, 5, 17, 10, 5, 3, tzinfo=utc), None]
    assert t["method"].to_list() == ["GET", "GET", None]
    assert t["path"].to_list() == ["/images/a b.png", "/", None]
    assert t["protocol"].to_list() == ["HTTP/1.1", None, None]
    assert t["client"].to_list() == ["203.0.113.7", "198.51.100.2", "10.0.0.5"]
    assert t["request"].to_list() == frame["request"].to_list()


def test_client_address_rules():
    c = views.client_address
    trusted = ["10.0.0.0/8", "2001:db8::/32"]
    assert c("10.0.0.1", "203.0.113.7", trusted) == "203.0.113.7"
    assert c("10.0.0.1", "198.51.100.1, 203.0.113.7, 10.2.3.4", trusted) == "203.0.113.7"  # spoofed left part ignored
    assert c("10.0.0.1", "10.9.9.9, 10.8.8.8", trusted) == "10.9.9.9"         # all trusted: the left-most
    assert c("198.51.100.9", "203.0.113.7", trusted) == "198.51.100.9"        # the peer is not a trusted proxy
    assert c("10.0.0.1", "unknown, 203.0.113.7", trusted) == "203.0.113.7"
    assert c("10.0.0.1", "203.0.113.7, unknown", trusted) == "unknown"        # cannot be checked: stops there
    assert c("2001:db8::1", "[2001:db8::5]:443, 203.0.113.7:5000", trusted) == "203.0.113.7:5000"
    assert c("10.0.0.1", "203.0.113.7", ()) == "10.0.0.1"                     # no trusted proxy: ip
    assert c("10.0.0.1", "-", trusted) == "10.0.0.1"


def test_typed_view_without_forwarded_for_is_the_ip():
    t = views.typed(pl.DataFrame({"ip": ["1.2.3.4"], "request": ["GET"]}))
    assert t["client"].to_list() == ["1.2.3.4"]
    assert t.select("method", "path", "protocol").row(0) == (None, None, None)
