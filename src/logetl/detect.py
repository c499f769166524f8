"""``--format auto``: the log format recognised from the first lines of the input.

Each candidate (``CANDIDATES``: the vendor presets, then the Apache and nginx presets) reads the first
``SAMPLE_LINES`` lines that are not empty; a line counts for a candidate when it is one of its records (or,
for CloudFront and W3C, one of its header lines; W3C reads each line with the columns of the last
``#Fields:`` line before it), and for ``combined`` only when its ``"referer" "user agent"`` tail
is there too (a line of the common layout also matches the original expression, whose tail is then null).
The candidate that takes the most lines wins; a tie goes to the one listed first (``w3c`` first when a
line says ``#Software: Microsoft Internet Information Services``) (the more specific: nginx's
preset has one more quoted field than combined). A log none of them takes a line of is refused, naming the
candidates tried. A JSON preset takes a line that is a JSON object holding its signature's keys
(``jsonformats.SIGNATURES``: Caddy's ``request``, ``status``, ``size``, ``ts``; Traefik's ``ClientHost``,
``RequestMethod``, ``DownstreamStatus``; nginx_json's ``time_local``, ``remote_addr``, ``request``, ``status``).
"""
from __future__ import annotations

from dataclasses import dataclass

from logetl import contract, formats, jsonformats

CANDIDATES = ("caddy", "traefik", "nginx_json", "alb", "elb", "s3", "haproxy", "cloudfront", "w3c", "vhost_combined",
              "nginx", "combined", "common")
SAMPLE_LINES = 20
#: the directive IIS starts each block of its W3C headers with
IIS = b"#Software: Microsoft Internet Information Services"
#: how much of the input's start is read (a sample ends at the last whole line in it)
SAMPLE_BYTES = 1 << 16


@dataclass(frozen=True)
class Detected:
    """The format chosen, and how many of the sampled lines it took."""

    name: str
    matched: int
    sampled: int

    def describe(self) -> str:
        return f"--format auto: {self.name} ({self.matched} of the first {self.sampled} lines)"


def _taken(fmt: formats.LogFormat, lines: list[bytes]) -> int:
    """How many of ``lines`` ``fmt`` takes (W3C: each with the columns of the ``#Fields:`` line before it)."""
    if not fmt.segmented:
        return sum(_takes(fmt, raw) for raw in lines)
    from logetl import w3c

    n, cols = 0, None
    for raw in lines:
        if raw.startswith(w3c.FIELDS_DIRECTIVE):
            cols = w3c.columns(raw)
        n += _takes(fmt, raw, cols)
    return n


def _takes(fmt: formats.LogFormat, raw: bytes, *cols) -> bool:
    if fmt.syntax == "json" and not jsonformats.looks_like(fmt.name, raw):
        return False     # any JSON object is a record of every JSON format: its keys tell which it is
    try:
        fields = fmt.parse_line(raw, *cols)
    except (formats.Header, formats.NotRequest):   # (a line of the format that is no record)
        return True
    except contract.Malformed:
        return False
    return not fmt.legacy or fields[-1] is not None


def sample_lines(data: bytes) -> list[bytes]:
    """The first ``SAMPLE_LINES`` lines of ``data`` that are not empty (a last line cut short is left out)."""
    lines = data.split(b"\n")
    if len(data) >= SAMPLE_BYTES and len(lines) > 1:
        lines.pop()
    return [ln for ln in lines if ln.strip(b"\r")][:SAMPLE_LINES]


def detect(lines: list[bytes], where: str = "the input") -> Detected:
    """The candidate that takes the most of ``lines``; a ``FormatError`` naming the candidates when none
    takes any."""
    if not lines:
        raise formats.FormatError(f"--format auto cannot recognise a format: {where} has no line to read "
                                  "(give --format)")
    best = None
    candidates = CANDIDATES
    if any(raw.startswith(IIS) for raw in lines):   # IIS says it wrote the log: W3C wins a tie with CloudFront
        candidates = ("w3c", *(c for c in CANDIDATES if c != "w3c"))
    for name in candidates:
        fmt = formats.compile_format(name)
        n = _taken(fmt, lines)
        if n and (best is None or n > best.matched):
            best = Detected(name, n, len(lines))
    if best is None:
        raise formats.FormatError(f"--format auto recognises no format in the first {len(lines)} lines of {where} "
                                  f"(tried: {', '.join(CANDIDATES)}); give --format or --format-file")
    return best


def detect_input(path: str) -> Detected:
    """``detect`` on the start of the first file of input ``path`` (a file, directory or glob on this
    machine; compressed files are read decompressed)."""
    from logetl.io import inputs
    from logetl.io.fs import LOCAL

    if path == inputs.STDIN:
        raise formats.FormatError("--format auto reads the start of the input files: it cannot read standard "
                                  "input (give --format)")
    try:
        first = inputs.resolve(path, LOCAL)[0]
        with inputs.open_input(first) as f:
            data = f.read(SAMPLE_BYTES)
    except OSError as exc:
        raise formats.FormatError(f"--format auto cannot read {path!r}: {exc.strerror or exc}") from None
    return detect(sample_lines(data), repr(first))
