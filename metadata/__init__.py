"""The metadata registry as a pure state machine: vhosts, users, permissions, policies, exchanges,
queues, bindings, and routing.

`Registry` (registry.py) is the entry point: it applies the machine's commands (commands.py) and
the change records they produce (changes.py). Its parts, by concern: topology.py (exchanges, queues,
bindings), access.py (users, permissions), policies.py, routing.py; and what they use: texts.py
(RabbitMQ's error texts), names.py (name rules), fieldvalues.py (field-table types and RabbitMQ's
equivalence printing), arguments.py (queue-argument validation), topic.py (the topic trie),
headers.py (headers matching), matchers.py (per-exchange binding indexes), records.py,
definitions.py (the definitions file's format), passwords.py, admin_errors.py.
"""
from metadata.records import BindingRecord, ExchangeRecord, QueueRecord
from metadata.registry import Registry

__all__ = ["Registry", "QueueRecord", "ExchangeRecord", "BindingRecord"]
