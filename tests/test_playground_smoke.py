"""The playground starts and answers (the full app comes with the playground issue)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from playground.app import app


def test_index_answers() -> None:
    with TestClient(app) as client:
        response = client.get("/")
    assert response.status_code == 200
    assert "playground" in response.text


def test_healthz() -> None:
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
