"""The statistics the actors keep and the sampling of them, RabbitMQ's management agent: what
the management API (mgmt/) and `warrenctl list_queues` read.

Pure modules: counters.py (what channels and queues count), deltas.py (which queues had inputs
since a collector last asked), sample.py (the hosts' answers merged), rates.py (rates over the
sample interval). Shells: reporters.py (each host's answer to the node's sampling), collector.py
(the node host's sampler).
"""
