"""logetl: batch ETL for web-server access logs."""
__version__ = "0.1.0"
