"""Helpers of the fetch tests: a loopback HTTP server with Range support and fault injection,
small archives in the real TuSimple layout, and a small tmpfs for full-disk tests."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# ------------------------------------------------------------------ archives in the TuSimple layout

TRAIN_LABELS = ("label_data_0313.json", "label_data_0531.json", "label_data_0601.json")


def build_tusimple_tree(out: Path, frames: int = 8, seed: int = 5) -> Path:
    """A small TuSimple root as the official archives unpack: ``clips/0313-1/<n>/20.jpg`` ...,
    the three ``label_data_*.json``, ``test_tasks_0627.json`` (test frames without lanes) and
    ``test_label.json`` (test frames under ``clips/0530/``)."""
    from lanenb_trainer.data.synth import TEST_FILE, TRAIN_FILE, synthesize

    scratch = out.parent / (out.name + ".synth")
    synthesize(scratch, frames, seed=seed, width=320, height=180, test_fraction=0.0, progress=False)
    lines = [json.loads(ln) for ln in (scratch / TRAIN_FILE).read_text().splitlines() if ln.strip()]
    assert not (scratch / TEST_FILE).exists()
    n_test = max(1, frames // 4)
    train, test = lines[:-n_test], lines[-n_test:]
    out.mkdir(parents=True)
    groups: dict[str, list[dict]] = {name: [] for name in TRAIN_LABELS}
    for i, rec in enumerate(train):
        name = TRAIN_LABELS[i % 3]
        raw = f"clips/{('0313-1', '0531', '0601')[i % 3]}/{1000 + i}/20.jpg"
        _move(scratch / rec["raw_file"], out / raw)
        groups[name].append({**rec, "raw_file": raw})
    for name, recs in groups.items():
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    tests = []
    for i, rec in enumerate(test):
        raw = f"clips/0530/{2000 + i}/20.jpg"
        _move(scratch / rec["raw_file"], out / raw)
        tests.append({**rec, "raw_file": raw})
    (out / "test_label.json").write_text("".join(json.dumps(r) + "\n" for r in tests))
    (out / "test_tasks_0627.json").write_text(
        "".join(json.dumps({"lanes": [], "h_samples": r["h_samples"], "raw_file": r["raw_file"]}) + "\n"
                for r in tests))
    shutil.rmtree(scratch)
    return out


def _move(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(src, dst)


def zip_tree(root: Path, names: list[str], *, wrap: str | None = None) -> bytes:
    """Zip ``names`` (files or folders under ``root``), optionally under one top folder."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in names:
            path = root / name
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for f in files:
                arc = f.relative_to(root).as_posix()
                zf.write(f, f"{wrap}/{arc}" if wrap else arc)
    return buf.getvalue()


def tusimple_archives(tree: Path, *, wrap_train: bool = False) -> dict[str, bytes]:
    """The three official files built from ``tree``: train_set.zip, test_set.zip, test_label.json."""
    return {
        "train_set.zip": zip_tree(tree, ["clips/0313-1", "clips/0531", "clips/0601", *TRAIN_LABELS],
                                  wrap="train_set" if wrap_train else None),
        "test_set.zip": zip_tree(tree, ["clips/0530", "test_tasks_0627.json"]),
        "test_label.json": (tree / "test_label.json").read_bytes(),
    }


def malicious_zip(kind: str) -> bytes:
    """A zip with one hostile member after a harmless one: ``dotdot``, ``absolute``, ``symlink``
    (pointing outside), ``device`` (a character device entry)."""
    import stat

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("clips/ok.txt", "harmless")
        if kind == "dotdot":
            zf.writestr("clips/../../escaped.txt", "pwned")
        elif kind == "absolute":
            zf.writestr("/tmp/lanenb-absolute-escape.txt", "pwned")
        elif kind in ("symlink", "device"):
            info = zipfile.ZipInfo("clips/link" if kind == "symlink" else "clips/dev")
            mode = (stat.S_IFLNK | 0o777) if kind == "symlink" else (stat.S_IFCHR | 0o600)
            info.external_attr = mode << 16
            zf.writestr(info, "../../../etc" if kind == "symlink" else "")
        else:
            raise ValueError(kind)
    return buf.getvalue()


