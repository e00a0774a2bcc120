"""Key-value stores for the rendezvous, as torch's launcher does: a TCP store served by rank 0 on
MASTER_ADDR:MASTER_PORT, or a file store in a directory every rank can see. Every call that waits
has a deadline and raises DistributedError when it passes; nothing here blocks forever.

Used to agree on the world (every rank checks in; a missing or duplicate rank is named in the error)
and to hand NCCL's unique id from rank 0 to the others when there is no MPI.
"""
from __future__ import annotations

import fcntl
import os
import socket
import socketserver
import struct
import threading
import time

from ..errors import DistributedError

_HDR = struct.Struct("!BIQ")        # command, key length, value length
_RSP = struct.Struct("!BQ")         # status (1 found / 0 missing), payload length
_POLL = 0.01


class Store:
    """set(key, bytes), get(key, timeout) waiting for the key, add(key, n) -> new counter value."""
    timeout = 300.0

    def get(self, key, timeout=None):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            v = self.try_get(key)
            if v is not None:
                return v
            if time.monotonic() > deadline:
                raise DistributedError(f"store: key {key!r} did not appear within "
                                       f"{self.timeout if timeout is None else timeout:g} s")
            time.sleep(_POLL)

    def close(self):
        pass


# -- TCP ------------------------------------------------------------------------------------------
def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("store connection closed")
        buf += chunk
    return bytes(buf)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        data, lock = self.server.data, self.server.lock
        try:
            while True:
                cmd, klen, vlen = _HDR.unpack(_recv_exact(self.request, _HDR.size))
                key = _recv_exact(self.request, klen).decode()
                val = _recv_exact(self.request, vlen) if vlen else b""
                with lock:
                    if cmd == ord("S"):
                        data[key] = val
                        out = (1, b"")
                    elif cmd == ord("G"):
                        out = (1, data[key]) if key in data else (0, b"")
                    elif cmd == ord("A"):
                        n = int(data.get(key, b"0")) + int(val)
                        data[key] = str(n).encode()
                        out = (1, data[key])
                    else:
                        return
                self.request.sendall(_RSP.pack(out[0], len(out[1])) + out[1])
        except (ConnectionError, OSError):
            return


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class TCPStore(Store):
    """is_master: serve the store from this process (in a daemon thread) and connect to it too."""

    def __init__(self, host, port, is_master, timeout=300.0):
        self.timeout, self.host, self.port = float(timeout), host, int(port)
        self._server = None
        if is_master:
            try:
                self._server = _Server((host if host not in ("localhost",) else "127.0.0.1",
                                        self.port), _Handler)
            except OSError as e:
                raise DistributedError(f"rank 0 cannot serve the store on {host}:{port} ({e}); "
                                       f"pick a free MASTER_PORT") from None
            self._server.data, self._server.lock = {}, threading.Lock()
            self.port = self._server.server_address[1]
            threading.Thread(target=self._server.serve_forever, daemon=True,
                             name="numr-store").start()
        self._sock = self._connect()
        self._lock = threading.Lock()

    def _connect(self):
        deadline = time.monotonic() + self.timeout
        last = None
        while time.monotonic() < deadline:
            try:
                s = socket.create_connection((self.host, self.port), timeout=self.timeout)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError as e:
                last = e
                time.sleep(0.05)
        raise DistributedError(f"could not reach the store of rank 0 at {self.host}:{self.port} "
                               f"within {self.timeout:g} s ({last}): is rank 0 running, and are "
                               f"MASTER_ADDR/MASTER_PORT the same on every rank?")

    def _call(self, cmd, key, val=b""):
        k = key.encode()
        with self._lock:
            try:
                self._sock.sendall(_HDR.pack(ord(cmd), len(k), len(val)) + k + val)
                found, n = _RSP.unpack(_recv_exact(self._sock, _RSP.size))
                payload = _recv_exact(self._sock, n) if n else b""
            except (ConnectionError, OSError) as e:
                raise DistributedError(f"lost the store at {self.host}:{self.port} ({e}): rank 0 "
                                       f"has probably exited or died") from None
        return payload if found else None

    def set(self, key, value: bytes):
        self._call("S", key, bytes(value))

    def try_get(self, key):
        return self._call("G", key)

    def add(self, key, n=1):
        return int(self._call("A", key, str(int(n)).encode()))

    def close(self):
        try:
            self._sock.close()
        except OSError:
            pass
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# -- file -----------------------------------------------------------------------------------------
class FileStore(Store):
    """One file per key in `path` (a directory on a file system every rank sees)."""

    def __init__(self, path, timeout=300.0):
        self.path, self.timeout = path, float(timeout)
        os.makedirs(path, exist_ok=True)

    def _file(self, key):
        return os.path.join(self.path, key.replace("/", "%"))

    def set(self, key, value: bytes):
        tmp = f"{self._file(key)}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(bytes(value))
        os.replace(tmp, self._file(key))

    def try_get(self, key):
        try:
            with open(self._file(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def add(self, key, n=1):
        with open(os.path.join(self.path, ".lock"), "a+") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            try:
                v = int(self.try_get(key) or b"0") + int(n)
                self.set(key, str(v).encode())
                return v
            finally:
                fcntl.flock(lk, fcntl.LOCK_UN)


def make_store(init_method, env, timeout):
    """init_method: "env://" (MASTER_ADDR/MASTER_PORT), "tcp://host:port" or "file:///dir"."""
    init_method = init_method or "env://"
    if init_method.startswith("file://"):
        return FileStore(init_method[len("file://"):], timeout)
    if init_method.startswith("tcp://"):
        host, _, port = init_method[len("tcp://"):].rpartition(":")
        if not host or not port.isdigit():
            raise DistributedError(f"init_method {init_method!r}: expected tcp://HOST:PORT")
        return TCPStore(host, int(port), env.rank == 0, timeout)
    if init_method == "env://":
        if not env.master_addr or not env.master_port:
            raise DistributedError(
                f"rank {env.rank} of {env.world_size}: MASTER_ADDR and MASTER_PORT must be set "
                f"(the address where rank 0 serves the rendezvous store), or pass "
                f"init_method='tcp://HOST:PORT' or 'file:///shared/dir'")
        return TCPStore(env.master_addr, env.master_port, env.rank == 0, timeout)
    raise DistributedError(f"init_method {init_method!r}: expected env://, tcp://HOST:PORT or "
                           f"file:///DIR")


def rendezvous(store, rank, world_size, timeout, tag="world"):
    """Every rank checks in; returns once all `world_size` ranks did. Names the missing ranks on a
    timeout (a rank that died, or fewer processes launched than WORLD_SIZE) and refuses a rank id
    taken twice (more processes launched than WORLD_SIZE reuse ids)."""
    if store.add(f"{tag}/claim/{rank}", 1) > 1:
        raise DistributedError(f"rank {rank} joined the rendezvous twice: two processes were given "
                               f"the same RANK (more processes launched than WORLD_SIZE="
                               f"{world_size}?)")
    store.set(f"{tag}/rank/{rank}", f"{socket.gethostname()}:{os.getpid()}".encode())
    joined = store.add(f"{tag}/joined", 1)
    deadline = time.monotonic() + timeout
    while joined < world_size:
        if time.monotonic() > deadline:
            missing = [r for r in range(world_size) if store.try_get(f"{tag}/rank/{r}") is None]
            raise DistributedError(
                f"rank {rank}: only {joined} of WORLD_SIZE={world_size} ranks joined within "
                f"{timeout:g} s; missing ranks {missing}. Were fewer processes launched than "
                f"WORLD_SIZE, or did one die at start-up?")
        time.sleep(_POLL)
        joined = store.add(f"{tag}/joined", 0)
    if joined > world_size:
        raise DistributedError(f"rank {rank}: {joined} processes joined a world of size "
                               f"{world_size}")


def store_barrier(store, rank, world_size, timeout, tag):
    """Returns when all ranks reached it; names who did not on a timeout."""
    store.set(f"{tag}/{rank}", b"1")
    n = store.add(tag, 1)
    deadline = time.monotonic() + timeout
    while n < world_size:
        if time.monotonic() > deadline:
            missing = [r for r in range(world_size) if store.try_get(f"{tag}/{r}") is None]
            raise DistributedError(f"rank {rank}: barrier {tag!r} timed out after {timeout:g} s; "
                                   f"ranks {missing} never reached it")
        time.sleep(_POLL)
        n = store.add(tag, 0)
