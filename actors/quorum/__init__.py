"""Quorum queues: the replicated queue machine (rabbit_fifo's design) and its Raft members.

Pure: `machine.QuorumMachine` (apply/snapshot/restore/live_indexes) with its commands, effects and
configuration; `front` (a member's channel protocol onto the machine), `client` (a channel's side:
leader finding and re-sends), `release` (when a member snapshots), `member_table` (the host's
durable list of members), `names`. Shells: `member` (RaftCore + RaftDriver + front as an actor),
`host` (the node's quorum host: one WAL, every member), and the test launchers `launch`, `drive`.
"""
