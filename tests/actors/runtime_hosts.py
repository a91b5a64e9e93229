"""Tiny host entries and actors used by the runtime tests (real processes import these)."""
from __future__ import annotations

import sys
from pathlib import Path

from actors.runtime.address import Address
from actors.runtime.control import HostSpec
from actors.runtime.mailbox import Runtime
from actors.runtime.node_process import run_node
from tests.actors.messages import Note


class Echo:
    """Answers every message with Note("echo", body) to its sender."""

    def __init__(self, runtime: Runtime, me: Address) -> None:
        self.runtime, self.me = runtime, me

    def receive(self, sender: Address, msg: Note) -> None:
        self.runtime.send(sender, Note("echo", msg.body), sender=self.me)


def echo_host(runtime: Runtime, spec: HostSpec) -> None:
    echo = Echo(runtime, Address(runtime.host, "echo"))
    runtime.spawn("echo", echo)

    async def control(op: str, args: dict):
        if op == "send_echo":  # ask another host's echo actor and report the round trip
            import asyncio
            got = asyncio.get_running_loop().create_future()

            class Probe:
                def receive(self, sender, msg):
                    got.set_result([str(sender), msg.kind, list(msg.body)])
            runtime.spawn("probe", Probe())
            runtime.send(Address(args["host"], "echo"), Note("ping", [1, 2]), sender=Address(runtime.host, "probe"))
            try:
                return await asyncio.wait_for(got, 5)
            finally:
                runtime.remove("probe")
        if op == "pid":
            import os
            return os.getpid()
        return {"error": op}
    runtime.control = control


def main() -> None:
    """python -m tests.actors.runtime_hosts DATA_DIR ADMIN_PORT HOST..."""
    data_dir, port, hosts = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    specs = [HostSpec(h, "tests.actors.runtime_hosts:echo_host", {}) for h in hosts]
    run_node("test", specs, {}, port, data_dir)


if __name__ == "__main__":
    main()
