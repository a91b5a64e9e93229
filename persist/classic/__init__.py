"""Classic queue persistence: the queue index, the shared message store, and paging.

Modules: `records` (framing with length + CRC, message payload codec), `queue_index` (one per
durable queue: `N.idx` segments), `msg_store` (one per node, persistent + transient: `N.rdq` files,
refcounts), `store_gc` (the store's file table and GC decisions, pure), `paging` (the variable queue:
alpha/beta/delta in Q1, Q2, Delta, Q3, Q4, pure over an injected backend), `durable_queue`
(`DurableBacking`, the seam below). All IO goes through `persist.disk.Disk` (RealDisk in the node,
any Disk in tests), so no module here imports os, time or random.

THE SEAM for the classic queue actor (phase two; nothing in actors/queue uses this yet):
  node start      store = MsgStore(disk, "msg_store_persistent"); store.open()
                  transient = MsgStore(disk, "msg_store_transient", transient=True); transient.open()
                  for each durable queue: backing = DurableBacking(disk, f"queues/{dir}", store,
                      transient, lazy=<x-queue-mode == "lazy" or queue-mode policy>)
                      r = backing.recover()   # the queue numbers new msg_ids from r.next_msg_id
                  store.finish_recovery()     # after EVERY queue recovered (refcounts re-declared)
  the queue core  replaces its ReadyList with the backing: publish(messages, guids=None) on enqueue
                  (guids: the channel's per-publish id, so a fan-out body is stored once);
                  fetch(n) where it took from the ready list; ack(ids) on ack/discard;
                  requeue(ids) on reject/nack/channel down; purge() -> count; delete().
                  It keeps consumers, credit and the unacked map as today; msg_ids ARE seq ids.
  confirms        Confirmed effects move from "at enqueue" to "after flush()": the shell calls
                  flush() once per batch (and on a short timer, e.g. every 5 ms while anything is
                  unconfirmed) and confirms exactly the msg_ids it returns. Never confirm before.
  memory          the node's resource monitor sets targets: backing.set_ram_target(n, bytes) when
                  memory use passes vm_memory_high_watermark_paging_ratio x the watermark;
                  set_lazy(True/False) on a queue-mode policy change.
  GC              the store owner (the msg-store actor) calls store.collect_garbage() after syncs
                  or on a timer; summary() feeds `warrenctl` (files, live/garbage bytes, GC runs).
  inspection      backing.stats(): ready, unacked, ram_messages, ram_bytes, ram_index_entries,
                  disk_only_messages (list_queues' messages_ram / message_bytes_ram / ...).
  clean stop      every backing.close(), THEN store.close() and transient.close(): the store's
                  saved refcounts are only trusted when all queues stopped cleanly too.
Non-durable queues may use DurableBacking(durable=False) for paging only: all messages are
transient and its index directory is wiped at recover().
"""
