"""Where the clients come from: the ``countries`` and ``asns`` panels of the report, from a MaxMind-format
database (``.mmdb``) the user has, read with MaxMind's own reader (``maxminddb``).

The input is the report's per-client rows (``{"host", "hits", "visitors", "bytes"}``, every client, not
only the top ones). Each client's address is looked up once and its numbers are added to its country's and
its network's row. A visitor being one client, day and user agent, two clients never share a visitor, so a
country's visitors are the sum of its clients' visitors, exactly.

A client written as a host name (``piweba4y.prodigy.com``: logs of servers that resolve their clients) has
no address to look up: it is counted under ``unknown``, as an address the database does not cover is.

Databases: MaxMind's GeoIP2 and GeoLite2 Country, City and ASN databases and any database with their record
layout (DB-IP's lite ones, for example). A Country or City database gives the ``countries`` panel, an ASN
database the ``asns`` panel; give both files to have both panels.
"""
from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Sequence

from ..errors import UsageError

#: the label of clients the database does not place: host names, addresses it does not cover
UNKNOWN = "unknown"


class GeoipError(UsageError):
    """The GeoIP database cannot be used (missing, unreadable, not a MaxMind-format database): nothing ran."""


def panels(hosts_rows: Iterable[dict], mmdb_path) -> dict:
    """The ``countries`` and ``asns`` panels of ``hosts_rows`` (per-client rows ``{"host", "hits",
    "visitors", "bytes"}``, all clients) placed by the database(s) at ``mmdb_path`` (one path or a
    sequence of paths, for example a Country and an ASN database).

    Returns ``{"countries": [...], "asns": [...]}`` with the panels the databases can give: ``countries``
    rows are ``{"country": "FR France", "hits", "visitors", "bytes"}``, ``asns`` rows are
    ``{"asn": "AS3215 Orange", "hits", "visitors", "bytes"}``; the label is ``unknown`` for host names and
    addresses the database does not cover. Rows are sorted by hits (most first), then by label.

    Raises ``GeoipError`` (exit 2, one line) for a database that is missing, unreadable or not a
    MaxMind-format database.
    """
    paths = [mmdb_path] if isinstance(mmdb_path, (str, os.PathLike)) else list(mmdb_path)
    if not paths:
        raise GeoipError("--geoip needs a MaxMind-format database (.mmdb)")
    readers = []
    try:
        readers.extend(_open(p) for p in paths)
        want = set().union(*(_kinds(r) for r in readers))
        totals: dict[str, dict[str, list[int]]] = {"countries": {}, "asns": {}}
        for row in hosts_rows:
            address = _address(row["host"])
            country, asn = _place(readers, paths, address) if address is not None else (None, None)
            # a database of a type of its own gives the panels its records carry
            want.update(name for name, label in (("countries", country), ("asns", asn)) if label)
            numbers = (int(row["hits"]), int(row["visitors"]), int(row["bytes"]))
            _add(totals["countries"], country or UNKNOWN, numbers)
            _add(totals["asns"], asn or UNKNOWN, numbers)
    finally:
        for r in readers:
            r.close()
    return {name: _rows(name, table) for name, table in totals.items() if name in want}


def check(mmdb_path) -> None:
    """Opens the database(s) at ``mmdb_path`` and closes them: ``GeoipError`` (one line) before any work for
    a database that is missing, unreadable or not a MaxMind-format database."""
    paths = [mmdb_path] if isinstance(mmdb_path, (str, os.PathLike)) else list(mmdb_path)
    for p in paths:
        _open(p).close()


def _open(path):
    import maxminddb

    shown = os.fspath(path)
    if os.path.isdir(shown):
        raise GeoipError(f"the GeoIP database {shown} is a directory, not a .mmdb file")
    try:
        return maxminddb.open_database(shown)
    except FileNotFoundError:
        raise GeoipError(f"the GeoIP database {shown} does not exist") from None
    except maxminddb.InvalidDatabaseError:
        raise GeoipError(f"the GeoIP database {shown} is not a MaxMind-format database (.mmdb)") from None
    except (OSError, ValueError) as e:
        raise GeoipError(f"cannot read the GeoIP database {shown}: {getattr(e, 'strerror', None) or _one_line(e)}") \
            from None


def _kinds(reader) -> set[str]:
    """Which panels a database gives, from its type (``GeoLite2-City``, ``GeoIP2-ASN``, ``DBIP-Country-Lite``...)."""
    kind = reader.metadata().database_type.lower()
    found = set()
    if "asn" in kind or "isp" in kind:
        found.add("asns")
    if "country" in kind or "city" in kind or "enterprise" in kind:
        found.add("countries")
    return found


def _address(host: str) -> str | None:
    """``host`` as an address to look up, or None for a host name (or no host at all)."""
    text = str(host or "").strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # an IPv4 client as a dual-stack server writes it (::ffff:83.149.9.216) is looked up as IPv4
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def _place(readers, paths, address: str) -> tuple[str | None, str | None]:
    import maxminddb

    country = asn = None
    for reader, path in zip(readers, paths):
        try:
            record = reader.get(address)
        except ValueError:
            continue    # an IPv6 address in an IPv4-only database: not covered
        except maxminddb.InvalidDatabaseError as e:
            raise GeoipError(f"the GeoIP database {os.fspath(path)} is corrupt: {_one_line(e)}") from None
        if not isinstance(record, dict):
            continue
        country = country or _country(record)
        asn = asn or _asn(record)
    return country, asn


def _country(record: dict) -> str | None:
    place = record.get("country") or record.get("registered_country")
    if not isinstance(place, dict) or not place.get("iso_code"):
        return None
    name = (place.get("names") or {}).get("en")
    return f"{place['iso_code']} {name}" if name else str(place["iso_code"])


def _asn(record: dict) -> str | None:
    number = record.get("autonomous_system_number")
    if number is None:
        return None
    organization = record.get("autonomous_system_organization")
    return f"AS{number} {organization}" if organization else f"AS{number}"


def _add(table: dict, label: str, numbers: Sequence[int]) -> None:
    total = table.setdefault(label, [0, 0, 0])
    for i, n in enumerate(numbers):
        total[i] += n


def _rows(name: str, table: dict) -> list[dict]:
    key = "country" if name == "countries" else "asn"
    ordered = sorted(table.items(), key=lambda item: (-item[1][0], item[0]))
    return [{key: label, "hits": h, "visitors": v, "bytes": b} for label, (h, v, b) in ordered]


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__
