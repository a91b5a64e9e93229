"""A stream's log: chunks (chunk.py) in segment files with a sparse index, retention by segment (log.py)."""
