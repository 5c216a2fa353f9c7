"""The Flink SQL language as text: the sqlglot dialect and the splitting of scripts into located statements."""
