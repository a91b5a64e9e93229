@0xc4e1a9f27d3b5e61;
# The inter-process envelope of warren's actor runtime (actors/runtime/envelope.py).
# One Envelope is one ZeroMQ frame: everything one host sent to another host in one event-loop
# iteration, in send order. Bodies are msgpack (use_bin_type) inside Data, so the hot path pays for
# a handful of capnp fields per item, not a struct per AMQP message.

struct Envelope {
  source @0 :Text;          # sending host name ("conn0", "queue0", "node")
  items @1 :List(Item);

  struct Item {
    sender @0 :Text;        # actor name inside the source host
    target @1 :Text;        # actor name inside the destination host
    kind @2 :Text;          # message kind; "$credit" is the runtime's own credit grant
    credit @3 :UInt32;      # credit this item consumed on the sender->target link (0: not flow-controlled)
    body @4 :Data;          # msgpack of the body
  }
}
