"""Tiny host entries and actors used by the runtime tests (real processes import these)."""
from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import structlog

from actors.runtime import logs
from actors.runtime.address import Address
from actors.runtime.control import OPEN_LISTENERS, HostSpec
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


def failing_host(runtime: Runtime, spec: HostSpec) -> None:
    """Cannot start, ever."""
    raise RuntimeError(f"{spec.name} cannot start: {spec.config['reason']}")


def first_start_exits_host(runtime: Runtime, spec: HostSpec) -> None:
    """Its first process exits before it has started (before any HostStarted); later ones echo."""
    marker = Path(spec.config["data_dir"]) / f"{spec.name}.started-once"
    if not marker.exists():
        marker.touch()
        os._exit(3)
    echo_host(runtime, spec)


async def slow_host(runtime: Runtime, spec: HostSpec) -> None:
    """Takes `delay_s` to start."""
    await asyncio.sleep(float(spec.config["delay_s"]))
    echo_host(runtime, spec)


def listening_host(runtime: Runtime, spec: HostSpec) -> None:
    """Opens a TCP listener on its port when told (OPEN_LISTENERS), as a connection host does."""
    echo_host(runtime, spec)
    answer = runtime.control
    sockets = []

    async def control(op: str, args: dict):
        if op == OPEN_LISTENERS:
            sockets.append(socket.create_server(("127.0.0.1", int(spec.config["port"]))))
            structlog.get_logger("tests").info("test.listener_opened", host=spec.name)
            return {"port": spec.config["port"]}
        return await answer(op, args)
    runtime.control = control


ENTRIES = {"echo": "echo_host", "fail": "failing_host", "exits": "first_start_exits_host", "slow": "slow_host",
           "listen": "listening_host"}


def spec_of(arg: str, data_dir: Path) -> HostSpec:
    """NAME, or NAME:KIND[:VALUE] (KIND one of ENTRIES; VALUE: slow's delay, listen's port)."""
    name, _, rest = arg.partition(":")
    kind, _, value = rest.partition(":")
    entry = f"tests.actors.runtime_hosts:{ENTRIES[kind or 'echo']}"
    config = {"data_dir": str(data_dir), "reason": "told to fail", "delay_s": value or "0", "port": value or "0"}
    return HostSpec(name, entry, config, listens=kind == "listen")


def main() -> None:
    """python -m tests.actors.runtime_hosts DATA_DIR ADMIN_PORT HOST...  (HOST: see spec_of)"""
    data_dir, port, hosts = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    logs.configure("main", data_dir)
    sys.exit(run_node("test", [spec_of(h, data_dir) for h in hosts], {}, port, data_dir))


if __name__ == "__main__":
    main()
