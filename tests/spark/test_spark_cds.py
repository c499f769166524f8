"""The Spark driver JVM's class archive (``logetl.engines.spark.cds``): when a run records it, uses it or
starts without it; that recording and using it change nothing a user sees (the outputs' bytes, stderr).
The executors of a cluster on the driver's machine starting from it: test_spark_cluster."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import CORPUS, corpus, logetl, parts, require, spark_missing
from logetl.engines.spark import cds as spark_cds

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


@pytest.fixture
def archive(tmp_path, monkeypatch):
    require(spark_missing() is None, spark_missing() or "")
    made = []
    monkeypatch.setattr(spark_cds, "_RECORDING", spark_cds._RECORDING)   # this process's own stays its own

    def make():
        a = spark_cds.ClassArchive({}, str(tmp_path))
        made.append(a)
        return a

    yield make
    for a in made:
        a.recording = None    # nothing to finish at this test process's exit


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_no_archive_records_one_and_claims_it(archive, tmp_path):
    a = archive()
    assert a.path.startswith(str(tmp_path / "spark-driver-")) and a.path.endswith(".jsa")
    assert a.options() == [f"-XX:ArchiveClassesAtExit={a.path}.{os.getpid()}.tmp", "-Xlog:cds*=off"]
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(f"{a.path}.{os.getpid()}.tmp")]
    # while that process runs, another one records nothing: it starts without the archive
    assert archive().options() == []


def test_a_recording_whose_process_died_is_removed(archive, tmp_path):
    a = archive()
    stale = f"{a.path}.{dead_pid()}.tmp"
    open(stale, "wb").write(b"half an archive")
    assert a.options() == [f"-XX:ArchiveClassesAtExit={a.path}.{os.getpid()}.tmp", "-Xlog:cds*=off"]
    assert not os.path.exists(stale)


def test_an_archive_in_place_is_used(archive):
    a = archive()
    os.makedirs(os.path.dirname(a.path), exist_ok=True)
    open(a.path, "wb").close()
    assert a.options() == [f"-XX:SharedArchiveFile={a.path}", "-Xlog:cds*=off"]
    assert a.recording is None


def test_an_option_naming_a_path_is_one_word_of_sparks_java_options():
    assert spark_cds.option("-XX:SharedArchiveFile=", "/c/a.jsa") == "-XX:SharedArchiveFile=/c/a.jsa"
    assert spark_cds.option("-XX:SharedArchiveFile=", "/my cache/a.jsa") == '"-XX:SharedArchiveFile=/my cache/a.jsa"'
    assert spark_cds.option("-X=", '/a"b\\c') == '"-X=/a\\"b\\\\c"'


def test_executors_get_the_archive_once_it_is_in_place(archive):
    a = archive()
    assert a.for_executors() == []
    os.makedirs(os.path.dirname(a.path), exist_ok=True)
    open(a.path, "wb").close()
    assert a.for_executors() == [f"-XX:SharedArchiveFile={a.path}", "-Xlog:cds*=off"]
    a.path = a.path.replace("spark-driver", "spark 'driver")   # one word for Spark's splitCommandString too
    open(a.path, "wb").close()
    assert a.for_executors() == [f'"-XX:SharedArchiveFile={a.path}"', "-Xlog:cds*=off"]


@pytest.fixture
def clean_class_path(tmp_path, monkeypatch):
    """A Spark configuration directory with nothing in it, and none of the other directories Spark's
    launcher puts on the driver's class path."""
    where = tmp_path / "conf"
    where.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(where))
    for var in ("PYSPARK_SUBMIT_ARGS", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH",
                "SPARK_PREPEND_CLASSES", "SPARK_TESTING", "SPARK_SQL_TESTING"):
        monkeypatch.delenv(var, raising=False)
    return where


