"""``python -m mutune.services.cli``: the ``mutune`` command."""
from __future__ import annotations

from mutune.services.cli import main

if __name__ == "__main__":
    main()
