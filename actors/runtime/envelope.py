"""Encoding of one host-to-host batch: a Cap'n Proto `Envelope` (wire/envelope.capnp) + the messages.

A frame is one msgpack array of two: the capnp `Envelope` as bytes (sender, target, message tag and
credit per item) and the array of the items' message field values in item order (use_bin_type=True;
actors/messages says how a typed message becomes a tag and values, and back). `encode` returns
the msgpack buffer itself, handed to ZeroMQ as it is (which copies a frame below its
copy_threshold once more, and sends a larger one without a copy), and msgpack builds the bytes
objects on the way in straight out of the received frame. (Bodies inside capnp Data fields were copied six times per
hop: packb, its buffer growth, the Data field, and twice in `to_bytes`; for 16 KiB messages that
was most of a host's user time.)

Values decode with `raw=False, use_list=False`, so a list sent to another host arrives as a tuple.
Receivers must accept any sequence. Messages between actors of the same host never pass through
here (they get the same Python object). Nothing decoded refers to the frame's memory, so the
caller may release it as soon as `decode` returns.

Headers are remembered. Building a capnp message and reading one back costs ~45 us from Python
whatever it holds, which a batch of thousands of items shares but a lone Publish, Deliver or Settle
pays alone: at 1,000 msg/s, where every message travels in frames of its own, the envelopes were a
fifth of the hosts' CPU. A frame of at most `memo_items_max` items usually repeats a header
already sent (the same actors, kinds and credit), so `encode` keeps the header bytes it built for
each (source, items' senders, targets, classes and credit) and `decode` the items it read for
each header's bytes: one dict lookup instead (frames of one item: 48 -> 9 us encoded and
decoded). The bytes on the wire are the same; each memo holds at most `memo_entries_max` headers,
forgetting its oldest to take a new one (`_remember`), and takes a header only once it has come
`memo_admit_after` times (`_admit`), so churned actors' one-off headers do not fill it. (Grown to
4096 and then cleared, a memo held ~2.4 MiB of mostly dead headers in each host before it
cleared, and the freed blocks stayed in pymalloc's arenas: a host's memory grew over the first
hour of the soak. A flow's headers are few, so 512 is room for all that are live.)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import capnp
import msgpack

from actors.messages import build, ext_hook, fields_of, pack_default

# The frame's layout: [capnp header, item values] with the values as actors/messages encodes them.
# A reader takes its own version and the older ones (0: written before the field existed, the same
# layout) and refuses a newer one as malformed: a layout change is a new version here, while a
# message's appended fields need none (actors/messages).
ENVELOPE_VERSION = 1

_schema = capnp.load(str(Path(__file__).resolve().parents[2] / "wire" / "envelope.capnp"))
Envelope = _schema.Envelope

# capnp's default read limit (64 MiB) would reject the header of a batch of very many items.
traversal_limit_words = 1 << 40

buf_bytes_min = 256 * 1024  # msgpack's own default buffer

memo_items_max = 4  # frames with more items than this build and read their header every time
memo_entries_max = 512
memo_admit_after = 3  # sightings of a header before it is remembered (see `_admit`)

# (sender name, target name, message, credit)
Item = tuple[str, str, Any, int]

_built: dict[tuple, bytes] = {}  # (source, ((sender, target, class, credit), ...)) -> header bytes
_read: dict[bytes, tuple[str, list[tuple[str, str, str, int]]]] = {}  # header bytes -> (source, heads)
_sightings: dict[int, int] = {}  # hash of a header (or its key) not remembered yet -> times seen


def _admit(key: Any) -> bool:
    """Whether a header not remembered yet has now been seen often enough to be. A churned
    connection's, channel's or queue's headers (their names are in them) come a few times and
    never again: remembered at once they filled the memos in every host, ~350 bytes each, over an
    hour's churn (the soak), and were then dropped all at once; a steady flow's come thousands of
    times and are remembered from their third frame."""
    h = hash(key)
    n = _sightings.get(h, 0) + 1
    if n >= memo_admit_after:
        _sightings.pop(h, None)
        return True
    if len(_sightings) >= memo_entries_max:
        _sightings.clear()
    _sightings[h] = n
    return False


def _remember(memo: dict, key: Any, value: Any) -> None:
    """Keep `value` under `key`, forgetting the oldest entry when `memo` is full (dicts keep
    insertion order)."""
    if len(memo) >= memo_entries_max:
        del memo[next(iter(memo))]
    memo[key] = value


def encode(source: str, items: list[Item], size_hint: int = 0) -> memoryview:
    """One frame holding `items` in order: a read-only view that keeps its buffer alive.

    `size_hint` (say, the size of the last frame to the same host) sizes msgpack's buffer up
    front: growing it by doubling copies a batch of large bodies about once more."""
    if len(items) > memo_items_max:
        header, values = _header(source, items)
    else:
        values = [fields_of(msg)[1] for _, _, msg, _ in items]
        key = (source, tuple((sender, target, type(msg), credit) for sender, target, msg, credit in items))
        header = _built.get(key)
        if header is None:
            header = _header(source, items)[0]
            if _admit(key):
                _remember(_built, key, header)
    # a Packer per frame: the frame is its buffer, exported until the pipe has written it
    packer = msgpack.Packer(use_bin_type=True, autoreset=False, default=pack_default,
                            buf_size=max(buf_bytes_min, size_hint + size_hint // 4))
    packer.pack((header, values))
    return packer.getbuffer()


def _header(source: str, items: list[Item]) -> tuple[bytes, list]:
    """The capnp header of `items` and their messages' field values."""
    message = Envelope.new_message(source=source, version=ENVELOPE_VERSION)
    slots = message.init("items", len(items))
    values = []
    for slot, (sender, target, msg, credit) in zip(slots, items):
        tag, fields = fields_of(msg)
        slot.sender = sender
        slot.target = target
        slot.kind = tag
        slot.credit = credit
        values.append(fields)
    return message.to_bytes(), values


