"""Remote storage from Python: credentials resolved by botocore handed to the native client.

The native client reads the AWS environment variables and ~/.aws files itself. botocore adds
what only it resolves (instance roles, SSO, web identity, credential processes); when it is
installed and the environment names no key, its credentials are passed down once per process.
"""
from __future__ import annotations

import os

from recordflow import _core

_handed = False


def prepare(path: str) -> None:
    """Called before recordflow opens an s3:// URL from Python."""
    global _handed
    if _handed or not path.startswith("s3://") or os.environ.get("AWS_ACCESS_KEY_ID"):
        return
    _handed = True
    try:
        import botocore.session
    except ImportError:
        return
    try:
        credentials = botocore.session.get_session().get_credentials()
    except Exception:  # a broken profile: the native resolver reports what it finds
        return
    if credentials is None:
        return
    frozen = credentials.get_frozen_credentials()
    if frozen.access_key:
        _core.set_s3_credentials(frozen.access_key, frozen.secret_key, frozen.token or "")
