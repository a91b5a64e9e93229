"""Exchanges, queues, bindings and routing: the metadata registry as pure cores.

`Registry` (registry.py) is the only entry point most callers need; the other modules are its parts:
texts.py (RabbitMQ's error texts), names.py (name rules), fieldvalues.py (field-table types and
RabbitMQ's equivalence printing), arguments.py (queue-argument validation), topic.py (the topic
trie), headers.py (headers matching), matchers.py (per-exchange binding indexes), records.py.
"""
from metadata.records import BindingRecord, ExchangeRecord, QueueRecord
from metadata.registry import Registry

__all__ = ["Registry", "QueueRecord", "ExchangeRecord", "BindingRecord"]
