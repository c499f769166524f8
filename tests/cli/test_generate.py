"""``logetl generate``: the same bytes for a seed everywhere, and the realism the documentation promises. Speed is
measured by ``bench/generate_speed.py``, never here."""
from __future__ import annotations

import collections
import hashlib
import re

import pytest

from conftest import logetl, read
from logetl import generate as gen
from logetl.contract import INVALID_UTF8, NO_MATCH, Malformed, parse_line

#: ``logetl generate --lines 10000 --seed 7``, generator version 2. If this changes, the bytes a seed gives
#: changed: on purpose (bump ``generate.VERSION`` and say so in the changelog), or a machine or NumPy computes
#: something differently, which is a bug.
SHA256_10000_SEED_7 = "aedf635002722bff6e7be26e2debd4d4eccab47847c4a24e9c62b0737ebb3ff3"


def sha(path) -> str:
    return hashlib.sha256(read(path)).hexdigest()


def test_a_seed_gives_pinned_bytes(tmp_path):
    out = tmp_path / "a.log"
    p = logetl("generate", "--lines", "10000", "--seed", "7", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stderr == b"wrote 10,000 lines to " + str(out).encode() + b"\n"
    assert sha(out) == SHA256_10000_SEED_7
    assert gen.VERSION == 2


def test_an_existing_file_is_kept_unless_overwrite_is_given(tmp_path):
    """A typo (``logetl generate --lines 10 access.log``) must not cost a real log."""
    out = tmp_path / "access.log"
    out.write_bytes(b"a real log line\n")
    p = logetl("generate", "--lines", "10", str(out))
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [
        f"Error: {str(out)!r} exists: generate does not replace a file unless given --overwrite"]
    assert read(out) == b"a real log line\n"
    p = logetl("generate", "--lines", "10000", "--seed", "7", "--overwrite", str(out))
    assert p.returncode == 0, p.stderr
    assert sha(out) == SHA256_10000_SEED_7
    assert sorted(f.name for f in tmp_path.iterdir()) == ["access.log"]     # no temporary file left


def test_dash_writes_the_same_bytes_to_standard_output(tmp_path):
    p = logetl("generate", "--lines", "10000", "--seed", "7", "-", cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert hashlib.sha256(p.stdout).hexdigest() == SHA256_10000_SEED_7
    assert not (tmp_path / "-").exists()


def test_a_link_is_followed_and_a_stream_written_into(tmp_path):
    """--overwrite replaces the file a symbolic link names (the link stays); /dev/stdout (a pipe here) is
    written into, not replaced by a file and not refused as existing."""
    (tmp_path / "real.log").write_bytes(b"old\n")
    (tmp_path / "link.log").symlink_to(tmp_path / "real.log")
    p = logetl("generate", "--lines", "10000", "--seed", "7", "--overwrite", str(tmp_path / "link.log"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "link.log").is_symlink() and sha(tmp_path / "real.log") == SHA256_10000_SEED_7
    assert sorted(f.name for f in tmp_path.iterdir()) == ["link.log", "real.log"]
    p = logetl("generate", "--lines", "10000", "--seed", "7", "/dev/stdout")
    assert p.returncode == 0, p.stderr
    assert hashlib.sha256(p.stdout).hexdigest() == SHA256_10000_SEED_7


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gen, "blocks", fail)
    with pytest.raises(OSError, match="No space left"):
        gen.write(str(tmp_path / "a.log"), 100, 1)
    assert list(tmp_path.iterdir()) == []


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    gen.write(str(a), 30_000, 11)
    gen.write(str(b), 30_000, 11)
    gen.write(str(c), 30_000, 12)
    assert read(a) == read(b) != read(c)
    assert read(a).count(b"\n") == 30_000 and read(a).endswith(b"\n")


@pytest.mark.parametrize("short,long", [(1000, 2000), (gen.BLOCK - 1, gen.BLOCK + 5), (20_000, 70_000)])
def test_the_first_lines_do_not_depend_on_the_line_count(tmp_path, short, long):
    a, b = tmp_path / "short", tmp_path / "long"
    gen.write(str(a), short, 5)
    gen.write(str(b), long, 5)
    assert read(b).startswith(read(a))


def test_zero_lines_is_an_empty_file_and_lines_matches_write(tmp_path):
    gen.write(str(tmp_path / "empty"), 0, 1)
    assert read(tmp_path / "empty") == b""
    gen.write(str(tmp_path / "f"), 5000, 3)
    assert list(gen.lines(5000, 3)) == read(tmp_path / "f").split(b"\n")[:-1]


def _splitmix64(state: int, n: int) -> list[int]:
    """The reference algorithm, in Python integers."""
    mask, out = (1 << 64) - 1, []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append(z ^ (z >> 31))
    return out


def test_the_random_words_are_splitmix64_computed_exactly():
    assert _splitmix64(0, 3) == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]  # published vector
    key = gen._key(7, "lines")
    words = gen._words(key, 0, 40, gen.WORDS).ravel().tolist()
    assert words == _splitmix64(int(key), 40 * gen.WORDS)
    # any line's words, without the ones before (counter-based)
    assert gen._words(key, 1_000_000, 1, gen.WORDS).ravel().tolist() == \
        _splitmix64((int(key) + 1_000_000 * gen.WORDS * 0x9E3779B97F4A7C15) & ((1 << 64) - 1), gen.WORDS)


def test_the_size_table_is_integer_only_and_pinned():
    sizes = gen._sizes()
    assert len(sizes) == 4 * gen.LANE + 2 and sizes[-1] == b'- "'
    values = [int(s[:-2]) for s in sizes[:-1]]
    assert values == sorted(values) and values[0] == 19 and values[-1] == 1254046
    assert hashlib.sha256(b"".join(sizes)).hexdigest() == \
        "db91e2dc61b998804e15fb75037dde7fb2067decf723d93caed40ec73553df4c"


# ---- realism: the properties the docs state, on 100,000 lines ----------------------------------------

N = 100_000
TAIL = re.compile(r' "([^"]*)" "([^"]*)"$')
MONTH = {m: i for i, m in enumerate(gen.MONTHS)}


@pytest.fixture(scope="module")
def log():
    raw = list(gen.lines(N, 2024))
    parsed, reasons, bad = [], collections.Counter(), []
    for line in raw:
        try:
            parsed.append((parse_line(line), line))
        except Malformed as exc:
            reasons[exc.reason] += 1
            bad.append(line)
    return raw, parsed, reasons, bad


def test_about_0_2_percent_of_lines_are_malformed_in_the_four_ways(log):
    raw, _, reasons, bad = log
    assert len(raw) == N
    assert 0.0012 * N <= sum(reasons.values()) <= 0.0028 * N, reasons
    assert reasons[INVALID_UTF8] > 0 and reasons[NO_MATCH] > 0
    assert any(b"\x16\x03\x01" in l for l in bad)                                          # binary junk
    assert any(re.search(rb"\[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\]", l) for l in bad)         # no zone
    assert any(b"\xff\xfe" in l for l in bad)                                               # invalid UTF-8
    truncated = [l for l in bad if not l.endswith(b'"') and not l.startswith(b"\x16")]
    assert truncated and all(len(l) < 200 for l in truncated)                               # truncated


def test_a_quarter_of_requests_are_for_images(log):
    _, parsed, _, _ = log
    requests = [f[2] for f, _ in parsed]
    images = sum(r.split(" ")[1].startswith("/images/") for r in requests)
    assert 0.23 <= images / len(requests) <= 0.27
    assert {r.split(" ")[0] for r in requests} == {"GET", "POST", "HEAD"}
    assert {r.split(" ")[2] for r in requests} == {"HTTP/1.1", "HTTP/1.0"}
    assert any("?page=" in r for r in requests)


def test_sizes_are_dashes_for_304s_and_3_percent_of_the_others(log):
    _, parsed, _, _ = log
    fields = [f for f, line in parsed if TAIL.search(line.decode())]        # whole lines, not truncations
    assert {f[3] for f in fields} == {s for s, _ in gen.STATUSES}
    assert all(f[4] == "-" for f in fields if f[3] == "304")
    others = [f for f in fields if f[3] != "304"]
    assert 0.02 <= sum(f[4] == "-" for f in others) / len(others) <= 0.04
    sizes = sorted(int(f[4]) for f in others if f[4] != "-")
    assert 3000 <= sizes[len(sizes) // 2] <= 8000 and sizes[0] < 200 and sizes[-1] > 200_000


def test_clients_repeat_heavy_headed_with_ipv6_and_host_names(log):
    _, parsed, _, _ = log
    clients = collections.Counter(f[0] for f, _ in parsed)
    assert N / 100 <= len(clients) <= N / 40                      # addresses repeat
    counts = sorted(clients.values(), reverse=True)
    assert sum(counts[:len(counts) // 100]) >= 0.2 * len(parsed)          # a heavy head: top 1 % of clients
    assert sum(counts[len(counts) // 2:]) <= 0.1 * len(parsed)            # a long tail: the bottom half
    assert counts[len(counts) // 2] <= counts[0] / 100
    v6 = [c for c in clients if ":" in c]
    hosts = [c for c in clients if c.startswith("crawl-")]
    v4 = [c for c in clients if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", c)]
    assert len(v4) + len(v6) + len(hosts) == len(clients)
    assert 0.03 <= len(v6) / len(clients) <= 0.12 and 0.01 <= len(hosts) / len(clients) <= 0.06


def test_referers_and_agents_vary(log):
    _, parsed, _, _ = log
    tails = [TAIL.search(line.decode()) for _, line in parsed]
    tails = [m.groups() for m in tails if m]
    assert {r for r, _ in tails} == set(gen.REFERERS)
    assert {a for _, a in tails} == set(gen.AGENTS)


def test_timestamps_increase_like_a_real_log(log):
    _, parsed, _, _ = log

    def key(t: str):
        return (t[7:11], MONTH[t[3:6]], t[0:2], t[12:14], t[15:17], t[18:20])

    times = [f[1] for f, _ in parsed]
    assert times[0] == "17/May/2015:10:05:03 +0000"
    keys = [key(t) for t in times]
    assert keys == sorted(keys)
    assert all(t.endswith(" +0000") for t in times)
    # 4 lines a second: 100,000 lines span ~25,000 s
    assert times[-1].startswith("17/May/2015:17:") and len(set(times)) > 0.9 * N / 4
