"""Which function handles each AMQP method on a channel.

Theory of operation: one table from method class to handler, each a function of (channel core,
command) in the module of its concern. A method a channel does not take (connection.*, or one
warren does not implement) is a connection error, 540 NOT_IMPLEMENTED, as RabbitMQ answers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from actors.channel import (
    basic_get, confirm_mode, consuming, lifecycle, publishing, settling, topology, transactions,
)
from wire import methods as m
from wire.errors import NOT_IMPLEMENTED, AmqpError
from wire.inbound import Command

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore

HANDLERS: dict[type, Callable[[ChannelCore, Command], None]] = {
    m.ChannelClose: lifecycle.channel_close,
    m.ChannelFlow: lifecycle.channel_flow,
    m.ChannelOpen: lifecycle.channel_open,
    m.ExchangeDeclare: topology.exchange_declare,
    m.ExchangeDelete: topology.exchange_delete,
    m.ExchangeBind: topology.exchange_bind,
    m.ExchangeUnbind: topology.exchange_unbind,
    m.QueueDeclare: topology.queue_declare,
    m.QueueDelete: topology.queue_delete,
    m.QueueBind: topology.queue_bind,
    m.QueueUnbind: topology.queue_unbind,
    m.QueuePurge: topology.queue_purge,
    m.BasicQos: consuming.basic_qos,
    m.BasicConsume: consuming.basic_consume,
    m.BasicCancel: consuming.basic_cancel,
    m.BasicGet: basic_get.basic_get,
    m.BasicAck: settling.basic_ack,
    m.BasicNack: settling.basic_nack,
    m.BasicReject: settling.basic_reject,
    m.BasicRecover: settling.basic_recover,
    m.BasicRecoverAsync: settling.basic_recover,
    m.BasicPublish: publishing.basic_publish,
    m.ConfirmSelect: confirm_mode.confirm_select,
    m.TxSelect: transactions.tx_select,
    m.TxCommit: transactions.tx_commit,
    m.TxRollback: transactions.tx_rollback,
}


def dispatch(ch: ChannelCore, cmd: Command) -> None:
    method = cmd.method
    handler = HANDLERS.get(type(method))
    if handler is None:
        ch.error(AmqpError(NOT_IMPLEMENTED, f"{method.NAME} not supported on a channel", connection=True), method)
        return
    handler(ch, cmd)
