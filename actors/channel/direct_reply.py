"""Direct reply-to on the channel: the reply consumer, its name, and replies sent and received.

Theory of operation (names in reply_to.py): consuming "amq.rabbitmq.reply-to" (no-ack only, one per
channel) sets the channel's reply consumer, a (consumer tag, key) pair. A default-exchange publish
to "amq.rabbitmq.reply-to.<channel>.<key>" is sent straight to that channel as a DirectReply and
delivered there without a queue, only while the key is still the channel's current one. As in
RabbitMQ 3.10, such a key never counts as a route, so a mandatory publish to it is also returned
(312 NO_ROUTE), and a reply is sent at once even in tx mode (RabbitMQ does it while routing, before
the tx buffer). Declaring the pseudo-queue succeeds; declaring a reply name succeeds while its
consumer exists, as far as this channel can tell: another channel's name is taken to exist if it
decodes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.channel.generated_names import CONSUMER_TAG_PREFIX, new_tag
from actors.channel.lifecycle import OPEN
from actors.channel.publish_checks import REPLY_TO_PREFIX, REPLY_TO_QUEUE
from actors.channel.reply_to import new_key, parse_reply_name, reply_name
from actors.messages.direct_reply import DirectReply
from effects import Send
from metadata import texts
from wire import methods as m
from wire.errors import NOT_ALLOWED, PRECONDITION_FAILED, AmqpError
from wire.frames import content_frames

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore


def declare(ch: ChannelCore, x: m.QueueDeclare) -> None:
    found = x.queue == REPLY_TO_QUEUE
    parsed = None if found else parse_reply_name(x.queue)
    if parsed is not None:
        address, key = parsed
        mine = ch.address is not None and address == str(ch.address)
        found = not mine or (ch.reply_consumer is not None and ch.reply_consumer[1] == key)
    if not found:
        ch.error(texts.not_found("queue", x.queue, ch.vhost), x)
    elif not x.nowait:
        ch.send_method(m.QueueDeclareOk(queue=x.queue, message_count=0, consumer_count=1))


def tag_in_use(ch: ChannelCore, tag: str) -> bool:
    return tag in ch.consumers or (ch.reply_consumer is not None and ch.reply_consumer[0] == tag)


def consume(ch: ChannelCore, x: m.BasicConsume) -> None:
    if tag_in_use(ch, x.consumer_tag):
        ch.error(AmqpError(NOT_ALLOWED, f"attempt to reuse consumer tag '{x.consumer_tag}'", connection=True), x)
    elif not x.no_ack:
        ch.error(AmqpError(PRECONDITION_FAILED, "reply consumer cannot acknowledge"), x)
    elif ch.reply_consumer is not None:
        ch.error(AmqpError(PRECONDITION_FAILED, "reply consumer already set"), x)
    else:
        tag = x.consumer_tag or new_tag(ch.rng, CONSUMER_TAG_PREFIX)
        ch.reply_consumer = (tag, new_key(ch.rng))
        if not x.nowait:
            ch.send_method(m.BasicConsumeOk(consumer_tag=tag))


def cancel(ch: ChannelCore, x: m.BasicCancel) -> bool:
    """Cancel the reply consumer if `x` names it; say whether it did."""
    if ch.reply_consumer is None or ch.reply_consumer[0] != x.consumer_tag:
        return False
    ch.reply_consumer = None
    if not x.nowait:
        ch.send_method(m.BasicCancelOk(consumer_tag=x.consumer_tag))
    return True


def my_reply_name(ch: ChannelCore) -> str | None:
    if ch.reply_consumer is None or ch.address is None:
        return None
    return reply_name(str(ch.address), ch.reply_consumer[1])


def deliver(ch: ChannelCore, reply: DirectReply) -> None:
    """A reply sent to our reply name: deliver it if the name is still ours (else drop it)."""
    if ch.state != OPEN or ch.reply_consumer is None or ch.reply_consumer[1] != reply.key:
        return
    ch.delivery_tag += 1
    frame = m.BasicDeliver(consumer_tag=ch.reply_consumer[0], delivery_tag=ch.delivery_tag,
                           redelivered=False, exchange=reply.exchange, routing_key=reply.routing_key)
    ch.out.frames.extend(content_frames(ch.number, frame, reply.header, reply.body, ch.frame_max))


def send(ch: ChannelCore, keys: list[str], x: m.BasicPublish, header: bytes, body: bytes) -> None:
    """Send a publish to every reply name among `keys` (its routing key, CC and BCC)."""
    for key in dict.fromkeys(keys):
        parsed = parse_reply_name(key) if key.startswith(REPLY_TO_PREFIX) else None
        if parsed is None:
            continue
        address, reply_key = parsed
        try:
            to = ch.parse_address(address)
        except ValueError:
            continue  # not a name we issued: nobody to deliver to, as RabbitMQ
        ch.out.emit(Send(to, DirectReply(reply_key, x.exchange, key, header, body)))
