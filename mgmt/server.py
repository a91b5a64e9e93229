"""The management HTTP server (aiohttp) and the Prometheus endpoint, on the node host's loop.

Thin handlers: a request is routed on its raw path (paths.py: `%2F` is the default vhost, so the
path must not be decoded before it is split), authenticated (auth.py), then
- a GET is answered from the registry and the latest sample (reads.py, shapes.py); the rows of
  long listings are kept between requests (memo.py) and made a slice at a time, the loop running
  in between, so listing 10,000 queues does not stop the node host;
- a change is planned (changes.py) and run as the node core's admin operation, in the node's
  serial order, like warrenctl's;
- publish and get go over AMQP to the node's own listener as the HTTP user (amqp_client.py).
The web UI's files (www/) are served at `/`. The Prometheus endpoint reads the latest sample
(metrics.py names the families) and writes the text through a prometheus_client custom
collector, on a thread.

Listening on 127.0.0.1 by default (`management.tcp.ip`), as RabbitMQ's guidance for loopback; the
same API over HTTPS on `management.ssl.port` with `management.ssl.*`'s certificate and client
certificate checks (actors/reader/tls.py makes the context, as for AMQPS).
"""
from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator
from urllib.parse import parse_qsl

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, UnknownMetricFamily

from mgmt import auth, changes, metrics, paths, peek, reads, rows
from mgmt.memo import RowMemo
from mgmt.amqp_client import BrokerError, Session, properties, props_from_json, props_to_json
from mgmt.shapes import View
from actors.reader import tls

