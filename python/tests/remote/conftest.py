# The loopback servers' session fixtures (see servers.py) for every test in this folder, and
# `s3` / `gcs`: the server's credentials (or the emulator's host) in the environment and a fresh
# key prefix per test.
import uuid

import pytest

from .servers import (  # noqa: F401
    _fault_proxy_session,
    fault_proxy,
    fault_proxy_factory,
    gcs_server,
    http_server,
    s3_server,
)


@pytest.fixture
def s3(s3_server, monkeypatch):  # noqa: F811 (the fixture s3_server, imported above)
    for k, v in s3_server.env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    s3_server.prefix = f"t-{uuid.uuid4().hex[:8]}"
    return s3_server


@pytest.fixture
def gcs(gcs_server, monkeypatch):  # noqa: F811 (the fixture gcs_server, imported above)
    # The emulator, not whatever GCS credentials the environment holds.
    for k in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN", "GCS_ENDPOINT_URL",
              "GCS_HMAC_ACCESS_KEY_ID", "GCS_HMAC_SECRET"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.endpoint)
    gcs_server.prefix = f"t-{uuid.uuid4().hex[:8]}"
    return gcs_server
