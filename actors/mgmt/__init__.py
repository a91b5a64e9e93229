"""The management plugin's equivalent: the HTTP API, the web UI and the Prometheus metrics.

Pure modules (the decisions): counters.py (what channels and queues count), sample.py (the hosts'
answers merged), rates.py (rates over the sample interval), auth.py (who may see and do what),
paths.py (RabbitMQ's URL scheme), shapes.py (JSON shapes), reads.py (GET answers), listing.py
(sort, pagination, filters, columns), memo.py (listing rows kept between requests), rows.py (rows
encoded once), changes.py (requests turned into the node's admin operations), peek.py (publish
and get bodies), metrics.py (Prometheus families, Raft and WAL ones included). Shells:
reporters.py (each host's answer to the node's sampling), collector.py (the node host's sampler),
amqp_client.py (publish and get over AMQP to the node itself), server.py (aiohttp handlers),
launch.py (started by the node host), www/ (the web UI).
"""
