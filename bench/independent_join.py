"""An independent Join result for logs of any size, to check logetl's at scale (bench/scale.py).

    python bench/independent_join.py LOG OUT [--tmp DIR]

It shares no code with logetl: Python's ``re`` on the documented line contract (whole-line match of the
original expression with ASCII classes and DOTALL, invalid UTF-8 and TAB/CR in a field malformed, size
``-`` dropped), the CRC-32 score of ``zlib``, and coreutils ``sort -s`` (stable, external: any size) for
"score descending, equal scores in input order". Memory: the set of images-area clients only.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import zlib

RX = re.compile(r'([^ ]*) \S+ \S+ \[([\w:/]+\s[+\-]\d{4})\] "(.+?)" (\d{3}) ([^ ]*).*', re.ASCII | re.DOTALL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("out")
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(dir=args.tmp, prefix="independent-join-")
    scored = os.path.join(tmp, "scored.tsv")
    images = set()
    with open(args.log, "rb") as src, open(scored, "w", encoding="utf-8") as dst:
        for raw in src:
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            m = RX.fullmatch(line)
            if m is None:
                continue
            g = m.groups()
            if any("\t" in f or "\r" in f for f in g) or g[4] == "-":
                continue
            if g[2].startswith("GET /images/"):
                images.add(g[0])
            score = zlib.crc32(g[0].encode("utf-8")) % 100
            if score >= 60:
                dst.write(f"{score}\t{g[0]}\t{g[0]}\t{g[1]}\t{g[2]}\t{g[3]}\t{g[4]}\t{score}\n")
    env = {**os.environ, "LC_ALL": "C"}
    with open(args.out, "wb") as out:
        sort = subprocess.Popen(["sort", "-s", "-t", "\t", "-k1,1nr", "-S", "256M", "-T", tmp],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        cut = subprocess.Popen(["cut", "-f2-"], stdin=sort.stdout, stdout=out, env=env)
        sort.stdout.close()
        with open(scored, encoding="utf-8") as f:
            for line in f:
                if line.split("\t", 2)[1] in images:
                    sort.stdin.write(line.encode("utf-8"))
        sort.stdin.close()
        if sort.wait() or cut.wait():
            sys.exit("sort or cut failed")
    os.remove(scored)
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
