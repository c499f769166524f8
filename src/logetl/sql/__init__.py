"""SQL over access logs: one dialect (DuckDB's, ``dialect``), run by DuckDB on the local engine and
translated to Spark SQL on Spark."""
