"""warren's actor runtime: socket mailboxes, credit flow, Thespian supervision (control only).

Import what you need from its modules (address, mailbox, envelope, control, host, supervisor,
node_process); this package file imports nothing, so the modules depend on each other in one
direction only.
"""