log = structlog.get_logger("warren.mgmt")
WWW = Path(__file__).with_name("www")
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class Management:
    """What the handlers need: the node actor (registry, admin path), the collector, the node's facts."""

    def __init__(self, node: Any, collector: Any, *, node_name: str, amqp_port: int, listeners: list[dict],
                 cluster: Callable[[], dict] | None = None) -> None:
        self.node = node
        self.cluster = cluster
        self.collector = collector
        self.node_name = node_name
        self.amqp_port = amqp_port
        self.listeners = listeners
        self.runners: list[web.AppRunner] = []
        self.servers: list[asyncio.AbstractServer] = []  # the HTTPS listener
        self.memo = RowMemo()
        self.http_logins = {"succeeded": 0, "failed": 0}  # rabbit_core_metrics' http auth attempts

    def view(self) -> View:
        c = self.collector
        nodes = {self.node_name: True}
        if self.cluster is not None:
            status = self.cluster()
            running = set(status["running"])
            nodes = {name: name in running for name in status["members"]}
        return View(self.node.core.registry, c.sample, c.rates.frozen(), self.node_name,
                    facts={**c.facts, "http_logins": dict(self.http_logins)}, memo=self.memo, nodes=nodes)

    # ---------------------------------------------------------------- servers
    async def start(self, ip: str, api_port: int, prometheus_port: int,
                    https: tuple[str, int, ssl.SSLContext] | None = None) -> None:
        """`https`: (ip, port, context) of the HTTPS listener, beside the HTTP one or alone."""
        if api_port or https is not None:
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_route("*", "/api/{tail:.*}", self.api)
            app.router.add_get("/", self.index)
            app.router.add_static("/www/", WWW)
            runner = await self._serve(app, ip, api_port) if api_port else None
            if https is not None:
                if runner is None:
                    runner = web.AppRunner(app, access_log=None)
                    await runner.setup()
                    self.runners.append(runner)
                loop = asyncio.get_running_loop()  # TLS with its alerts (tls.py), around aiohttp's protocol
                self.servers.append(await loop.create_server(tls.tls_protocol(loop, runner.server, https[2]), https[0],
                                                             https[1], reuse_address=True))
        if prometheus_port:
            app = web.Application()
            app.router.add_get("/metrics", self.scrape)
            app.router.add_get("/metrics/per-object", self.scrape)
            await self._serve(app, ip, prometheus_port)
        log.info("management.started", ip=ip, api_port=api_port, prometheus_port=prometheus_port,
                 https_port=https[1] if https is not None else 0)

    async def _serve(self, app: web.Application, ip: str, port: int) -> web.AppRunner:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, ip, port, reuse_address=True).start()
        self.runners.append(runner)
        return runner

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        for runner in self.runners:
            await runner.cleanup()

    # ---------------------------------------------------------------- handlers
    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(WWW / "index.html")

    async def api(self, request: web.Request) -> web.StreamResponse:
        raw = request.raw_path
        found = paths.match(raw)
        if found is None:
            return _json(changes.Answer(404, changes.NOT_FOUND))
        route, args = found
        caller = auth.login(self.node.core.registry, request.headers.get("Authorization"))
        if auth.credentials(request.headers.get("Authorization")) is not None:  # an attempt, as RabbitMQ counts
            self.http_logins["failed" if isinstance(caller, auth.Refused) and caller.status == 401
                             and caller.body == auth.LOGIN_FAILED else "succeeded"] += 1
        if isinstance(caller, auth.Refused):
            if caller.body is None:
                return web.Response(status=401, headers={"WWW-Authenticate": auth.REALM})
            return web.json_response(caller.body, status=caller.status)
        query = dict(parse_qsl(raw.partition("?")[2]))
        if request.method == "GET":
            view = self.view()
            for _ in reads.prepare(view, route, args):
                await asyncio.sleep(0)  # long listings are made a slice at a time: the node goes on
            return _json(reads.answer(view, caller, route, args, query, self.listeners))
        body = await _body(request)
        if route == "exchange_publish" and request.method == "POST":
            return _json(await self._by_amqp(caller, args, peek.parse_publish(body), self._publish))
        if route == "queue_get" and request.method == "POST":
            return _json(await self._by_amqp(caller, args, peek.parse_get(body), self._get))
        if route not in changes.CHANGE_ROUTES:
            return _json(changes.Answer(405, {"error": "Method Not Allowed", "reason": "Method Not Allowed"}))
        plan = changes.plan(self.node.core.registry, caller, route, args, request.method,
                            {} if body is None else body, query)
        if isinstance(plan, changes.Answer):
            return _json(plan)
        answer = changes.outcome(plan, await self.node.admin(plan.op, plan.args))
        response = _json(answer)
        if plan.location and answer.status == 201:
            response.headers["Location"] = plan.location
        return response

    async def _by_amqp(self, caller: auth.Caller, args: dict, parsed: tuple | changes.Answer,
                       act: Callable[..., Awaitable[changes.Answer]]) -> changes.Answer:
        """Publish and get: a vhost the caller may not manage is RabbitMQ's 401 before a body's
        400; else `act(caller, args, *parsed)`."""
        if not auth.may_manage_vhost(self.node.core.registry, caller, args["vhost"]):
            return changes.Answer(401, changes.ACCESS)
        if isinstance(parsed, changes.Answer):
            return parsed
        return await act(caller, args, *parsed)

    async def _publish(self, caller: auth.Caller, args: dict, routing_key: str, props: dict,
                       payload: bytes) -> changes.Answer:
        exchange = "" if args["name"] == "amq.default" else args["name"]
        return await self._over_amqp(caller, args["vhost"], lambda session: session.publish(
            exchange, routing_key, props_from_json(props), payload), lambda routed: {"routed": routed})

    async def _get(self, caller: auth.Caller, args: dict, count: int, ackmode: str, encoding: str,
                   truncate: int | None) -> changes.Answer:
        return await self._over_amqp(caller, args["vhost"], lambda session: session.get(args["name"], count, ackmode),
                                     lambda got: [peek.get_row(ok.exchange, ok.routing_key, ok.redelivered,
                                                               ok.message_count, props_to_json(properties(header)),
                                                               payload, encoding, truncate)
                                                  for ok, header, payload in got])

    async def _over_amqp(self, caller: auth.Caller, vhost: str, work: Callable[[Session], Awaitable[Any]],
                         shape: Callable[[Any], Any]) -> changes.Answer:
        """`work` on a connection to this node as the caller; a broker error is RabbitMQ's 400."""
        try:
            amqp_ip = self.listeners[0]["ip_address"]  # the node's own AMQP listener (listeners.tcp.default)
            session = await Session.open(self.amqp_port, caller.name, caller.password, vhost, host=amqp_ip)
            try:
                result = await work(session)
            finally:
                await session.close()
        except BrokerError as e:
            return changes.bad_request(str(e))
        return changes.Answer(200, shape(result))

    async def scrape(self, request: web.Request) -> web.Response:
        """The families are read on the loop (from the registry and the sample, which the loop
        changes); the text, the costly part with many queues, is written on a thread: it is
        Python, so the loop still runs between the interpreter's switches."""
        families = metrics.families(self.view(), request.path.endswith("/per-object"))
        return web.Response(body=await asyncio.to_thread(_exposition, families),
                            headers={"Content-Type": PROMETHEUS_TEXT})


_FAMILY_CLASSES = {metrics.COUNTER: CounterMetricFamily, metrics.GAUGE: GaugeMetricFamily,
                   metrics.UNTYPED: UnknownMetricFamily}


def _exposition(families: list[metrics.Family]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)


class _Families:
    """prometheus_client's custom collector over metrics.families."""

    def __init__(self, families: list[metrics.Family]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        for name, kind, help_, samples in self.families:
            labels = list(samples[0][0]) if samples else []
            cls = _FAMILY_CLASSES[kind]
            family = cls(metrics.prometheus_name(name, kind), help_, labels=labels)
            for label_values, value in samples:
                family.add_metric([str(label_values[k]) for k in labels], value)
            yield family


async def _body(request: web.Request) -> Any:
    if not request.can_read_body:
        return None
    try:
        return json.loads(await request.read() or b"null")
    except ValueError:
        return "not json"


def _json(answer: changes.Answer) -> web.Response:
    if answer.body is None:
        return web.Response(status=answer.status)
    return web.Response(body=rows.encode(answer.body), status=answer.status, content_type="application/json")
