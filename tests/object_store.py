"""A real S3-compatible server for tests: moto's server (PyPI ``moto[server]``, test extra) as
its own process on 127.0.0.1 and a free port, plus a fresh bucket per test.

Credentials are handed to headwater as storage options (never through this process's
environment), so the tests prove that options reach Spark's Python workers.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

ACCESS_KEY = "hwtestaccess"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def moto_binary() -> str | None:
    beside = Path(sys.executable).with_name("moto_server")
    return str(beside) if beside.exists() else shutil.which("moto_server")


class MotoServer:
    """One ``moto_server`` process; state is in memory and dies with it."""

    def __init__(self, binary: str, log: Path | None = None) -> None:
        self.binary = binary
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen | None = None
        self.secret = f"hw-secret-{uuid.uuid4().hex}"  # moto accepts any key pair

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [self.binary, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("moto_server did not answer within 30 s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def options(self) -> dict[str, str]:
        """delta-rs storage options for this server."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_REGION": REGION, "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ALLOW_HTTP": "true"}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=self.secret, region_name=REGION)

    def bucket(self) -> str:
        """A new, empty bucket; returns its ``s3://`` URI."""
        name = f"hw-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def keys(self, uri: str) -> list[str]:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        pages = self.client().get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def read(self, uri: str) -> bytes:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()


def use_credentials(server: MotoServer) -> None:
    """Register the server's options in this process (as ``[storage]`` in headwater.toml does)."""
    from headwater.conf import storage

    storage.set_defaults(server.options())
