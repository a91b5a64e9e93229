"""warren's actor runtime: ZeroMQ mailboxes, credit flow, Thespian supervision (control only)."""
from actors.runtime.address import Address
from actors.runtime.control import HostSpec, control
from actors.runtime.mailbox import Actor, Runtime
from actors.runtime.node_process import run_node

__all__ = ["Actor", "Address", "HostSpec", "Runtime", "control", "run_node"]
