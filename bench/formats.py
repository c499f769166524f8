"""Benchmark of log formats: Branch on an 11-field nginx log against Branch on the default (combined) log.

    python bench/formats.py [--lines 2000000] [--repeat 3]

Generates a seeded combined log with ``logetl generate`` and rewrites it into an nginx format
(each line gets `` $request_time "$http_x_forwarded_for"`` appended: the combined layout is the first nine
fields of that format), both kept in bench/out/formats/. Then, interleaved ``--repeat`` times from cleared
outputs, median wall time of:

- ``logetl branch`` (default format) on the combined log, and ``logetl branch --format NGINX`` on the nginx
  log (the whole command: start, parse, write);
- the parse alone, in this process: the local engine's two-thread scan over the file with each format's
  parser, records written as TSV (what Branch asks of the kernel).

Target: the nginx parse within 1.5x the default format's time in the same run.

Then the vendor presets (``alb``, ``elb``, ``s3``, ``haproxy``, ``cloudfront``, ``w3c``) and the JSON-lines presets
(``caddy``, ``traefik``, ``nginx_json``: each record written as that server writes its JSON object, keys in
its order; target within 2.5x, ``JSON_LIMIT``): the same combined log's
records rewritten into each preset's layout (each vendor's documented example line with the record's
client address, request, status, bytes and user agent in their places, the first 50,000 records repeated
to the line count; CloudFront's with its two header lines first, W3C's with an IIS header block of IIS's
default columns and ``sc-bytes``), and the parse alone of each, the fields of the one vocabulary it has, against the combined
parse in the same run (target: within 1.5x). Peak RSS: the parse of each preset's log and of its first half,
each in a fresh process (``ru_maxrss``): flat with input size means the two are alike. Writes
bench/out/formats/results.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out", "formats")
NGINX = ('$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" '
         '"$http_user_agent" $request_time "$http_x_forwarded_for"')
LIMIT = 1.5
#: the JSON-lines presets' limit: a JSON line is about twice a combined line's bytes, every byte read by a
#: full JSON scan (strings, escapes, nesting), against combined's expression that skips most of its bytes
JSON_LIMIT = 2.5
JSON_PRESETS = ("caddy", "traefik", "nginx_json")


def json_line(preset: str, n: int, ip: str, time: str, request: str, status: str, size: str, referer: str,
              agent: str) -> bytes:
    """One record in a JSON preset's layout, with the keys and key order each server writes."""
    method, _, rest = request.partition(" ")
    uri, _, proto = rest.rpartition(" ") if " " in rest else (rest, "", "")
    if preset == "caddy":
        obj = {"level": "info", "ts": 1431856703.5241024 + n, "logger": "http.log.access", "msg": "handled request",
               "request": {"remote_ip": ip, "remote_port": str(40000 + n % 20000), "client_ip": ip, "proto": proto,
                           "method": method, "host": "example.com", "uri": uri,
                           "headers": {"User-Agent": [agent], "Referer": [referer], "Accept": ["*/*"]}},
               "bytes_read": 0, "user_id": "", "duration": 0.000929675, "size": int(size), "status": int(status),
               "resp_headers": {"Server": ["Caddy"], "Content-Type": ["text/html; charset=utf-8"]}}
    elif preset == "traefik":
        obj = {"ClientAddr": f"{ip}:{40000 + n % 20000}", "ClientHost": ip, "ClientPort": str(40000 + n % 20000),
               "ClientUsername": "-", "DownstreamContentSize": int(size), "DownstreamStatus": int(status),
               "Duration": 1964899, "OriginContentSize": int(size), "OriginDuration": 1694568,
               "OriginStatus": int(status), "Overhead": 270331, "RequestAddr": "example.com", "RequestContentSize": 0,
               "RequestCount": n, "RequestHost": "example.com", "RequestMethod": method, "RequestPath": uri,
               "RequestPort": "-", "RequestProtocol": proto, "RequestScheme": "http", "RetryAttempts": 0,
               "RouterName": "web@docker", "ServiceAddr": "10.0.0.5:3000", "ServiceName": "web@docker",
               "ServiceURL": "http://10.0.0.5:3000", "StartLocal": "2015-05-17T10:05:03.10912886Z",
               "StartUTC": "2015-05-17T10:05:03.10912886Z", "entryPointName": "http", "level": "info", "msg": "",
               "request_Referer": referer, "request_User-Agent": agent, "time": "2015-05-17T10:05:03Z"}
    else:
        obj = {"time_local": time, "remote_addr": ip, "remote_user": "", "request": request, "status": status,
               "body_bytes_sent": size, "request_time": "0.012", "http_referrer": referer, "http_user_agent": agent}
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
#: an IIS header block (IIS's default columns and sc-bytes) for the w3c preset's log
W3C_HEADER = (b"#Software: Microsoft Internet Information Services 10.0\r\n#Version: 1.0\r\n"
              b"#Date: 2024-01-02 03:04:05\r\n#Fields: date time s-ip cs-method cs-uri-stem cs-uri-query s-port "
              b"cs-username c-ip cs(User-Agent) cs(Referer) sc-status sc-substatus sc-win32-status sc-bytes "
              b"time-taken\r\n")