def malicious_tar(kind: str) -> bytes:
    """A tar.gz with a hostile member: ``dotdot``, ``absolute``, ``symlink`` (escaping), ``hardlink``
    (to /etc/passwd), ``fifo``, ``hardlink-through-symlink``, ``hardlink-to-nothing``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        def add(name: str, data: bytes = b"x", **attrs) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data) if attrs.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else 0
            for k, v in attrs.items():
                setattr(info, k, v)
            tf.addfile(info, io.BytesIO(data) if info.size else None)

        add("list/ok.txt", b"harmless")
        if kind == "dotdot":
            add("../escaped.txt")
        elif kind == "absolute":
            add("/tmp/lanenb-absolute-escape.txt")
        elif kind == "symlink":
            add("list/link", type=tarfile.SYMTYPE, linkname="../../../../etc")
        elif kind == "hardlink":
            add("list/passwd", type=tarfile.LNKTYPE, linkname="/etc/passwd")
        elif kind == "fifo":
            add("list/pipe", type=tarfile.FIFOTYPE)
        elif kind == "hardlink-through-symlink":  # tarfile itself raised a bare KeyError here
            add("list/alias", type=tarfile.LNKTYPE, linkname="list/dir/ok.txt")
            add("list/dir", type=tarfile.SYMTYPE, linkname=".")
        elif kind == "hardlink-to-nothing":
            add("list/ghost", type=tarfile.LNKTYPE, linkname="list/never-stored.txt")
        else:
            raise ValueError(kind)
    return buf.getvalue()


# ------------------------------------------------------------------ the loopback server

@dataclass
class Faults:
    """What the server does wrong. ``cut[name] = (bytes, times)``: send only the first ``bytes``
    of the (range) body then close the connection, ``times`` times; ``status[name] = code``."""

    cut: dict[str, tuple[int, int]] = field(default_factory=dict)
    status: dict[str, int] = field(default_factory=dict)
    ignore_range: bool = False
    no_length: set[str] = field(default_factory=set)
    # hold[name] = event: send half the body, then wait for the event (a download in progress)
    hold: dict[str, threading.Event] = field(default_factory=dict)


class LoopbackServer:
    """``http://127.0.0.1:<port>/<name>`` serving ``files``; records each request's Range header."""

    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self.files: dict[str, bytes] = dict(files or {})
        self.faults = Faults()
        self.requests: list[tuple[str, str | None]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                name = self.path.lstrip("/").split("?")[0]
                rng = self.headers.get("Range")
                with outer._lock:
                    outer.requests.append((name, rng))
                    status = outer.faults.status.get(name)
                    cut = outer.faults.cut.get(name)
                    if cut and cut[1] > 0:
                        outer.faults.cut[name] = (cut[0], cut[1] - 1)
                    else:
                        cut = None
                data = outer.files.get(name)
                if status or data is None:
                    body = b"not here"
                    self.send_response(status or 404)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                start = 0
                m = re.match(r"bytes=(\d+)-$", rng or "")
                if m and not outer.faults.ignore_range:
                    start = int(m.group(1))
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                if name in outer.faults.no_length:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if cut:
                    self.wfile.write(body[:cut[0]])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                held = outer.faults.hold.get(name)
                if held is not None:
                    self.wfile.write(body[:len(body) // 2])
                    self.wfile.flush()
                    held.wait(60)
                    body = body[len(body) // 2:]
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, address: None  # cut connections are deliberate
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def ranges(self, name: str) -> list[str | None]:
        return [r for n, r in self.requests if n == name]


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


# ------------------------------------------------------------------ a small disk

def mount_tmpfs(path: Path, size: str = "2m") -> bool:
    """Mount a ``size`` tmpfs at ``path`` (needs root); False where mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def unmount(path: Path) -> None:
    subprocess.run(["umount", str(path)], capture_output=True, timeout=30, check=False)
