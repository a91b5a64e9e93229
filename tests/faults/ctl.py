"""`python -m tests.faults.ctl ADMIN_PORT HOST OP [ARGS_JSON]`: one control ask of a node, its answer
as one JSON line on stdout. The fault suite runs it inside a node's network namespace, where the
node's Thespian admin listens on the namespace's loopback."""
from __future__ import annotations

import json
import sys

from actors.runtime.client import control


def main(argv: list[str]) -> int:
    port, host, op, *rest = argv
    args = json.loads(rest[0]) if rest else {}
    try:
        print(json.dumps({"ok": control(int(port), host, op, args)}))
    except (ConnectionError, TimeoutError, RuntimeError) as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
