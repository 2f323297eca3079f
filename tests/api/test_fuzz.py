"""Whatever JSON a client sends, the write and read endpoints answer with a {"code", "detail"} error or a
success — never a 500 — and a refused write leaves nothing behind."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.models import Event

pytestmark = pytest.mark.django_db

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "namespace": st.one_of(json_values, st.lists(st.sampled_from(["user", "org", "Bad", "x y", ""]), max_size=3)),
        "kind": json_values,
        "type": st.one_of(json_values, st.sampled_from(["semantic", "episodic"])),
        "fact": st.one_of(json_values, st.fixed_dictionaries({"field": json_values, "value": json_values})),
        "text": json_values,
        "source": st.one_of(json_values, st.fixed_dictionaries({}, optional={"type": json_values,
                                                                             "event_id": json_values})),
        "valid_until": json_values,
        "subject_id": json_values,
        "reference": json_values,
        "evidence": json_values,
    },
)


@pytest.mark.parametrize("path", ["/api/v1/memories", "/api/v1/outcomes", "/api/v1/candidates"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_it_never_answers_500_to_any_json_body(agent, path, body):
    events_before = Event.objects.count()

    response = agent.post(path, body)

    assert response.status_code < 500, response.content
    payload = response.json()
    if response.status_code >= 400:
        assert isinstance(payload["code"], str) and isinstance(payload["detail"], str)
        assert Event.objects.count() == events_before


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.dictionaries(st.sampled_from(["namespace", "kind", "status", "limit", "offset"]),
                              st.text(max_size=12), max_size=5))
def test_listing_never_answers_500_to_any_query(agent, params):
    response = agent.get("/api/v1/memories", params)

    assert response.status_code in (200, 400), response.content
