"""Starts a real `leasehold serve` for the tests: the binary in LEASEHOLD_BIN,
or one built from this repository with go build."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request
from typing import Callable

from leasehold import Client

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def leasehold_bin() -> str:
    b = os.environ.get("LEASEHOLD_BIN")
    if b:
        return b
    out = os.path.join(tempfile.gettempdir(), "leasehold-py-test", "leasehold")
    if not os.path.exists(out):
        env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/local/go/bin")
        subprocess.run(["go", "build", "-o", out, "./cmd/leasehold"], cwd=REPO, env=env, check=True)
    os.environ["LEASEHOLD_BIN"] = out
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """A one-node cluster; stop() kills it and removes its data."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="leasehold-py-")
        for attempt in range(3):
            api, raft = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
            self.url = f"http://{api}"
            self.proc = subprocess.Popen([leasehold_bin(), "serve", "--data-dir", os.path.join(self.dir, f"d{attempt}"),
                                          "--api-addr", api, "--raft-addr", raft],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(self.url + "/readyz", timeout=1) as r:
                        if r.status == 200:
                            return
                except OSError:
                    time.sleep(0.05)
            self.proc.kill()
            err = self.proc.stderr.read().decode() if self.proc.stderr else ""
            if "address already in use" not in err:
                raise RuntimeError(f"leasehold serve did not get ready: {err}")
        raise RuntimeError("leasehold serve could not bind")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def eventually(what: str, timeout: float, f: Callable[[], bool]) -> None:
    """Polls f until it is true, failing after timeout seconds."""
    end = time.monotonic() + timeout
    while not f():
        if time.monotonic() > end:
            raise AssertionError(f"still not true after {timeout}s: {what}")
        time.sleep(0.01)


class NodeTestCase(unittest.TestCase):
    """Tests sharing one node (self.node) and a client of it (self.c)."""

    node: Node
    c: Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.node = Node()
        cls.c = Client(endpoints=[cls.node.url])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.c.close()
        cls.node.stop()