def to_nginx(src: str, dst: str) -> None:
    """Appends a request time and a forwarded-for list to every line (seeded by the line number)."""
    with open(src, "rb") as f, open(dst + ".tmp", "wb") as out:
        n = 0
        buf = []
        for line in f:
            line = line.rstrip(b"\n")
            h = (n * 2654435761) & 0xFFFFFFFF
            rt = b"%d.%03d" % (h % 3, h % 1000)
            xff = b"-" if h % 4 else b"203.0.113.%d, 10.0.%d.%d" % (h % 250, h % 7, h % 200)
            buf.append(line + b" " + rt + b' "' + xff + b'"\n')
            n += 1
            if len(buf) >= 65536:
                out.write(b"".join(buf))
                buf = []
        out.write(b"".join(buf))
    os.replace(dst + ".tmp", dst)


def _vendor_lines():
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "formats"))
    import vendor_lines as v

    return v


#: distinct records rewritten per preset; the preset's log repeats them up to the line count (a rewrite of
#: each of 2M lines in Python takes minutes; the parse's cost depends on the lines' layout and lengths)
DISTINCT = 50_000


def to_vendor(src: str, dst: str, preset: str, lines: int) -> None:
    """The first ``DISTINCT`` combined records in ``preset``'s layout (see the module docstring), repeated
    to ``lines`` lines."""
    from logetl import contract

    v = _vendor_lines()
    with open(src, "rb") as f, open(dst + ".tmp", "wb") as out:
        if preset == "cloudfront":
            out.write(b"#Version: 1.0\n" + v.CLOUDFRONT_FIELDS + b"\n")
        if preset == "w3c":
            out.write(W3C_HEADER)
        buf = []
        for line in f:
            raw = line.rstrip(b"\n")
            try:
                fields = contract.parse_line(raw)
            except contract.Malformed:     # the generated log's malformed lines stay out
                continue
            ip, _, request, status, size = fields
            referer, agent = contract.parse_tail(raw, fields)
            if preset in JSON_PRESETS:
                buf.append(json_line(preset, len(buf), ip, fields[1], request, status, "0" if size == "-" else size,
                                     referer or "-", agent or "-") + b"\n")
                if len(buf) == min(DISTINCT, lines):
                    break
                continue
            ip, request, status, agent = ip.encode(), request.encode(), status.encode(), (agent or "-").encode()
            size = b"0" if size == "-" else size.encode()
            method, _, rest = request.partition(b" ")
            path = rest.partition(b" ")[0] or b"/"
            if preset == "alb":
                out_line = v.ALB_HTTP.replace(b"192.168.131.39", ip).replace(b" 200 200 34 366 ", b" %s 200 34 %s " % (status, size)) \
                    .replace(b"GET http://www.example.com:80/ HTTP/1.1", request).replace(b"curl/7.46.0", agent)
            elif preset == "elb":
                out_line = v.ELB_HTTP.replace(b"192.168.131.39", ip).replace(b" 200 200 0 29 ", b" %s 200 0 %s " % (status, size)) \
                    .replace(b"GET http://www.example.com:80/ HTTP/1.1", request).replace(b"curl/7.38.0", agent)
            elif preset == "s3":
                out_line = v.S3_LINE.replace(b"192.0.2.3", ip).replace(b" 200 - 113 ", b" %s - %s " % (status, size)) \
                    .replace(b"GET /DOC-EXAMPLE-BUCKET1?versioning HTTP/1.1", request).replace(b"S3Console/0.4", agent)
            elif preset == "haproxy":
                out_line = v.HAPROXY_LINE.replace(b"10.0.1.2", ip).replace(b" 200 2750 ", b" %s %s " % (status, size)) \
                    .replace(b"GET /index.html HTTP/1.1", request)
            elif preset == "w3c":
                out_line = b"2024-01-02 03:04:05 10.0.0.1 %s %s - 80 - %s %s - %s 0 0 %s 15" % (
                    method or b"-", path, ip, agent.replace(b" ", b"+"), status, size)
            else:
                out_line = v.CLOUDFRONT_LINE.replace(b"192.0.2.100", ip).replace(b"\t392\t", b"\t%s\t" % size, 1) \
                    .replace(b"\tGET\t", b"\t%s\t" % method).replace(b"/index.html\t200\t", b"%s\t%s\t" % (path, status)) \
                    .replace(b"Mozilla/5.0%20(Windows%20NT%2010.0;%20Win64;%20x64)%20AppleWebKit/537.36",
                             agent.replace(b" ", b"%20").replace(b"\t", b"%09"))
            buf.append(out_line + b"\n")
            if len(buf) == min(DISTINCT, lines):
                break
        block = b"".join(buf)
        for _ in range(lines // len(buf)):
            out.write(block)
        out.write(b"".join(buf[:lines % len(buf)]))
    os.replace(dst + ".tmp", dst)


def vocabulary(fmt) -> tuple[str, ...]:
    """The fields of the one vocabulary the format has (what the three programs and reports read)."""
    return tuple(f for f in ("ip", "time", "method", "path", "request", "response", "size") if f in fmt.fields)


def peak_rss_mb(path: str, preset: str, lines: int | None) -> float:
    """Peak RSS (MB) of a fresh process parsing the first ``lines`` lines of ``path`` (all: None)."""
    code = f"""
import itertools, os, resource, sys, tempfile
sys.path.insert(0, {os.path.join(HERE, '..', 'src')!r})
from logetl import formats
from logetl.engines import kernel
from logetl.engines.local.scan import scan
src = {path!r}
if {lines!r} is not None:
    fd, src = tempfile.mkstemp(dir={OUT!r})
    with open({path!r}, 'rb') as f, os.fdopen(fd, 'wb') as out:
        out.writelines(itertools.islice(f, {lines!r}))
fmt = formats.compile_format({preset!r})
keep = tuple(f for f in ("ip", "time", "method", "path", "request", "response", "size") if f in fmt.fields)
n = sum(p.n_records for p, _ in scan([src], columns=False, parser=kernel.Parser(fmt, keep)))
if src != {path!r}:
    os.unlink(src)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    return float(done.stdout.decode().split()[-1])


def run_cli(args: list[str], outs: list[str]) -> float:
    for p in outs:
        shutil.rmtree(p, ignore_errors=True)
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "logetl", *args], capture_output=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"failed: logetl {' '.join(args)}\n{p.stderr.decode(errors='replace')}")
    return wall


def parse_only(path: str, fmt) -> tuple[float, int]:
    from logetl.contract import FIELDS
    from logetl.engines import kernel
    from logetl.engines.local.scan import scan

    parser = kernel.Parser(fmt, FIELDS if fmt.legacy or set(FIELDS) <= set(fmt.fields) else vocabulary(fmt))
    start = time.perf_counter()
    n = 0
    for parsed, _ in scan([path], columns=False, parser=parser):
        n += parsed.n_records
    return time.perf_counter() - start, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--presets", default="alb,elb,s3,haproxy,cloudfront,w3c,caddy,traefik,nginx_json",
                    help="vendor and JSON presets to time ('' none)")
    args = ap.parse_args()
    from logetl import formats

    os.makedirs(OUT, exist_ok=True)
    combined = os.path.join(OUT, f"combined-{args.lines}-{args.seed}.log")
    nginx = os.path.join(OUT, f"nginx-{args.lines}-{args.seed}.log")
    if not os.path.exists(combined):
        subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", str(args.lines), "--seed",
                        str(args.seed), combined], check=True)
    if not os.path.exists(nginx):
        to_nginx(combined, nginx)
    env_outs = [os.path.join(OUT, n) for n in ("c1", "c2", "n1", "n2")]
    cmd = {
        "branch (combined, default)": (["branch", "-q", "--input", combined, "--output1", env_outs[0],
                                        "--output2", env_outs[1]], env_outs[:2]),
        "branch --format nginx-11": (["branch", "-q", "--format", NGINX, "--input", nginx, "--output1",
                                      env_outs[2], "--output2", env_outs[3]], env_outs[2:]),
    }
    fmts = {"parse (combined, default)": (combined, formats.LEGACY),
            "parse nginx-11": (nginx, formats.compile_format(NGINX))}
    presets = [p for p in args.presets.split(",") if p]
    for preset in presets:
        path = os.path.join(OUT, f"{preset}-{args.lines}-{args.seed}.log")
        if not os.path.exists(path):
            to_vendor(combined, path, preset, args.lines)
        fmts[f"parse {preset}"] = (path, formats.compile_format(preset))
    times: dict[str, list[float]] = {k: [] for k in [*cmd, *fmts]}
    records = {}
    for _ in range(args.repeat):
        for label, (a, outs) in cmd.items():
            times[label].append(run_cli(a, outs))
        for label, (path, fmt) in fmts.items():
            t, records[label] = parse_only(path, fmt)
            times[label].append(t)
    a, b = (os.path.join(OUT, n, "part-00000") for n in ("c1", "n1"))
    same = open(a, "rb").read() == open(b, "rb").read()
    med = {k: statistics.median(v) for k, v in times.items()}
    results = {
        "lines": args.lines, "bytes": {"combined": os.path.getsize(combined), "nginx": os.path.getsize(nginx)},
        "median_s": med, "runs_s": times, "records": records, "branch_outputs_identical": same,
        "ratio_cli": med["branch --format nginx-11"] / med["branch (combined, default)"],
        "ratio_parse": med["parse nginx-11"] / med["parse (combined, default)"], "limit": LIMIT,
        "presets": {},
    }
    for preset in presets:
        path = fmts[f"parse {preset}"][0]
        half, whole = peak_rss_mb(path, preset, args.lines // 2), peak_rss_mb(path, preset, None)
        results["presets"][preset] = {
            "bytes": os.path.getsize(path), "records": records[f"parse {preset}"],
            "ratio_parse": med[f"parse {preset}"] / med["parse (combined, default)"],
            "limit": JSON_LIMIT if preset in JSON_PRESETS else LIMIT,
            # the same ratio per byte of log: what is left once the lines' greater length is taken out
            "ratio_parse_per_byte": (med[f"parse {preset}"] / os.path.getsize(path))
            / (med["parse (combined, default)"] / os.path.getsize(combined)),
            "peak_rss_mb_half": half, "peak_rss_mb_whole": whole}
    results["load_average_1_5_15"] = os.getloadavg()
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(f"{args.lines:,} lines; combined {results['bytes']['combined'] / 1e6:.0f} MB, "
          f"nginx {results['bytes']['nginx'] / 1e6:.0f} MB; median of {args.repeat}")
    for k, v in med.items():
        print(f"  {k:<30} {v:6.2f} s")
    print(f"  nginx / default, whole branch: {results['ratio_cli']:.2f}   parse only: {results['ratio_parse']:.2f}"
          f"   (limit {LIMIT})")
    print(f"  branch outputs identical: {same}")
    for preset, r in results["presets"].items():
        print(f"  {preset:<11} {r['bytes'] / 1e6:5.0f} MB, {r['records']:,} records; parse / combined "
              f"{r['ratio_parse']:.2f} (limit {r['limit']}), per byte {r['ratio_parse_per_byte']:.2f}; "
              f"peak RSS {r['peak_rss_mb_half']:.0f} MB for half, "
              f"{r['peak_rss_mb_whole']:.0f} MB for all")
    print(f"  system load at the end (1, 5, 15 min): "
          f"{', '.join(f'{x:.1f}' for x in results['load_average_1_5_15'])}")


if __name__ == "__main__":
    main()
