"""Classic queue storage: on-disk formats and engines only, no algorithm of the broker's, no actor.

Modules: `records` (framing with length + CRC, message payload codec), `message` (the record a
queue holds), `queue_index` (one per durable queue: `N.idx` segments), `msg_store` (one per queue
host, persistent + transient: `N.rdq` files, refcounts), `store_gc` (the store's file table and GC
decisions), `paging` (the variable queue: alpha/beta/delta in Q1, Q2, Delta, Q3, Q4, over an
injected backend), `durable_queue` (`DurableBacking`: one queue's bodies in RAM and on disk),
`ready` / `backed` / `spill` (the ready list a queue core takes from: in RAM, over a backing, or in
RAM until paging needs a backing), `host_storage` (one queue host's stores and queue directories:
layout, recovery, opening and deleting queues). All IO goes through `persist.disk.Disk` (RealDisk in
a node, SimDisk or a crash disk in tests), so no module here imports os, time or random, and
tests/test_layering.py checks every one as a pure module.

Who drives it: the queue host (actors/hosts.py serve_queues) opens a `HostStorage` on a RealDisk; the
QueueManager (actors/queue/manager.py) recovers it once the registry names the durable queues and
hands each queue core its ready list; the host's group commit (actors/queue/group_commit.py)
flushes durable queues once per loop turn before their confirms leave; its housekeeping
(actors/queue/housekeeping.py) applies the paging policy's RAM targets (flow/paging.py decides
them), flushes paged non-durable queues and runs the store's GC.
"""
