"""How Spark is reached, without the standalone cluster of test_spark_cluster.py: through spark-submit
(which starts the driver's JVM itself), at a master that is not there, on a file system without the input,
without Java or PySpark: the run, or one line and exit 2."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import CORPUS, corpus, free_port, parts, require, spark_missing
from test_spark_cluster import logetl, notices

#: spark-submit's runs and a driver that waits for a master: as long as the cluster's tests, run beside them
pytestmark = pytest.mark.slow

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def test_unreachable_master_is_one_line_exit_2(tmp_path):
    missing = spark_missing()
    require(missing is None, missing or "")
    port = free_port()
    p = logetl("filter", "--hdfs", "--master", f"spark://127.0.0.1:{port}", "--input", CORPUS_LOG,
               "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    err = p.stderr.decode()
    assert "Traceback" not in err
    assert f"Error: cannot reach the Spark master at spark://127.0.0.1:{port} (is it running?)" in err


def test_missing_path_on_the_cluster_file_system_is_one_line_exit_2(tmp_path):
    missing = spark_missing()
    require(missing is None, missing or "")
    p = logetl("filter", "--hdfs", "--master", "local[1]", "--input", "file:///no/such/dir/x.log",
               "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    lines = [l for l in p.stderr.decode().splitlines() if l.startswith("Error")]
    assert lines == ["Error: input 'file:///no/such/dir/x.log' does not exist"]


def test_missing_java_and_missing_pyspark_are_one_line_exit_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = "/nonexistent"
    p = subprocess.run([sys.executable, "-m", "logetl", "filter", "--hdfs", "--input", CORPUS_LOG,
                        "--output", str(tmp_path / "o")], capture_output=True, env=env)
    assert p.returncode == 2
    err = p.stderr.decode()
    assert "Traceback" not in err
    assert "no java was found" in err or "needs PySpark" in err
    # without PySpark on the path at all
    code = ("import sys; sys.modules['pyspark'] = None; sys.argv = ['logetl', 'filter', '--hdfs', '--input', "
            f"{CORPUS_LOG!r}, '--output', {str(tmp_path / 'o2')!r}]; from logetl.cli import main; main()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert p.returncode == 2
    assert p.stderr.decode().strip() == "Error: the spark engine needs PySpark: pip install 'logetl[spark]'"


def test_launched_through_spark_submit(tmp_path):
    """spark-submit starts the driver JVM and sets the master; logetl uses that session. Without logetl's
    jar on the driver's class path the Python workers parse, and the notice names the jar to give; given
    with --jars, the JVMs parse."""
    missing = spark_missing()
    require(missing is None, missing or "")
    import pyspark

    import logetl

    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    main = os.path.join(os.path.dirname(os.path.abspath(logetl.__file__)), "__main__.py")
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    from logetl.engines.spark.jvm import jar

    for given, notice in (
            ([], "in the executors' Python workers: it cannot run in their JVMs (the driver's JVM was started "
                 f"without logetl's jar: give it with --jars {jar()} (spark.jars))"),
            (["--jars", jar()], "in the executors' JVMs")):
        out = tmp_path / f"j{len(given)}"
        p = subprocess.run([os.path.join(home, "bin", "spark-submit"), "--master", "local[2]", *given, main,
                            "join", "--hdfs", CORPUS_LOG, str(out)], capture_output=True, env=env, timeout=600)
        assert p.returncode == 0, p.stderr.decode()[-3000:]
        assert parts(out) == corpus("join.tsv")
        # spark-submit's PythonRunner merges the driver's stderr into its stdout
        said = (p.stdout + p.stderr).decode()
        assert "logetl join: SUCCESSFUL" in said
        assert "(spark engine)" in said
        assert notices(p.stdout + p.stderr) == [f"logetl: Spark parses with logetl's native kernel {notice}"]