_unpack_options: dict[str, Any] = dict(raw=False, use_list=False, ext_hook=ext_hook)


def decode(frame: Any) -> tuple[str, list[Item]]:
    """The source host and the items of one frame (anything with the buffer protocol). A
    malformed frame raises ValueError (a corrupt capnp header, capnp's error, an unknown tag)."""
    unpacked = msgpack.unpackb(frame, **_unpack_options)
    if not (isinstance(unpacked, tuple) and len(unpacked) == 2 and isinstance(unpacked[0], bytes)
            and isinstance(unpacked[1], tuple)):
        raise ValueError("a frame is (envelope header, bodies)")
    header, bodies = unpacked
    # a long batch's header (tens of KB for thousands of items) is neither looked up nor kept
    small = len(bodies) <= memo_items_max
    read = _read.get(header) if small else None
    if read is None:
        read = _read_header(header)
        if small and _admit(header):
            _remember(_read, header, read)
    source, heads = read
    if len(heads) != len(bodies):
        raise ValueError(f"{len(heads)} envelope items but {len(bodies)} bodies")
    try:
        return source, [(sender, target, build(kind, values), credit)
                        for (sender, target, kind, credit), values in zip(heads, bodies)]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"a frame item does not decode to a message: {exc!r}") from exc


def _read_header(header: bytes) -> tuple[str, list[tuple[str, str, str, int]]]:
    # `header` is a fresh bytes object: word-aligned, as capnp wants
    with Envelope.from_bytes(header, traversal_limit_in_words=traversal_limit_words) as message:
        if message.version > ENVELOPE_VERSION:
            raise ValueError(f"envelope version {message.version}: this node reads versions up to {ENVELOPE_VERSION}")
        return message.source, [(item.sender, item.target, item.kind, item.credit) for item in message.items]
