"""A seeded generator of realistic Apache combined-format access-log lines, about a million a second.

Clients repeat with a heavy-headed distribution, like real traffic (a few crawlers and heavy users, a long
tail, new clients arriving as the log goes on); about a quarter of requests are for ``/images/``; sizes are
``-`` for 304s and ~3 % of others; about 0.2 % of lines are malformed in the ways real logs are (truncated,
timestamp without zone, invalid UTF-8, binary junk). Timestamps increase like a real log's, 4 lines a second.

**Same seed and line count, same bytes on every machine.** Every random number comes from a counter: word
``w`` of line ``i`` is splitmix64's output for ``key + (i * WORDS + w + 1) * GAMMA`` (mod 2**64), with ``key``
from SHA-256 of the seed. Everything that decides a byte is integer arithmetic: wrapping uint64 multiply,
xor and shift in NumPy, which every machine and NumPy version computes alike, and Python integers. There
is no NumPy ``Generator`` method (NumPy promises their streams only on the same build and machine) and no
float arithmetic (``exp``/``log`` may differ in the last bit between libms and SIMD paths): even the
log-normal size table is built in fixed point from constants worked out with ``decimal``. Line ``i`` depends
only on the seed and ``i``, so the first N lines of a longer log are the log of N lines, and blocks can be
made in any order (by several processes, if that were ever worth it: on this 2-core machine, shared with
other work, two worker processes piping blocks to a writer were slower than one process).

Lines are assembled a block at a time from precomputed byte strings (client, timestamp, request and status,
size, referer and agent) gathered by NumPy and joined with one ``bytes.join``, and written by a thread
while the next block is made. Memory is bounded by the block size whatever the line count.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal, localcontext

import numpy as np

METHODS = (("GET", 90), ("POST", 6), ("HEAD", 4))
STATUSES = (("200", 80), ("304", 8), ("404", 6), ("301", 3), ("206", 2), ("500", 1))
IMAGES = ("logo", "banner", "kibana-search", "header-bg", "avatar", "icon-rss", "photo", "sprite", "chart")
EXTS = ("png", "jpg", "gif", "svg")
PAGES = (
    "/", "/blog/", "/blog/geekery/disabling-battery-in-ubuntu-vms.html", "/articles/dynamic-dns-with-dhcp/",
    "/presentations/logstash-monitorama-2013/", "/presentations/logstash-monitorama-2013/images/kibana.png",
    "/projects/xdotool/", "/favicon.ico", "/robots.txt", "/style2.css", "/reset.css", "/blog/tags/puppet",
    "/blog/geekery/solaris-10-and-ssh.html", "/misc/Title.php.txt", "/files/logstash/logstash-1.3.2.jar",
)
REFERERS = (
    "-", "http://semicomplete.com/presentations/logstash-monitorama-2013/",
    "http://www.semicomplete.com/projects/xdotool/", "http://semicomplete.com/blog/geekery/ssl-latency.html",
    "https://www.google.com/url?sa=t&rct=j&q=&esrc=s&source=web&cd=1&ved=0CCkQFjAA",
    "http://example.org/search?q=logstash+kibana+dashboard", "http://t.co/xYz12AbCd",
    "http://www.semicomplete.com/articles/dynamic-dns-with-dhcp/",
)
AGENTS = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_9_1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/32.0.1700.77 Safari/537.36",
    "Mozilla/5.0 (Windows NT 6.1; WOW64; rv:27.0) Gecko/20100101 Firefox/27.0",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/33.0.1750.91 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 7_0 like Mac OS X) AppleWebKit/537.51.1 (KHTML, like Gecko) Version/7.0 Mobile/11A465 Safari/9537.53",
    "UniversalFeedParser/4.2-pre-314-svn +http://feedparser.org/",
    "curl/7.35.0",
    "Tiny Tiny RSS/1.11 (http://tt-rss.org/)",
)
VERSION = 2                          # of the bytes a seed gives; 1 was the per-line random.Random generator
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
START = 1431857103                   # 17/May/2015:10:05:03 +0000, like the sample the programs were first run on
MALFORMED_SHARE = 0.002
MALFORMED_BELOW = round(MALFORMED_SHARE * (1 << 26))    # a 26-bit draw below this: the line is malformed
MAX_CLIENTS = 200_000
MIN_CLIENTS = 50
LINES_PER_NEW_CLIENT = 40            # the client population grows by one every 40 lines, up to MAX_CLIENTS
BLOCK = 1 << 14                      # lines per block (~3.7 MB): small enough to assemble in cache
MS_PER_LINE = 250

N_IMAGE_PATHS = len(IMAGES) * 60 * len(EXTS)
N_PAGE_PATHS = len(PAGES) * 21       # each page without a query, or with ?page=1..20
N_PATHS = N_PAGE_PATHS + N_IMAGE_PATHS
SIZE_BITS = 13                       # the size is drawn as the sum of four 13-bit lanes of a word
LANE = (1 << SIZE_BITS) - 1
SIZE_LANES_MEAN = 2 * LANE           # the sum: 0 .. 4 * LANE, mean 2 * LANE
DASH = 4 * LANE + 1                  # index of "-" in the size table

# splitmix64 (Steele, Lea, Flood 2014): the golden-ratio increment and the output mix
GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
WORDS = 5                            # 64-bit words drawn per line


def _u(x: int) -> np.uint64:
    return np.uint64(x)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's output function, in place on a uint64 array (wrapping arithmetic, exact everywhere)."""
    z ^= z >> _u(30)
    z *= _M1
    z ^= z >> _u(27)
    z *= _M2
    z ^= z >> _u(31)
    return z


