"""The countries and networks panels (logetl.report.geoip) from databases the tests write themselves
(MaxMind's format, with MaxMind's record layout): hand-worked clients, the real sample log against a lookup
done with the standard library, and databases that cannot be used."""
from __future__ import annotations

import ipaddress
import os
import stat
from collections import defaultdict

import pytest

from conftest import SAMPLE, require
from reportpage_data import NETWORKS, build, make_mmdb, require_writer
from logetl.errors import UsageError
from logetl.report.geoip import GeoipError, panels


@pytest.fixture(scope="module")
def mmdb(tmp_path_factory):
    require_writer()
    return make_mmdb(tmp_path_factory.mktemp("geoip") / "city.mmdb")


CLIENTS = [
    {"host": "66.249.73.135", "hits": 10, "visitors": 2, "bytes": 1000},     # Google, US
    {"host": "66.249.95.1", "hits": 5, "visitors": 1, "bytes": 0},           # Google, US (the /19's end)
    {"host": "208.115.111.72", "hits": 7, "visitors": 3, "bytes": 70},       # Cogeco, US
    {"host": "83.149.9.216", "hits": 4, "visitors": 1, "bytes": 400},        # Vimpelcom, RU
    {"host": "::ffff:83.149.9.7", "hits": 1, "visitors": 1, "bytes": 0},     # the same, as IPv6 writes IPv4
    {"host": "", "hits": 1, "visitors": 1, "bytes": 2},                      # no host at all
    {"host": "2001:db8::1", "hits": 2, "visitors": 1, "bytes": 20},          # the documentation network, DE
    {"host": "[2001:db8:ffff::9]", "hits": 1, "visitors": 1, "bytes": 1},    # written in brackets
    {"host": "10.0.0.1", "hits": 3, "visitors": 1, "bytes": 30},             # not in the database
    {"host": "66.249.96.0", "hits": 1, "visitors": 1, "bytes": 5},           # just past the /19
    {"host": "piweba4y.prodigy.com", "hits": 6, "visitors": 2, "bytes": 60}, # a host name
]


def test_countries_and_networks_of_hand_worked_clients(mmdb):
    assert panels(CLIENTS, mmdb) == {
        "countries": [
            {"country": "US United States", "hits": 22, "visitors": 6, "bytes": 1070},
            {"country": "unknown", "hits": 11, "visitors": 5, "bytes": 97},
            {"country": "RU Russia", "hits": 5, "visitors": 2, "bytes": 400},
            {"country": "DE Germany", "hits": 3, "visitors": 2, "bytes": 21},
        ],
        "asns": [
            {"asn": "AS15169 Google LLC", "hits": 15, "visitors": 3, "bytes": 1000},
            {"asn": "unknown", "hits": 11, "visitors": 5, "bytes": 97},
            {"asn": "AS13768 Cogeco Peer 1", "hits": 7, "visitors": 3, "bytes": 70},
            {"asn": 'AS8402 PJSC "Vimpelcom"', "hits": 5, "visitors": 2, "bytes": 400},
            {"asn": "AS64500 Documentation <Net> & Co", "hits": 3, "visitors": 2, "bytes": 21},
        ],
    }


def test_equal_hits_are_ordered_by_label_and_no_clients_give_empty_panels(mmdb):
    rows = [{"host": "46.105.1.1", "hits": 1, "visitors": 1, "bytes": 1},
            {"host": "83.149.9.1", "hits": 1, "visitors": 1, "bytes": 1}]
    assert [r["country"] for r in panels(rows, mmdb)["countries"]] == ["FR France", "RU Russia"]
    assert panels([], mmdb) == {"countries": [], "asns": []}


def test_a_country_database_and_an_asn_database(tmp_path):
    require_writer()
    country = make_mmdb(tmp_path / "country.mmdb", kind="GeoLite2-Country", fields=("country",))
    asn = make_mmdb(tmp_path / "asn.mmdb", kind="GeoLite2-ASN", fields=("asn",))
    rows = [CLIENTS[3], CLIENTS[6]]
    only_countries = {"countries": [{"country": "RU Russia", "hits": 4, "visitors": 1, "bytes": 400},
                                    {"country": "DE Germany", "hits": 2, "visitors": 1, "bytes": 20}]}
    only_asns = {"asns": [{"asn": 'AS8402 PJSC "Vimpelcom"', "hits": 4, "visitors": 1, "bytes": 400},
                          {"asn": "AS64500 Documentation <Net> & Co", "hits": 2, "visitors": 1, "bytes": 20}]}
    assert panels(rows, country) == only_countries
    assert panels(rows, asn) == only_asns
    assert panels(rows, [country, asn]) == only_countries | only_asns
    # a database of a type of its own gives the panels its records carry
    other = make_mmdb(tmp_path / "other.mmdb", kind="Acme-Places", fields=("country",))
    assert panels(rows, other) == only_countries
    assert panels([], other) == {}
    # a City database whose records also carry networks gives both
    city = make_mmdb(tmp_path / "city.mmdb", kind="GeoIP2-City")
    assert panels(rows, city) == only_countries | only_asns and panels([], city) == {"countries": []}
    # the first database that places a client wins
    assert panels(rows, [asn, country]) == only_countries | only_asns


