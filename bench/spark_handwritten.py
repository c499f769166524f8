"""Hand-written PySpark jobs doing the same work as logetl's Branch and Join (same output bytes), as a
user would write them without logetl: the speed reference for the Spark engine.

    python bench/spark_handwritten.py branch IN OUT1 OUT2
    python bench/spark_handwritten.py join IN OUT CHECKPOINT_DIR
    python bench/spark_handwritten.py session      (starts the session and stops it: its start-up time)

The master is local[*], or HANDWRITTEN_MASTER (bench/spark.py's standalone cluster); further settings
come as spark-submit's, in PYSPARK_SUBMIT_ARGS.

Same line contract (lines split on \\n only, invalid UTF-8 and TAB/CR in fields left out), built-in
functions only. No counting of malformed lines, no trap, no restartable state: just the records.
"""
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

P = r'(?s)^([^ ]*) \S+ \S+ \[([\w:/]+\s[+\-]\d{4})\] "(.+?)" (\d{3}) ([^ ]*).*$'
FIELDS = ["ip", "time", "request", "response", "size"]


def parse(spark, path):
    line = F.regexp_replace("value", r"\r\z", "")
    df = spark.read.option("lineSep", "\n").text(path).withColumn("order", F.monotonically_increasing_id())
    # validity is checked on the raw bytes: a regexp function's result has invalid bytes replaced
    df = df.filter(F.expr("is_valid_utf8(value)")).select(line.alias("line"), "order").filter(F.col("line").rlike(P))
    df = df.select(*[F.regexp_extract("line", P, i + 1).alias(f) for i, f in enumerate(FIELDS)], "order")
    no_tab_cr = ~F.concat_ws("", *FIELDS).rlike("[\t\r]")
    return df.filter((F.col("size") != "-") & no_tab_cr)


def main():
    spark = (SparkSession.builder.appName("handwritten").master(os.environ.get("HANDWRITTEN_MASTER", "local[*]"))
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.hadoop.fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    job = sys.argv[1]
    if job == "session":
        pass
    elif job == "branch":
        _, _, inp, o1, o2 = sys.argv
        out = parse(spark, inp).select(F.concat_ws("\t", *FIELDS)).cache()
        out.write.text(o1)
        out.write.text(o2)
    elif job == "join":
        _, _, inp, out, ckpt = sys.argv
        parsed = parse(spark, inp)
        images = parsed.filter(F.col("request").startswith("GET /images/")).select("ip").distinct()
        scored = (parsed.withColumnRenamed("ip", "userip")
                  .withColumn("score", (F.crc32(F.col("userip").cast("binary")) % 100).cast("long"))
                  .filter(F.col("score") >= 60))
        scored.write.parquet(ckpt)
        scored = spark.read.parquet(ckpt)
        joined = scored.join(F.broadcast(images), scored.userip == images.ip)
        cols = ["ip", "userip", "time", "request", "response", "size", "score"]
        (joined.repartition(1).sortWithinPartitions(F.col("score").desc(), F.col("order").asc())
         .select(F.concat_ws("\t", *[F.col(c).cast("string") for c in cols])).write.text(out))
    spark.stop()


if __name__ == "__main__":
    main()
