"""locust scenarios for AMQP brokers (warren, RabbitMQ): see bench/locust/locustfile.py."""
