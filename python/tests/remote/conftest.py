# The loopback servers' session fixtures (see servers.py) for every test in this folder.
from .servers import (  # noqa: F401
    _fault_proxy_session,
    fault_proxy,
    fault_proxy_factory,
    gcs_server,
    http_server,
    s3_server,
)
