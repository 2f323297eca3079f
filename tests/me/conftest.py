from __future__ import annotations

import pytest

from memory.identity.services import user_create


@pytest.fixture
def alice(tenant):
    """A person linked to subject usr_owner (the `agent` fixture's subject)."""
    return user_create(tenant=tenant, username="alice", password="alice-pass-123", subject_external_id="usr_owner")


@pytest.fixture
def bob(tenant):
    """Another person, linked to usr_outsider."""
    return user_create(tenant=tenant, username="bob", password="bob-pass-123", subject_external_id="usr_outsider")


@pytest.fixture
def rita(tenant):
    """A reviewer of the tenant with no subject of her own."""
    return user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)
