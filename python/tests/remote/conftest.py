# The loopback servers' session fixtures (see servers.py) for every test in this folder, and
# `s3`: the S3 server's credentials in the environment and a fresh key prefix per test.
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
