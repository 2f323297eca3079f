"""Thin wrapper: the knowledge benchmark is ``bench/retrieval.py --profile knowledge`` (same flags).

    .venv/bin/python bench/knowledge.py --chunks 50000 --domains 20 --queries 200
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[1:1] = ["--profile", "knowledge"]
    main()
