"""Per-key rate limits: past the rate, 429 {"code": "throttled"} with Retry-After; other keys unaffected; the
counters live in PostgreSQL, out of reach of a deletion's cache purge. (That two server nodes share one
limit is shown in test_multinode.py.)"""

from __future__ import annotations

import pytest
from django.core.cache import cache

from api.models import ThrottleCounter
from api.throttling import AgentKeyThrottle, AnonymousThrottle

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories"


@pytest.fixture
def three_a_minute(monkeypatch):
    rates = {"agent_key": "3/min", "anonymous": "2/min"}
    monkeypatch.setattr(AgentKeyThrottle, "THROTTLE_RATES", rates)
    monkeypatch.setattr(AnonymousThrottle, "THROTTLE_RATES", rates)
    ThrottleCounter.objects.all().delete()


def test_a_key_past_its_rate_gets_429_with_retry_after(three_a_minute, agent):
    assert [agent.get(URL).status_code for _ in range(3)] == [200, 200, 200]

    response = agent.get(URL)

    assert response.status_code == 429
    assert response.json()["code"] == "throttled" and response.json()["detail"]
    assert 1 <= int(response["Retry-After"]) <= 60


def test_another_key_keeps_its_own_budget(three_a_minute, agent, outsider):
    for _ in range(4):
        agent.get(URL)

    assert outsider.get(URL).status_code == 200


def test_health_is_never_throttled(three_a_minute, client):
    assert {client.get("/api/v1/health").status_code for _ in range(5)} == {200}


def test_guessing_keys_is_limited_per_address(three_a_minute, client):
    guesses = [client.get(URL, HTTP_AUTHORIZATION=f"Bearer egk_guess{n}") for n in range(3)]

    assert [r.status_code for r in guesses] == [401, 401, 429]
    assert guesses[2].json()["code"] == "throttled" and int(guesses[2]["Retry-After"]) >= 1


def test_the_contract_is_served_without_a_limit(three_a_minute, client):
    assert {client.get(path).status_code for path in ["/api/v1/schema"] * 3 + ["/api/v1/docs/"] * 3} == {200}


def test_clearing_the_result_cache_does_not_reset_the_limits(three_a_minute, agent):
    for _ in range(3):
        agent.get(URL)

    cache.clear()  # what a deletion does to the "default" cache on every run

    assert agent.get(URL).status_code == 429


def test_the_window_slides(three_a_minute, agent, monkeypatch):
    now = [1_000_000.0 * 60]  # the start of a window
    monkeypatch.setattr(AgentKeyThrottle, "clock", lambda self: now[0])
    for _ in range(3):
        assert agent.get(URL).status_code == 200
    now[0] += 60  # a new window: the previous one still counts in full at its start
    assert agent.get(URL).status_code == 429
    now[0] += 30  # half of it has slid out: 3 * 0.5 = 1.5 counted, room for one more
    assert agent.get(URL).status_code == 200
    assert agent.get(URL).status_code == 429


def test_one_request_costs_one_statement(three_a_minute, agent, django_assert_num_queries):
    from django.test import RequestFactory
    from rest_framework.request import Request

    from api.authentication import AgentKeyAuthentication

    request = Request(RequestFactory().get(URL, HTTP_AUTHORIZATION=f"Bearer {agent.key}"),
                      authenticators=[AgentKeyAuthentication()])
    request.user  # noqa: B018 - authenticate first, outside the count
    with django_assert_num_queries(1):
        assert AgentKeyThrottle().allow_request(request, None)


def test_it_does_not_take_a_clients_x_forwarded_for_as_its_address(three_a_minute, client):
    guesses = [client.get(URL, HTTP_AUTHORIZATION=f"Bearer egk_guess{n}", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
               for n in range(30)]

    assert [r.status_code for r in guesses][:3] == [401, 401, 429]
    assert {r.status_code for r in guesses[2:]} == {429}


def test_each_address_keeps_its_own_budget(three_a_minute, client):
    first = [client.get(URL, HTTP_AUTHORIZATION="Bearer egk_guess", REMOTE_ADDR="198.51.100.1") for _ in range(3)]
    other = client.get(URL, HTTP_AUTHORIZATION="Bearer egk_guess", REMOTE_ADDR="198.51.100.2")

    assert [r.status_code for r in first] == [401, 401, 429]
    assert other.status_code == 401


def test_a_trusted_proxy_names_the_client(three_a_minute, client, settings):
    settings.ENGRAM_TRUSTED_PROXIES = ["10.0.0.0/8"]

    def through_proxy(forwarded_for: str) -> int:
        return client.get(URL, HTTP_AUTHORIZATION="Bearer egk_guess", REMOTE_ADDR="10.1.2.3",
                          HTTP_X_FORWARDED_FOR=forwarded_for).status_code

    # Two clients behind the proxy: each has its own budget; a client's own header on the left is not read.
    assert [through_proxy("198.51.100.7") for _ in range(3)] == [401, 401, 429]
    assert through_proxy("198.51.100.8") == 401
    assert through_proxy("192.0.2.99, 198.51.100.7") == 429
    assert through_proxy("198.51.100.7, 10.9.9.9") == 429  # a second trusted hop is skipped


def test_an_untrusted_peer_cannot_claim_to_be_a_proxy(three_a_minute, client, settings):
    settings.ENGRAM_TRUSTED_PROXIES = ["10.0.0.0/8"]

    statuses = [client.get(URL, HTTP_AUTHORIZATION="Bearer egk_guess", REMOTE_ADDR="198.51.100.9",
                           HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code for n in range(3)]

    assert statuses == [401, 401, 429]


def test_a_bad_trusted_proxies_setting_stops_the_start(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from config.env import env_networks

    monkeypatch.setenv("ENGRAM_TRUSTED_PROXIES", "10.0.0.0/8, proxy.example")

    with pytest.raises(ImproperlyConfigured, match="ENGRAM_TRUSTED_PROXIES"):
        env_networks("ENGRAM_TRUSTED_PROXIES")
    monkeypatch.setenv("ENGRAM_TRUSTED_PROXIES", "10.0.0.0/8, ::1")
    assert env_networks("ENGRAM_TRUSTED_PROXIES") == ["10.0.0.0/8", "::1/128"]
