"""Quorum queues: the replicated queue machine (rabbit_fifo's design) and, later, its Raft member.

Pure modules only so far: `machine.QuorumMachine` (apply/snapshot/restore/live_indexes), its
command vocabulary (`commands`), its effects and replies (`effects`) and its configuration
(`config`). The member shell that runs it inside a Raft group is wired in separately.
"""
