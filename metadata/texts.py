"""RabbitMQ 3.10's reply texts for metadata operations, in one place.

Theory of operation: each builder returns an `AmqpError` whose detail is byte-for-byte what
RabbitMQ sends (checked against the oracle with pika; tests/metadata/test_texts.py holds the
oracle's answers). Resource names print as rabbit_misc:rs/1 does: ``<kind> '<name>' in vhost '<vh>'``.
Nothing here decides when an error applies; registry.py and arguments.py do.
"""
from __future__ import annotations

from wire.errors import (
    ACCESS_REFUSED, COMMAND_INVALID, INTERNAL_ERROR, NOT_FOUND, PRECONDITION_FAILED, RESOURCE_LOCKED, AmqpError,
)


def resource(kind: str, name: str, vhost: str) -> str:
    """rabbit_misc:rs/1."""
    return f"{kind} '{name}' in vhost '{vhost}'"


def not_found(kind: str, name: str, vhost: str) -> AmqpError:
    return AmqpError(NOT_FOUND, f"no {resource(kind, name, vhost)}")


def reserved_prefix(kind: str, name: str) -> AmqpError:
    return AmqpError(ACCESS_REFUSED, f"{kind} name '{name}' contains reserved prefix 'amq.*'")


def default_exchange() -> AmqpError:
    return AmqpError(ACCESS_REFUSED, "operation not permitted on the default exchange")


def unknown_exchange_type(type_name: str) -> AmqpError:
    # A connection error in RabbitMQ: 503 is a hard code.
    return AmqpError(COMMAND_INVALID, f"unknown exchange type '{type_name}'")


def system_exchange_deletion(name: str, vhost: str) -> AmqpError:
    return AmqpError(ACCESS_REFUSED, f"deletion of system exchange '{name}' in vhost '{vhost}' not allowed")


def exchange_in_use(name: str, vhost: str) -> AmqpError:
    return AmqpError(PRECONDITION_FAILED, f"{resource('exchange', name, vhost)} in use")


def publish_to_internal(name: str, vhost: str) -> AmqpError:
    return AmqpError(ACCESS_REFUSED, f"cannot publish to internal {resource('exchange', name, vhost)}")


def inequivalent(kind: str, name: str, vhost: str, key: str, received: str, current: str) -> AmqpError:
    """`received`/`current` are already formatted (fieldvalues.describe)."""
    return AmqpError(
        PRECONDITION_FAILED,
        f"inequivalent arg '{key}' for {resource(kind, name, vhost)}: "
        f"received {received} but current is {current}",
    )


def resource_locked(name: str, vhost: str) -> AmqpError:
    return AmqpError(
        RESOURCE_LOCKED,
        f"cannot obtain exclusive access to locked {resource('queue', name, vhost)}. It could be "
        "originally declared on another connection or the exclusive property value does not match "
        "that of the original declaration.",
    )


def invalid_arg(name: str, vhost: str, key: str, reason: str) -> AmqpError:
    """`reason` is the Erlang term RabbitMQ prints, e.g. ``{value_negative,-1}``."""
    return AmqpError(PRECONDITION_FAILED, f"invalid arg '{key}' for {resource('queue', name, vhost)}: {reason}")


def invalid_arg_for_queue_type(name: str, vhost: str, key: str, type_module: str) -> AmqpError:
    return AmqpError(
        PRECONDITION_FAILED,
        f"invalid arg '{key}' for {resource('queue', name, vhost)} of queue type {type_module}",
    )


def invalid_arg_type(kind: str, name: str, vhost: str, key: str, type_name: str) -> AmqpError:
    return AmqpError(
        PRECONDITION_FAILED, f"invalid type '{type_name}' for arg '{key}' in {resource(kind, name, vhost)}"
    )


def invalid_property(name: str, vhost: str, prop: str) -> AmqpError:
    return AmqpError(PRECONDITION_FAILED, f"invalid property '{prop}' for {resource('queue', name, vhost)}")


def invalid_x_match_value(value: str) -> AmqpError:
    return AmqpError(
        PRECONDITION_FAILED,
        f'Invalid x-match field value <<"{value}">>; expected all, any, all-with-x, or any-with-x',
    )


def invalid_x_match_type(type_name: str, value: str) -> AmqpError:
    return AmqpError(
        PRECONDITION_FAILED, f"Invalid x-match field type {type_name} (value {value}); expected longstr"
    )


# -- the metadata store's time-outs and absent homes (RabbitMQ 4.0, rabbit_channel / rabbit_amqqueue) ---

def declare_timeout(kind: str, name: str, vhost: str) -> AmqpError:
    return AmqpError(INTERNAL_ERROR, f"failed to declare {resource(kind, name, vhost)} because the operation timed out")


def queue_declare_timeout(name: str, vhost: str, node: str) -> AmqpError:
    return AmqpError(INTERNAL_ERROR, f"Could not declare {resource('queue', name, vhost)} on node '{node}' because "
                                     "the metadata store operation timed out")


def queue_delete_timeout() -> AmqpError:
    return AmqpError(INTERNAL_ERROR, "The operation to delete the queue from the metadata store timed out")


def exchange_delete_timeout(name: str, vhost: str) -> AmqpError:
    return AmqpError(INTERNAL_ERROR, f"failed to delete {resource('exchange', name, vhost)} due to a timeout")


def queue_operation_timeout(name: str, vhost: str) -> AmqpError:
    """A queue whose process did not come back in time (rabbit_amqqueue:priv_absent, timeout)."""
    return AmqpError(NOT_FOUND, f"failed to perform operation on {resource('queue', name, vhost)} due to timeout")


def home_node_down(node: str, name: str, vhost: str) -> AmqpError:
    """A queue whose home node is down or unreachable (rabbit_amqqueue:priv_absent, nodedown)."""
    return AmqpError(NOT_FOUND, f"home node '{node}' of durable {resource('queue', name, vhost)} is down or inaccessible")
