"""`warrenctl stream_status`: a stream's members and its log, as `rabbitmq-streams stream_status` shows them.

The node asks the stream's actor (on its home host) for its status and answers one row per member:
role, node, the offsets (the next one to be written, the committed one, the first one kept), how
many readers it has and how many segment files. A single-node stream has one member, its writer.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.messages.node import StreamStatus
from actors.node.steps import Ask, Op
from actors.placement import node_of, queue_address
from metadata import stream
from metadata.admin_errors import EX_UNAVAILABLE, AdminError, no_vhost
from wire.errors import NOT_FOUND, AmqpError

if TYPE_CHECKING:
    from actors.node.core import NodeCore

COLUMNS = ("role", "node", "offset", "committed_offset", "first_offset", "readers", "segments")
_NOPROC = AmqpError(NOT_FOUND, "noproc")


def stream_status(core: NodeCore, a: dict) -> Op:
    vhost, name = a.get("vhost", "/"), a["name"]
    if not core.registry.vhost_exists(vhost):
        return no_vhost(vhost)
    rec = core.registry.queue(vhost, name)
    if rec is None:
        return AdminError("not_found", EX_UNAVAILABLE)
    if not stream.is_stream(rec.arguments):
        return AdminError("not_a_stream", EX_UNAVAILABLE)
    reply = yield Ask(queue_address(rec.home, vhost, name), StreamStatus, _NOPROC)
    if not reply.ok:
        return {"rows": [{"role": "noproc", "node": node_of(rec.home), **{c: "" for c in COLUMNS[2:]}}],
                "columns": list(COLUMNS)}
    return {"rows": [{"role": "writer", "node": node_of(rec.home), **reply.value}], "columns": list(COLUMNS)}


ADMIN_OPS = {"stream_status": stream_status}
