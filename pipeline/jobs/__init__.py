"""Example Spark jobs over the `amqp` data source: queue_to_parquet (streaming, per-minute aggregates),
publish_dataframe (batch, a file's rows into an exchange) and bench_report (a bench run's logs, flow
samples and locust CSVs into a report with plots). Each runs as `python -m pipeline.jobs.NAME --help`."""
