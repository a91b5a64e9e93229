"""The management plugin's equivalent: the HTTP API, the web UI and the Prometheus metrics.

Pure modules (the decisions): counters.py (what channels and queues count), rates.py (rates over
the sample interval), auth.py (who may see and do what), paths.py (RabbitMQ's URL scheme),
shapes.py (JSON shapes), changes.py (requests turned into the node's admin operations), metrics.py
(Prometheus families). Shells: reporters.py (each host's answer to the node's sampling),
collector.py (the node host's sampler), amqp_client.py (publish and get over AMQP to the node
itself), server.py (aiohttp handlers), www/ (the web UI's static files).
"""
