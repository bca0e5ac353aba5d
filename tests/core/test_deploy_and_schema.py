import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.processes import ROOT


def test_check_deploy_with_production_settings_prints_no_warnings():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.production",
           "SECRET_KEY": "a-long-random-production-secret-key-0123456789-abcdefghijklmnop",
           "ALLOWED_HOSTS": "cairn.example.org", "DATABASE_URL": "postgres://cairn:pw@127.0.0.1:5432/cairn",
           "REDIS_URL": "redis://:pw@127.0.0.1:6379/0",  # with passwords: cairn.W001/W002 (test_secrets.py)
           "FORWARDED_ALLOW_IPS": ""}  # uvicorn's list, as Cairn's (cairn.W003)
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_settings_refuse_to_start_without_a_secret_key():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.production"
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "SECRET_KEY" in result.stderr


def test_openapi_schema_is_valid_and_every_operation_is_typed(alice, client_for):
    response = client_for(alice).get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    operations = [(path, method, op) for path, item in schema["paths"].items() for method, op in item.items()]
    assert len(operations) > 30
    for path, method, op in operations:
        success = [code for code in op["responses"] if code.startswith(("2", "3"))]
        assert success, f"{method.upper()} {path} has no success response"
        for code in success:
            if code != "204" and not code.startswith("3"):
                assert op["responses"][code].get("content"), f"{method.upper()} {path} {code} has no body type"
        if method in ("post", "patch") and not path.endswith(("/stop/", "/start/", "/snapshot/", "/promote/", "/rollback/")):  # verbs without a body
            assert op.get("requestBody"), f"{method.upper()} {path} has no request type"
    assert "/api/v1/projects/{project}/training-jobs/{id}/logs/" in schema["paths"]


def test_schema_generation_has_no_warnings():
    result = subprocess.run([sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn",
                             "--file", os.devnull], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_interactive_docs_page(alice, client):
    client.force_login(alice)
    response = client.get("/api/docs/")
    assert response.status_code == 200 and b"swagger" in response.content.lower()


@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_docs_pages_answer_without_a_session_and_say_how_to_sign_in(page, client):
    response = client.get(page)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert "Sign in to read the reference" in html and "/static/drf_spectacular_sidecar/" in html
    assert "cdn.jsdelivr.net" not in html and "fonts.googleapis.com" not in html
    assert client.get("/api/schema/").status_code == 401  # the schema itself stays for signed-in users


def test_dashboard_types_are_generated_from_the_current_schema(tmp_path):
    """frontend/openapi.json is what the dashboard's TypeScript types are built from
    (npm run gen:api). If the API changes, `make api-types` must be run and committed."""
    fresh = tmp_path / "openapi.json"
    result = subprocess.run([sys.executable, "manage.py", "spectacular", "--format", "openapi-json",
                             "--file", str(fresh)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    committed = json.loads((ROOT / "frontend" / "openapi.json").read_text())
    assert json.loads(fresh.read_text()) == committed, "The API schema changed: run `make api-types` and commit it."
