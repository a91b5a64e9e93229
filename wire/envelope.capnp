@0xc4e1a9f27d3b5e61;
# The inter-process envelope of warren's actor runtime (actors/runtime/envelope.py).
# One Envelope is one ZeroMQ frame: everything one host sent to another host in one event-loop
# iteration, in send order. The frame is a msgpack array of two (actors/runtime/envelope.py):
#     [Envelope (this capnp message, as bin), [field values of each item's message, in item order]]
# The bodies stay out of capnp Data fields on purpose: setting a Data field copies it, and
# `to_bytes` copies the message twice more, which cost more than everything else for 16 KiB messages.

struct Envelope {
  source @0 :Text;          # sending host name ("conn0", "queue0", "node")
  items @1 :List(Item);
  version @2 :UInt16;       # the frame's layout (actors/runtime/envelope.py); 0 from a node older than the field

  struct Item {
    sender @0 :Text;        # actor name inside the source host
    target @1 :Text;        # actor name inside the destination host
    kind @2 :Text;          # the message tag (actors/messages): its class name
    credit @3 :UInt32;      # credit this item consumed on the sender->target link (0: not flow-controlled)
  }
}
