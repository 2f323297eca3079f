"""``manage.py evaluate``: the memory system measured as a retrieval-and-write system.

A fixed, versioned scenario suite (``scenarios/*.yaml``) is played against a fresh, isolated set of
tenants through the API surface (in process by default, or a running server with ``--via-api``),
then eight metrics and five adversarial cases are computed from what the read surfaces return.
docs/evaluation.md defines every metric exactly.
"""