def test_no_recording_while_a_directory_with_files_is_on_the_class_path(archive, clean_class_path, tmp_path,
                                                                         monkeypatch):
    """The JDK archives nothing then (and says so on the JVM's stdout at its exit): nothing is claimed."""
    full = tmp_path / "full"
    full.mkdir()
    (full / "core-site.xml").write_text("<configuration/>")
    empty = tmp_path / "empty"
    empty.mkdir()
    blocking = spark_cds.blocking_directory
    assert blocking({}) is None
    assert blocking({"spark.driver.extraClassPath": f"{empty}:{full / 'core-site.xml'}:/nowhere"}) is None
    assert blocking({"spark.driver.extraClassPath": f"{empty}:{full}"}) == str(full)
    for var in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH"):
        monkeypatch.setenv(var, f"{full}")
        assert blocking({}) == str(full), var
        monkeypatch.delenv(var)
    for args in (f"--driver-class-path {full}", f"--driver-class-path={full}",
                 f"--conf spark.driver.extraClassPath={full}", f"--conf=spark.driver.extraClassPath={full}",
                 f"-c spark.driver.extraClassPath={empty}:{full}"):
        monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"{args} pyspark-shell")
        assert blocking({}) == str(full), args
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--conf spark.executor.extraClassPath={full} pyspark-shell")
    assert blocking({}) is None
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    # a Spark build's own classes, put first by the launcher for its developers: only where they are
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("SPARK_TESTING", "1")
    assert blocking({}) is None
    classes = home / "sql" / "core" / "target" / "scala-2.13" / "classes"
    classes.mkdir(parents=True)
    (classes / "A.class").write_bytes(b"")
    assert blocking({}) == str(classes)
    monkeypatch.setenv("SPARK_TESTING", "yes")    # the launcher acts on "1" only
    assert blocking({}) is None
    monkeypatch.delenv("SPARK_TESTING")
    monkeypatch.delenv("SPARK_HOME")
    (clean_class_path / "spark-defaults.conf").write_text(f"spark.driver.extraClassPath {empty}\n")
    assert blocking({}) == str(clean_class_path)     # the configuration directory itself now
    a = archive()
    assert a.path and a.options() == [] and a.recording is None
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


def test_a_configuration_directory_with_files_leaves_a_run_quiet_and_without_archive(tmp_path):
    """A real run with a spark-defaults.conf beside it (as every Spark distribution's conf holds files):
    before, its JVM said "Cannot have non-empty directory in paths" at the run's end, after every run."""
    require(spark_missing() is None, spark_missing() or "")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.ui.showConsoleProgress false\n")
    cache = tmp_path / "cache"
    p = logetl("filter", "--hdfs", "--master", "local[1]", "--input", CORPUS_LOG, "--output", str(tmp_path / "f"),
               env={"LOGETL_CACHE_DIR": str(cache), "SPARK_CONF_DIR": str(conf)})
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == b""
    assert "non-empty directory" not in p.stderr.decode() and "Error occurred" not in p.stderr.decode()
    assert [n for n in (os.listdir(cache) if cache.exists() else []) if ".jsa" in n] == []
    assert parts(tmp_path / "f") == corpus("filter.tsv")


def test_the_executors_get_the_drivers_archive_on_a_cluster_of_this_machine_only(tmp_path, monkeypatch):
    """Which masters' executors start from the archive (SparkEngine._executors_archive): not with
    logetl.jvm.cds=off, not on a master other machines' workers may join, not with a class path of
    their own; whether or not the driver itself uses the archive."""
    from logetl.engines.spark.engine import SparkEngine

    monkeypatch.setenv("LOGETL_CACHE_DIR", str(tmp_path))
    a = spark_cds.ClassArchive({})
    open(a.path, "wb").close()
    use = [f"-XX:SharedArchiveFile={a.path}", "-Xlog:cds*=off"]
    here = "spark://127.0.0.1:7077"
    assert SparkEngine(master=here)._executors_archive(here) == use
    assert SparkEngine(master=here, conf={"spark.driver.extraJavaOptions": "-Dx=1"})._executors_archive(here) == use
    assert SparkEngine(master=here, conf={"logetl.jvm.cds": "off"})._executors_archive(here) == []
    assert SparkEngine(master=here, conf={"spark.executor.extraClassPath": "/x.jar"})._executors_archive(here) == []
    assert SparkEngine(master="spark://10.1.2.3:7077")._executors_archive("spark://10.1.2.3:7077") == []
    os.remove(a.path)
    assert SparkEngine(master=here)._executors_archive(here) == []