def _key(seed: int, stream: str) -> np.uint64:
    digest = hashlib.sha256(f"logetl generate {VERSION}/{stream}/{seed}".encode()).digest()
    return np.uint64(int.from_bytes(digest[:8], "big"))


def _words(key: np.uint64, start: int, count: int, width: int) -> np.ndarray:
    """Words ``start * width .. (start + count) * width`` of the stream ``key``, shaped (count, width)."""
    z = np.arange(start * width + 1, (start + count) * width + 1, dtype=np.uint64)
    z *= GAMMA
    z += key
    return _mix(z).reshape(count, width)


def _bits(w: np.ndarray, shift: int, nbits: int) -> np.ndarray:
    return (w >> _u(shift)) & _u((1 << nbits) - 1)


def _scaled(lane16: np.ndarray, n: int) -> np.ndarray:
    """A 16-bit draw scaled to 0 .. n-1 (multiply-shift), as int64."""
    return ((lane16 * _u(n)) >> _u(16)).astype(np.int64)


def _objects(items) -> np.ndarray:
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr


class _Tables:
    """The byte strings lines are assembled from; built once per process (~0.2 s)."""

    def __init__(self):
        self.time_of_day = _objects([b'%02d:%02d:%02d +0000] "' % (s // 3600, s // 60 % 60, s % 60)
                                     for s in range(86400)])
        paths = [p + (f"?page={q}" if q else "") for p in PAGES for q in range(21)]
        paths += [f"/images/{name}{k}.{ext}" for name in IMAGES for k in range(1, 61) for ext in EXTS]
        assert len(paths) == N_PATHS
        self.request = _objects([f'{m} {p} {proto}" {st} '.encode()
                                 for m, _ in METHODS for p in paths for proto in ("HTTP/1.1", "HTTP/1.0")
                                 for st, _ in STATUSES])
        self.size = _objects(_sizes())
        self.referer_agent = _objects([f'{r}" "{a}"\n'.encode() for r in REFERERS for a in AGENTS])
        self.method_cum = np.cumsum([w for _, w in METHODS])
        self.status_cum = np.cumsum([w for _, w in STATUSES])
        self.status_304 = [s for s, _ in STATUSES].index("304")


def _sizes() -> list[bytes]:
    """``b'<size> "'`` for each sum S of four 13-bit lanes, then ``b'- "'``. S is nearly normal (Irwin-Hall),
    so size = exp(8.5 + 1.6 z), z = (S - mean) / sd, is nearly log-normal: median ~4.9 KB, 20 B .. 1 MB,
    32,765 distinct values (a small table keeps the assembly in cache). The exponentials are a running
    product in 64-bit fixed point (Python integers) from two constants worked out with ``decimal``: no
    float arithmetic, the same integers on every machine."""
    one = 1 << 64
    with localcontext() as ctx:
        ctx.prec = 50
        sd = (Decimal(4) * (Decimal(LANE + 1) ** 2 - 1) / 12).sqrt()
        step = int((Decimal("1.6") / sd).exp() * one)
        x = int((Decimal("8.5") - Decimal("1.6") * SIZE_LANES_MEAN / sd).exp() * one)
    out = []
    for _ in range(4 * LANE + 1):
        out.append(b'%d "' % (x >> 64))
        x = x * step >> 64
    out.append(b'- "')
    return out


_tables: _Tables | None = None
_tables_lock = threading.Lock()


def tables() -> _Tables:
    global _tables
    with _tables_lock:
        if _tables is None:
            _tables = _Tables()
        return _tables


class _Clients:
    """Client ``k``'s address with ``' - - ['``, from its own word of the seed's client stream: 90 % IPv4,
    7 % IPv6, 3 % crawler host names. Built as the population grows."""

    def __init__(self, seed: int):
        self.key = _key(seed, "clients")
        self.table = np.empty(MAX_CLIENTS, dtype=object)
        self.built = 0

    def upto(self, n: int) -> np.ndarray:
        if n > self.built:
            words = _words(self.key, self.built, n - self.built, 1)[:, 0].tolist()
            self.table[self.built:n] = [_client(self.built + i, w) for i, w in enumerate(words)]
            self.built = n
        return self.table


def _client(k: int, w: int) -> bytes:
    kind = ((w >> 48) * 100) >> 16
    if kind < 90:
        a = 1 + (((w >> 40) & 0xFF) * 223 >> 8)
        d = 1 + (((w >> 16) & 0xFF) * 254 >> 8)
        return b"%d.%d.%d.%d - - [" % (a, (w >> 32) & 0xFF, (w >> 24) & 0xFF, d)
    if kind < 97:
        return b"2001:db8:%x::%x - - [" % ((w >> 16) & 0xFFFF, 1 + ((w & 0xFFFF) * 0xFFFF >> 16))
    return b"crawl-%d.search%d.example.net - - [" % (k, 1 + ((w & 0xFFFF) * 9 >> 16))


def _date(day: int) -> bytes:
    d = datetime.date(1970, 1, 1) + datetime.timedelta(days=day)
    return b"%02d/%s/%d:" % (d.day, MONTHS[d.month - 1].encode(), d.year)


def _stamps(first: int, end: int, time_of_day: np.ndarray) -> list[bytes]:
    """``b'17/May/2015:10:05:03 +0000] "'`` for each second from ``first`` to ``end - 1``."""
    out = []
    for day in range(first // 86400, (end - 1) // 86400 + 1):
        date, base = _date(day), day * 86400
        out += [date + tod for tod in time_of_day[max(first, base) - base:min(end, base + 86400) - base].tolist()]
    return out


class _Lines:
    """Lines of one seed. Line ``i`` is a function of the seed and ``i`` alone, so blocks can be made in
    any order and in any process."""

    def __init__(self, seed: int):
        self.key = _key(seed, "lines")
        self.clients = _Clients(seed)
        self.t = tables()

    def block(self, start: int, count: int) -> bytes:
        """Lines ``start .. start + count - 1``, each ending with ``\\n``."""
        t = self.t
        w = _words(self.key, start, count, WORDS)
        w0, w1, w2, w3, w4 = (w[:, j] for j in range(WORDS))
        i = np.arange(start, start + count, dtype=np.int64)

        # client: index floor(population * u**3), u uniform on [0, 1) with 21 bits, in integers
        population = np.clip(i // LINES_PER_NEW_CLIENT + 1, MIN_CLIENTS, MAX_CLIENTS).astype(np.uint64)
        u = w0 >> _u(43)
        client = (((u * u * u) >> _u(31)) * population) >> _u(32)
        clients = self.clients.upto(int(population[-1]))

        # clock: line i at i * 250 ms + 0 .. 249 ms: increasing, 0 .. 500 ms apart, 4 lines a second
        sec = (i * MS_PER_LINE + _scaled(w1 >> _u(48), MS_PER_LINE)) // 1000 + START
        first = int(sec[0])
        stamps = _objects(_stamps(first, int(sec[-1]) + 1, t.time_of_day))

        # request and status
        method = np.searchsorted(t.method_cum, _scaled(_bits(w1, 32, 16), 100), side="right")
        status = np.searchsorted(t.status_cum, _scaled(_bits(w1, 16, 16), 100), side="right")
        http10 = _scaled(_bits(w1, 0, 16), 10) == 0
        image = _scaled(_bits(w2, 16, 16), 4) == 0
        top = w2 >> _u(32)
        page = ((top * _u(len(PAGES))) >> _u(32)).astype(np.int64)
        query = _scaled(_bits(w2, 0, 16), 200)
        page_path = page * 21 + np.where(query < 20, query + 1, 0)
        image_path = N_PAGE_PATHS + ((top * _u(N_IMAGE_PATHS)) >> _u(32)).astype(np.int64)
        path = np.where(image, image_path, page_path)
        request = ((method * N_PATHS + path) * 2 + http10) * len(STATUSES) + status

        # size: nearly log-normal; "-" for 304s and 3 % of the others
        size = (_bits(w3, 0, SIZE_BITS) + _bits(w3, SIZE_BITS, SIZE_BITS) + _bits(w3, 2 * SIZE_BITS, SIZE_BITS)
                + _bits(w3, 3 * SIZE_BITS, SIZE_BITS))
        dash = (status == t.status_304) | (_scaled(_bits(w4, 16, 16), 100) < 3)
        size = np.where(dash, DASH, size.astype(np.int64))

        pieces = np.empty((count, 5), dtype=object)
        pieces[:, 0] = clients[client.astype(np.int64)]
        pieces[:, 1] = stamps[sec - first]
        pieces[:, 2] = t.request[request]
        pieces[:, 3] = t.size[size]
        pieces[:, 4] = t.referer_agent[(w4 >> _u(58)).astype(np.int64)]

        bad = np.flatnonzero(_bits(w4, 32, 26) < _u(MALFORMED_BELOW))
        if len(bad):
            for row, detail in zip(bad.tolist(), _bits(w4[bad], 0, 16).tolist()):
                line = b"".join(pieces[row].tolist())[:-1]
                pieces[row, 0] = _malformed(line, detail) + b"\n"
                pieces[row, 1:] = b""
        return b"".join(pieces.ravel().tolist())


def _malformed(good: bytes, detail: int) -> bytes:
    kind, fraction = detail & 3, detail >> 2                      # fraction: 14 bits
    if kind == 0:
        return good[: (len(good) // 2 + 1) * fraction >> 14]       # truncated
    if kind == 1:
        return good.replace(b" +0000]", b"]", 1)                   # timestamp without zone
    if kind == 2:
        return good.replace(b' HTTP/1.', b' HTTP/1.\xff\xfe', 1)   # invalid UTF-8
    return b"\x16\x03\x01 junk from a TLS client"                  # binary junk


def blocks(n: int, seed: int, start: int = 0, block: int = BLOCK):
    """Yields lines ``start .. n - 1`` of the seed's log as consecutive chunks of bytes (at most ``block``
    lines each, every line ending with ``\\n``)."""
    gen = _Lines(seed)
    for first in range(start, n, block):
        yield gen.block(first, min(block, n - first))


def lines(n: int, seed: int):
    """Yields ``n`` lines (bytes, without ``\\n``)."""
    for chunk in blocks(n, seed):
        yield from chunk[:-1].split(b"\n")


def write(path: str, n: int, seed: int, replace: bool = False) -> None:
    """Writes the log of ``n`` lines to ``path``, whole or not at all: into ``.NAME.logetl-generate``
    beside it, then renamed to ``path`` (``replace``: over an existing file; else a ``path`` that appeared
    meanwhile raises FileExistsError). That name is fixed so that a run killed half-way leaves at most that
    file, which the next run into ``path`` writes over; it is removed if anything fails."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.logetl-generate")
    try:     # (the open inside: a signal that comes as it returns still removes the file)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as f:
            write_stream(f, n, seed)
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)               # no rename that could replace a file created meanwhile
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_stream(f, n: int, seed: int) -> None:
    """Writes the log of ``n`` lines to the binary file ``f``, making block k + 1 while a thread writes
    block k (the file write releases the GIL)."""
    with ThreadPoolExecutor(max_workers=1) as writer:
        pending = None
        for chunk in blocks(n, seed):
            if pending is not None:
                pending.result()
            pending = writer.submit(f.write, chunk)
        if pending is not None:
            pending.result()
