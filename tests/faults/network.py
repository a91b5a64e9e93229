"""A real network for the fault suite: one network namespace per node, joined by a bridge.

Each node `nK` runs in namespace `warren-f<pid>-nK`, whose `eth0` (one end of a veth pair; the
other end is enslaved to the bridge in the root namespace) has 10.213.T.(10+K)/24; the bridge has
10.213.T.1, so clients in the root namespace reach every node through it. T is a subnet no other
interface here uses. A partition is an nftables table in each namespace that drops everything
from and to the addresses that node must not reach: real packets lost on a real link, TCP
retransmitting into the void, nothing the nodes are told.

Namespaces outlive the process that made them, so every name carries the creator's PID, and
`Netns.create` first removes those whose creator has died (a run killed before its clean-up).
Needs root, iproute2's `ip` and nftables' `nft`; `netns_unavailable()` says why not when it cannot,
and the suite falls back to the runtime's fault-injecting transport.
"""
from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

PREFIX = "warren-f"
TABLE = "warren_faults"
SUBNET_OCTET = 213  # 10.213.T.0/24
command_timeout_s = 20.0


def _run(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, input=stdin, capture_output=True, text=True, check=check, timeout=command_timeout_s)


def netns_unavailable() -> str | None:
    """None when namespaces, veths, a bridge and nftables work here; else the reason they do not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing (apt-get install {package})"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        _run("ip", "netns", "add", probe)
        _run("ip", "netns", "exec", probe, "nft", "add", "table", "inet", TABLE)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        return f"cannot make a namespace with an nftables table: {getattr(e, 'stderr', '') or e}".strip()
    finally:
        _run("ip", "netns", "del", probe, check=False)
    return None


def reap_stale() -> None:
    """Remove namespaces, bridges and veths left by fault-suite runs whose process has died."""
    listed = _run("ip", "netns", "list", check=False).stdout.split()
    for name in listed:
        m = re.fullmatch(rf"{PREFIX}(\d+)-\w+", name)
        if m and not _alive(int(m.group(1))):
            _run("ip", "netns", "del", name, check=False)
    for link in re.findall(r"^\d+: (wf(\d+)\w*)[@:]", _run("ip", "-o", "link", "show", check=False).stdout, re.M):
        if not _alive(int(link[1])):
            _run("ip", "link", "del", link[0], check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _free_subnet() -> int:
    used = set(re.findall(rf"inet 10\.{SUBNET_OCTET}\.(\d+)\.", _run("ip", "-o", "addr", "show").stdout))
    for third in range(1, 255):
        if str(third) not in used:
            return third
    raise RuntimeError(f"no free 10.{SUBNET_OCTET}.T.0/24 subnet")


@dataclass
class Netns:
    """The namespaces of one run; `create()` makes them, `destroy()` removes everything it made."""

    names: list[str]
    pid: int = field(default_factory=os.getpid)
    subnet: int = 0
    created: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"wf{self.pid}b"  # interface names are at most 15 characters

    @property
    def client_ip(self) -> str:
        return f"10.{SUBNET_OCTET}.{self.subnet}.1"

    def namespace(self, name: str) -> str:
        return f"{PREFIX}{self.pid}-{name}"

    def ip(self, name: str) -> str:
        return f"10.{SUBNET_OCTET}.{self.subnet}.{10 + self.names.index(name) + 1}"

    def prefix(self, name: str) -> tuple[str, ...]:
        """The command prefix that runs a program inside `name`'s namespace."""
        return ("ip", "netns", "exec", self.namespace(name))

    def create(self) -> Netns:
        reap_stale()
        self.subnet = _free_subnet()
        assert len(self.bridge) <= 15 and ipaddress.ip_address(self.client_ip)
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self.created.append(self.bridge)
        _run("ip", "addr", "add", f"{self.client_ip}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for i, name in enumerate(self.names):
            ns, veth = self.namespace(name), f"wf{self.pid}v{i}"
            _run("ip", "netns", "add", ns)
            self.created.append(ns)
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self.created.append(veth)
            _run("ip", "link", "set", veth, "master", self.bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.ip(name)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run(*self.prefix(name), "nft", "-f", "-", stdin=(
                f"table inet {TABLE} {{\n"
                "  chain input { type filter hook input priority 0; policy accept; }\n"
                "  chain output { type filter hook output priority 0; policy accept; }\n"
                "}\n"))
        return self

    def cut(self, grudge: dict[str, set[str]]) -> None:
        """Each node of `grudge` loses every packet from and to the nodes it names; the others
        (and every node not named) reach everyone. An empty grudge heals the network."""
        for name in self.names:
            away = sorted(self.ip(other) for other in grudge.get(name, ()))
            rules = f"flush table inet {TABLE}\n"
            if away:
                addresses = ", ".join(away)
                rules += (f"add rule inet {TABLE} input ip saddr {{ {addresses} }} drop\n"
                          f"add rule inet {TABLE} output ip daddr {{ {addresses} }} drop\n")
            _run(*self.prefix(name), "nft", "-f", "-", stdin=rules)

    def destroy(self) -> None:
        for made in reversed(self.created):
            if made.startswith(PREFIX):
                _run("ip", "netns", "del", made, check=False)
            else:
                _run("ip", "link", "del", made, check=False)  # a veth may be gone with its namespace already
        self.created.clear()
