"""The classic queue: its pure core (core.py and what only it uses) and its actor shell (shell.py)."""
