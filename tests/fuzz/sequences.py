"""Frame sequences for protocol fuzzing: valid AMQP after an open connection, then mutated (pure).

A case is drawn from `random.Random(seed)`: a few valid steps (channel.open, declares, binds,
confirm.select, publishes with content and properties, consume, get, acks, qos, tx, heartbeats,
channel.close) on one or two channels, encoded with wire/'s own encoders, then zero or more
mutations: octets flipped, a frame cut short, random octets spliced in, a frame repeated, two
frames swapped, a length field changed. The same seed gives the same octets, so a finding replays
from its seed. Queue and exchange names carry the case's tag, so concurrent cases do not meet.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from wire.frames import HEARTBEAT_FRAME, content_frames_bytes, method_frame
from wire.methods import (BasicAck, BasicConsume, BasicGet, BasicNack, BasicPublish, BasicQos, BasicReject,
                          ChannelClose, ChannelOpen, ConfirmSelect, ExchangeDeclare, QueueBind, QueueDeclare,
                          QueuePurge, TxCommit, TxSelect)
from wire.properties import BasicProperties, encode_content_header

MUTATIONS = ("flip", "cut", "splice", "repeat", "swap", "length")


@dataclass(frozen=True)
class Case:
    seed: int
    frames: tuple[bytes, ...]   # the valid frames, before mutation
    mutations: tuple[str, ...]
    data: bytes                 # what is sent after the handshake


def properties(rng: random.Random, tag: str) -> BasicProperties:
    choices = {
        "content_type": lambda: rng.choice(["text/plain", "application/json", ""]),
        "headers": lambda: rng.choice([{"a": 1}, {"CC": [f"{tag}.q"]}, {"x": {"y": [1.5, None, b"\x00"]}}]),
        "delivery_mode": lambda: rng.choice([1, 2]),
        "priority": lambda: rng.randint(0, 9),
        "correlation_id": lambda: "c" * rng.randint(0, 40),
        "reply_to": lambda: rng.choice(["amq.rabbitmq.reply-to", f"{tag}.r"]),
        "expiration": lambda: rng.choice(["1000", "0", "-1", "x"]),
        "message_id": lambda: tag,
        "user_id": lambda: rng.choice(["guest", "other"]),
    }
    chosen = rng.sample(sorted(choices), rng.randint(0, 4))
    return BasicProperties(**{name: choices[name]() for name in chosen})


def valid_frames(rng: random.Random, tag: str) -> list[bytes]:
    channels = [1] if rng.random() < 0.7 else [1, 2]
    frames = [method_frame(ch, ChannelOpen()) for ch in channels]
    queue = f"{tag}.q"
    for _ in range(rng.randint(1, 6)):
        ch = rng.choice(channels)
        step = rng.choice(["declare", "exchange", "bind", "confirm", "publish", "publish", "consume", "get",
                           "ack", "qos", "tx", "heartbeat", "purge"])
        if step == "declare":
            frames.append(method_frame(ch, QueueDeclare(queue=queue, durable=rng.random() < 0.5,
                                                        auto_delete=True, arguments=rng.choice(
                                                            [{}, {"x-max-length": 5}, {"x-message-ttl": 100}]))))
        elif step == "exchange":
            frames.append(method_frame(ch, ExchangeDeclare(exchange=f"{tag}.x", type=rng.choice(
                ["direct", "fanout", "topic", "headers"]), auto_delete=True)))
        elif step == "bind":
            frames.append(method_frame(ch, QueueBind(queue=queue, exchange=f"{tag}.x", routing_key="#")))
        elif step == "confirm":
            frames.append(method_frame(ch, ConfirmSelect()))
        elif step == "publish":
            body = rng.randbytes(rng.choice([0, 5, 300, 5000]))
            header = encode_content_header(60, len(body), properties(rng, tag))
            method = BasicPublish(exchange=rng.choice(["", f"{tag}.x", "amq.direct"]), routing_key=queue,
                                  mandatory=rng.random() < 0.3)
            frames.append(content_frames_bytes(ch, method, header, body, rng.choice([4096, 131072])))
        elif step == "consume":
            frames.append(method_frame(ch, BasicConsume(queue=queue, consumer_tag=f"{tag}.{ch}",
                                                        no_ack=rng.random() < 0.3)))
        elif step == "get":
            frames.append(method_frame(ch, BasicGet(queue=queue, no_ack=rng.random() < 0.5)))
        elif step == "ack":
            settle = rng.choice([BasicAck(delivery_tag=rng.randint(0, 3), multiple=rng.random() < 0.3),
                                 BasicNack(delivery_tag=rng.randint(0, 3), requeue=rng.random() < 0.5),
                                 BasicReject(delivery_tag=rng.randint(0, 3), requeue=True)])
            frames.append(method_frame(ch, settle))
        elif step == "qos":
            frames.append(method_frame(ch, BasicQos(prefetch_count=rng.randint(0, 10))))
        elif step == "tx":
            frames.append(method_frame(ch, rng.choice([TxSelect(), TxCommit()])))
        elif step == "heartbeat":
            frames.append(HEARTBEAT_FRAME)
        elif step == "purge":
            frames.append(method_frame(ch, QueuePurge(queue=queue)))
    if rng.random() < 0.3:
        frames.append(method_frame(channels[0], ChannelClose(reply_code=200, reply_text="bye")))
    return frames


def mutate(rng: random.Random, frames: list[bytes], kind: str) -> list[bytes]:
    frames = list(frames)
    i = rng.randrange(len(frames))
    frame = bytearray(frames[i])
    if kind == "flip":
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(len(frame))] = rng.randrange(256)
    elif kind == "cut" and len(frame) > 1:
        del frame[rng.randrange(1, len(frame)):]
    elif kind == "splice":
        at = rng.randrange(len(frame) + 1)
        frame[at:at] = rng.randbytes(rng.randint(1, 20))
    elif kind == "repeat":
        frames.insert(i, bytes(frame))
    elif kind == "swap" and len(frames) > 1:
        j = rng.randrange(len(frames))
        frames[i], frames[j] = frames[j], frames[i]
        return frames
    elif kind == "length" and len(frame) >= 7:
        size = struct.unpack_from(">I", frame, 3)[0]
        struct.pack_into(">I", frame, 3, max(0, size + rng.choice([-2, -1, 1, 2, 1 << 20])))
    frames[i] = bytes(frame)
    return frames


def case(seed: int, *, mutation_rate: float = 0.8) -> Case:
    rng = random.Random(seed)
    tag = f"fz{seed}"
    frames = valid_frames(rng, tag)
    mutations: list[str] = []
    mutated = list(frames)
    while rng.random() < mutation_rate and len(mutations) < 3:
        kind = rng.choice(MUTATIONS)
        mutations.append(kind)
        mutated = mutate(rng, mutated, kind)
    return Case(seed, tuple(frames), tuple(mutations), b"".join(mutated))
