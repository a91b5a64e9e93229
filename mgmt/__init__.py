"""The management plugin's equivalent: the HTTP API, the web UI and the Prometheus metrics
(RabbitMQ's rabbitmq_management and rabbitmq_prometheus), a layer above actors/: it reads the
statistics the hosts keep and the node's collector samples (actors/stats/, RabbitMQ's management
agent) and asks the node for its admin operations, and nothing below imports it.

Pure modules (the decisions): auth.py (who may see and do what), paths.py (RabbitMQ's URL scheme),
shapes.py (JSON shapes), reads.py (GET answers), listing.py (sort, pagination, filters, columns),
memo.py (listing rows kept between requests), rows.py (rows encoded once), changes.py (requests
turned into the node's admin operations), peek.py (publish and get bodies), metrics.py (Prometheus
families, Raft and WAL ones included). Shells: amqp_client.py (publish and get over AMQP to the
node itself), server.py (aiohttp handlers), launch.py (the node host's entry when a management
port is set), www/ (the web UI, package data).
"""
