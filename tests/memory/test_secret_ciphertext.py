"""Ciphertext is not a secret: a Fernet token (how the OpenAI Agents SDK's EncryptedSession stores items)
passes the secret scan even when its random base64 happens to look like a token, while the same text in
the clear, or a string that only resembles a Fernet token, is still refused."""

from __future__ import annotations

import base64
import json
import os

from cryptography.fernet import Fernet

from memory.policy.secrets import is_ciphertext, scan_payload

GITHUB_LIKE = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"[:36]


def _token_showing(text: str) -> str:
    """A structurally valid Fernet token whose base64 contains ``text`` (a multiple of 4 characters), the
    way a random envelope now and then does."""
    token = Fernet(Fernet.generate_key()).encrypt(b"x" * 100).decode()
    start = 48  # inside the ciphertext, on a 4-character boundary
    return token[:start] + text + token[start + len(text):]


def test_a_fernet_token_that_looks_like_a_github_token_is_not_refused() -> None:
    token = _token_showing(GITHUB_LIKE)
    assert GITHUB_LIKE in token and is_ciphertext(token)
    assert [f.kind for f in scan_payload({"payload": token[:-1]})] == ["github_token"]  # what the scan would say
    assert scan_payload({"item": {"__enc__": 1, "v": 1, "kid": "hkdf-v1", "payload": token}}) == []
    assert [f.kind for f in scan_payload({"text": f"my token is {GITHUB_LIKE}"})] == ["github_token"]


def test_only_the_fernet_structure_is_exempt() -> None:
    token = _token_showing(GITHUB_LIKE)
    raw = base64.urlsafe_b64decode(token)
    not_fernet = [
        token[:-4],  # length no longer 57 + 16n bytes
        base64.urlsafe_b64encode(b"\x81" + raw[1:]).decode(),  # wrong version byte
        "gAAAAA" + GITHUB_LIKE,  # too short
        token + " and more",  # not one token
    ]
    for text in not_fernet:
        assert not is_ciphertext(text)
    assert scan_payload({"payload": "gAAAAA" + GITHUB_LIKE}) != []


def test_session_envelopes_pass_the_scan() -> None:
    fernet = Fernet(base64.urlsafe_b64encode(os.urandom(32)))
    for n in range(300):
        item = {"role": "user", "content": f"message {n}: my password is hunter{n}"}  # secrets inside are sealed
        envelope = {"__enc__": 1, "v": 1, "kid": "hkdf-v1", "payload": fernet.encrypt(json.dumps(item).encode())
                    .decode()}
        assert scan_payload({"item": envelope}) == []