def test_an_ipv6_client_in_an_ipv4_database_is_unknown(tmp_path):
    require_writer()
    v4 = make_mmdb(tmp_path / "v4.mmdb", ipv6=False)
    assert panels([CLIENTS[3], CLIENTS[6]], v4)["countries"] == [
        {"country": "RU Russia", "hits": 4, "visitors": 1, "bytes": 400},
        {"country": "unknown", "hits": 2, "visitors": 1, "bytes": 20}]


def test_the_sample_log_against_a_lookup_of_its_own(mmdb):
    """Every client of the real log, placed by the database and by the standard library's ipaddress."""
    require(os.path.isfile(SAMPLE), f"the real sample log is not at {SAMPLE} (../shared is absent)")
    report, clients = build(SAMPLE)
    networks = [(ipaddress.ip_network(cidr), place) for cidr, place in NETWORKS.items()]
    countries, asns = defaultdict(lambda: [0, 0, 0]), defaultdict(lambda: [0, 0, 0])
    for row in clients:
        address = ipaddress.ip_address(row["host"])
        place = next((p for net, p in networks if address in net), None)
        for table, label in ((countries, place and f"{place[0]} {place[1]}"),
                             (asns, place and f"AS{place[2]} {place[3]}")):
            for i, key in enumerate(("hits", "visitors", "bytes")):
                table[label or "unknown"][i] += row[key]

    def expected(table, key):
        return [{key: k, "hits": h, "visitors": v, "bytes": b}
                for k, (h, v, b) in sorted(table.items(), key=lambda kv: (-kv[1][0], kv[0]))]

    got = panels(clients, mmdb)
    assert got == {"countries": expected(countries, "country"), "asns": expected(asns, "asn")}
    assert sum(r["hits"] for r in got["countries"]) == report["general"]["valid_requests"] == 5000
    assert sum(r["visitors"] for r in got["asns"]) == report["general"]["unique_visitors"]
    assert len(got["countries"]) == 4 and len(got["asns"]) == 5     # US, RU, FR and unknown; four networks


def test_a_database_that_cannot_be_used(tmp_path, mmdb):
    def error(path) -> str:
        with pytest.raises(GeoipError) as e:
            panels(CLIENTS, path)
        assert isinstance(e.value, UsageError) and e.value.exit_code == 2
        return str(e.value)

    missing = tmp_path / "none.mmdb"
    assert error(missing) == f"the GeoIP database {missing} does not exist"
    assert error(tmp_path) == f"the GeoIP database {tmp_path} is a directory, not a .mmdb file"
    text = tmp_path / "text.mmdb"
    text.write_text("not a database\n" * 20)
    assert error(text) == f"the GeoIP database {text} is not a MaxMind-format database (.mmdb)"
    empty = tmp_path / "empty.mmdb"
    empty.write_bytes(b"")
    assert error(empty) == f"the GeoIP database {empty} is not a MaxMind-format database (.mmdb)"
    with open(mmdb, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.mmdb"
    cut.write_bytes(data[: len(data) // 2])                 # a download cut short
    assert error(cut) == f"the GeoIP database {cut} is not a MaxMind-format database (.mmdb)"
    assert error([]) == "--geoip needs a MaxMind-format database (.mmdb)"
    # a good one and a bad one: the bad one is named
    assert error([mmdb, text]) == f"the GeoIP database {text} is not a MaxMind-format database (.mmdb)"
    if os.geteuid() != 0:
        locked = tmp_path / "locked.mmdb"
        locked.write_bytes(data)
        locked.chmod(0)
        try:
            assert error(locked) == f"cannot read the GeoIP database {locked}: Permission denied"
        finally:
            locked.chmod(stat.S_IRUSR | stat.S_IWUSR)
