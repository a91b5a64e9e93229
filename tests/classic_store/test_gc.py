"""GC through DurableBacking: after most messages are acked, the disk use falls back."""
from persist.classic.durable_queue import DurableBacking
from persist.classic.msg_store import MsgStore
from persist.disk import RealDisk
from wire.properties import BasicProperties, encode_content_header

PERSISTENT = encode_content_header(60, 0, BasicProperties(delivery_mode=2))


def disk_bytes(disk, directory):
    return sum(disk.size(f"{directory}/{n}") for n in disk.listdir(directory))


def test_acking_most_messages_shrinks_the_store_and_the_index(tmp_path):
    disk = RealDisk(str(tmp_path), sync_method="none")
    store = MsgStore(disk, "ps", file_size_limit=64 * 1024)
    tstore = MsgStore(disk, "ts", transient=True)
    store.open()
    tstore.open()
    q1 = DurableBacking(disk, "q1", store, tstore, segment_entries=64)
    q2 = DurableBacking(disk, "q2", store, tstore, segment_entries=64)
    for q in (q1, q2):
        q.recover()
    store.finish_recovery()
    body = b"b" * 5000  # above the embedding threshold: goes to the store
    msgs = [(i, False, "", "", PERSISTENT, body) for i in range(400)]
    guids = [b"shared%d" % i for i in range(400)]
    q1.publish(msgs, guids)
    q2.publish(msgs[:100], guids[:100])  # the first 100 are routed to both queues
    q1.flush()
    q2.flush()
    full_store, full_index = disk_bytes(disk, "ps"), disk_bytes(disk, "q1")
    assert store.summary().messages == 400  # stored once each
    assert full_store < 400 * 5200

    # q1 keeps every tenth message below 200 and acks the rest; q2 still holds the first 100
    got = q1.fetch(400)
    kept = list(range(0, 200, 10))
    q1.ack([m[0] for m in got if m[0] not in kept])
    q1.requeue(kept)
    q1.flush()
    assert store.collect_garbage() > 0
    s = store.summary()
    assert s.files_deleted >= 1  # files above 200 hold only garbage
    assert s.gc_runs >= 1  # files between 100 and 200 keep a live tenth: merged pairwise
    assert s.messages == 100 + 10  # q2's 100 (shared with q1) + q1's tenths from 100 to 190
    after = disk_bytes(disk, "ps")
    assert after == s.disk_bytes
    assert after < full_store * 0.5
    assert disk_bytes(disk, "q1") < full_index
    # what is left still reads back, from both queues
    assert [m[0] for m in q1.fetch(400)] == kept
    assert [m[5] for m in q2.fetch(100)] == [body] * 100
    disk.close()
