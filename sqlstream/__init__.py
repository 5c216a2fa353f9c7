"""sqlstream: a streaming SQL engine in Python in the line of Apache Flink's SQL layer."""

__version__ = "0.1.0"