def test_a_relative_cache_directory_is_named_absolute(monkeypatch, tmp_path):
    """The executors' JVMs run in directories of their own: a relative path would name nothing there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOGETL_CACHE_DIR", "cache")
    assert spark_cds.cache_dir() == str(tmp_path / "cache")


def test_the_key_follows_the_spark_installation(archive, tmp_path, monkeypatch):
    a = archive()
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "a.jar").write_bytes(b"x")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    one = spark_cds.key({})
    assert one != os.path.basename(a.path)[len("spark-driver-"):-len(".jsa")]
    (jars / "a.jar").write_bytes(b"xy")
    assert spark_cds.key({}) != one
    assert spark_cds.key({"spark.jars": "/x.jar"}) != spark_cds.key({})


def test_the_first_run_records_the_archive_and_the_next_uses_it_with_the_same_results(tmp_path):
    """Three real runs of Branch: without the archive (logetl.jvm.cds=off), the one that records it, the
    one that uses it. Same output bytes; the same stderr apart from the timings; exactly one archive."""
    require(spark_missing() is None, spark_missing() or "")
    cache = tmp_path / "cache"
    env = {"LOGETL_CACHE_DIR": str(cache)}

    def run(name, *extra):
        out = tmp_path / name
        p = logetl("branch", "--hdfs", "--master", "local[2]", *extra, "--input", CORPUS_LOG,
                   "--output1", str(out / "1"), "--output2", str(out / "2"), env=env)
        assert p.returncode == 0, p.stderr.decode()
        assert p.stdout == b""
        # the timings vary from run to run; the JVM's own start-up lines are Spark's, as without the archive
        lines = [line.replace(str(out), "OUT") for line in p.stderr.decode().splitlines()
                 if " s" not in line and "INFO" not in line]
        return parts(out / "1") + parts(out / "2"), lines

    without, err_without = run("off", "--conf", "logetl.jvm.cds=off")
    # (the cache holds logetl's jar, built by that first run: spark_jvm)
    jars = os.listdir(cache)
    assert len(jars) == 1 and jars[0].startswith("logetl-jvm-") and jars[0].endswith(".jar"), jars
    recording, err_recording = run("recording")
    archives = sorted(set(os.listdir(cache)) - set(jars))
    assert len(archives) == 1 and archives[0].startswith("spark-driver-") and archives[0].endswith(".jsa"), archives
    stamp = os.stat(cache / archives[0]).st_mtime_ns
    using, err_using = run("using")
    assert sorted(os.listdir(cache)) == sorted(archives + jars) and os.stat(cache / archives[0]).st_mtime_ns == stamp
    assert recording == using == without and without
    assert err_recording == err_using == err_without
    assert not any("cds" in line.lower() or "[warning]" in line for line in err_using)


def test_a_process_that_ran_no_step_leaves_no_archive(tmp_path):
    require(spark_missing() is None, spark_missing() or "")
    cache = tmp_path / "cache"
    code = ("from logetl.engines.spark.engine import SparkEngine; e = SparkEngine(master='local[1]'); "
            "e.session(); e.shutdown()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300,
                       env={**os.environ, "LOGETL_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr.decode()
    assert [n for n in os.listdir(cache) if n.endswith(".jsa")] == []


def test_a_process_whose_session_another_engine_used_keeps_its_archive(tmp_path):
    """As in a test session: one engine starts the session and keeps it, others run the steps on it."""
    require(spark_missing() is None, spark_missing() or "")
    cache = tmp_path / "cache"
    code = ("import sys; from logetl.engines.spark.engine import SparkEngine; from logetl.job import run_program; "
            "s = SparkEngine(master='local[1]').keep_session(); "
            "run_program('filter', sys.argv[1], {'output': sys.argv[2]}, engine='spark', quiet=True, monitor=False); "
            "s.stop()")
    p = subprocess.run([sys.executable, "-c", code, CORPUS_LOG, str(tmp_path / "out")], capture_output=True,
                       timeout=300, env={**os.environ, "LOGETL_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr.decode()
    assert len([n for n in os.listdir(cache) if n.endswith(".jsa")]) == 1, os.listdir(cache)
    assert [n for n in os.listdir(cache) if n.endswith(".tmp")] == []
