"""The getting-started pages, run as a newcomer runs them: the flow, the checks and the commands are taken
from the pages' own code blocks, run on the real sample (the walk's `access.log`), and what the pages show
is compared with what the commands print, byte for byte (run times aside)."""
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, read

PAGES = os.path.join(ROOT, "docs", "getting-started")
#: a run's time, which differs from run to run: `in 0.46 s`, `SUCCESSFUL     0.46 s`
TIME = re.compile(r"\b\d+\.\d\d s\b")


def blocks(page: str) -> list[str]:
    """The fenced code blocks of a page, in order, each without its fences and indentation."""
    text = read(os.path.join(PAGES, page)).decode()
    found = re.findall(r"^( *)```[^\n]*\n(.*?)^ *```", text, re.M | re.S)
    return ["".join(line[len(indent):] for line in body.splitlines(keepends=True)) for indent, body in found]


def block(page: str, first_line: str) -> str:
    """The one block of a page that starts with `first_line`."""
    (found,) = [b for b in blocks(page) if b.startswith(first_line)]
    return found


def run_shown(block_text: str, cwd) -> None:
    """Runs each `$ command` of a block in `cwd` as a shell would (a venv's `logetl` and `python` on the PATH),
    and asserts the block shows what they print, stdout then stderr, the monitor's lines left out."""
    expected, got = [], []
    for command, shown in re.findall(r"^\$ (.*)\n((?:(?!\$ ).*\n)*)", block_text, re.M):
        env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
        p = subprocess.run(["bash", "-c", command], capture_output=True, cwd=cwd, env=env, timeout=600)
        printed = (p.stdout + p.stderr).decode()
        lines = [line for line in printed.splitlines(keepends=True) if " INFO logetl." not in line]
        expected.append(f"$ {command}\n{TIME.sub('T s', shown)}")
        got.append(f"$ {command}\n{TIME.sub('T s', ''.join(lines))}")
    assert got == expected


@pytest.fixture
def walk(tmp_path, sample):
    """The walk's directory: `access.log` (the sample), and the first flow written from the page."""
    shutil.copyfile(sample, tmp_path / "access.log")
    (tmp_path / "status_report.py").write_text(block("first-flow.md", "# status_report.py"))
    return tmp_path


@pytest.mark.shared
def test_the_first_flow_prints_what_the_page_shows(walk):
    run_shown(block("first-flow.md", "$ logetl explain status_report.py"), walk)
    run_shown(block("first-flow.md", "$ logetl run status_report.py"), walk)
    run_shown(block("first-flow.md", "$ cat out/statuses/part-00000"), walk)
    run_shown(block("first-flow.md", "$ cat out/not_found/part-00000"), walk)


@pytest.mark.shared
def test_the_checks_of_the_page_agree_with_logetl(walk):
    run_shown(block("first-flow.md", "$ logetl run status_report.py"), walk)
    (walk / "check.py").write_text(block("checking-the-answer.md", "# check.py"))
    (walk / "check_duckdb.py").write_text(block("checking-the-answer.md", "# check_duckdb.py"))
    (walk / "check_report.py").write_text(block("checking-the-answer.md", "# check_report.py"))
    run_shown(block("checking-the-answer.md", "$ python check.py"), walk)
    run_shown(block("checking-the-answer.md", "$ python check_duckdb.py"), walk)
    run_shown(block("checking-the-answer.md", "$ logetl sql"), walk)


@pytest.mark.shared
def test_a_wrong_format_shows_as_the_page_says(walk):
    run_shown(block("your-own-log.md", "$ head -n 1 access.log"), walk)
    run_shown(block("your-own-log.md", "$ logetl filter --format common --input"), walk)
    run_shown(block("your-own-log.md", "$ logetl filter --format nginx"), walk)


@pytest.mark.shared
def test_the_check_of_a_json_log_agrees_with_logetl(walk):
    """The page's parse of JSON lines, in place of check.py's, on the sample's requests written as Caddy
    writes them: the flow's two outputs agree with logetl's on `--format caddy`."""
    import json

    line = re.compile(r'^(\S+) \S+ \S+ \[[^\]]*\] "(\S+) (\S+) (\S+)" (\d{3}) (\S+) ')
    with open(walk / "access.log", encoding="utf-8") as f, open(walk / "access.json", "w", encoding="utf-8") as out:
        for raw in f:
            ip, method, uri, proto, status, size = line.match(raw).groups()
            request = {"remote_ip": ip, "proto": proto, "method": method, "host": "example.org", "uri": uri}
            entry = {"ts": 1431857103.5, "request": request, "size": 0 if size == "-" else int(size),
                     "status": int(status)}
            out.write(json.dumps(entry) + "\n")
    check = block("checking-the-answer.md", "# check.py")
    start, end = check.index("LINE = re.compile"), check.index("\n\n\ndef path")
    parse = block("checking-the-answer.md", "import json\n")
    (walk / "check.py").write_text(check[:start] + parse.rstrip("\n") + check[end:])
    p = subprocess.run([sys.executable, "-m", "logetl", "run", "status_report.py", "--format", "caddy", "--input",
                        "access.json", "--output", "statuses=out/statuses", "--output", "not_found=out/not_found",
                        "-q"], cwd=walk, capture_output=True, timeout=600)
    assert p.returncode == 0, p.stderr
    subprocess.run([sys.executable, "check.py"], cwd=walk, check=True, timeout=600)
    assert read(walk / "expected_statuses.tsv") == read(walk / "out" / "statuses" / "part-00000")
    assert read(walk / "expected_not_found.tsv") == read(walk / "out" / "not_found" / "part-00000")
    assert read(walk / "expected_statuses.tsv").startswith(b"200\tsuccess\t4450\t0\t294469.2\n")
