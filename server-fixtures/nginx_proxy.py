"""A real nginx in front of a vLLM server, configured the way deployments put one there.

    with NginxProxy(upstream=("127.0.0.1", 8000), gateway_upstream=("127.0.0.1", 9000)) as nginx:
        nginx.url("plain")        # http://127.0.0.1:<port>: one ``server`` block per case below

One nginx (the Debian package; ``server-fixtures/setup`` installs it) runs in the foreground as a child
process, with its config, logs, pid file and temp folders in a private temporary folder, and one
``server`` block per case, each on its own free port:

    plain        proxy_pass to the upstream; nothing else (the baseline: the SDK must see no difference)
    small_body   ``client_max_body_size`` ``small_body`` bytes (default 2k): larger requests get nginx's 413
    auth         ``auth_basic`` with the user ``AUTH_USER`` / ``AUTH_PASSWORD`` (a test password)
    redirect     ``return 301 https://$host$request_uri`` (the usual http -> https redirect)
    redirect_route  everything to the upstream, except ``/v1/embeddings``: ``return 307 https://...``
                 (a method-keeping redirect of one route, e.g. while it moves behind TLS)
    gateway      proxy_pass to ``gateway_upstream`` (a FaultProxy you control) with
                 ``proxy_read_timeout`` / ``proxy_connect_timeout`` ``gateway_timeout`` s (default 2):
                 a slow upstream gives nginx's 504 page, a stopped one its 502 page
    maintenance  everything to the upstream, except ``/v1/embeddings``, whose upstream is down and
                 whose error page is a ``200 text/html`` maintenance page
                 (``error_page 502 503 504 = @maintenance``)

Workers run as the calling user (``user root`` when root, so they can read the private folder). The
nginx process gets SIGTERM if the process that started it dies (PR_SET_PDEATHSIG). Standard library only.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from fault_proxy import free_port

AUTH_USER = "deploy"
AUTH_PASSWORD = "proxy-test-password"  # a test credential for the auth block, not a secret
CASES = ("plain", "small_body", "auth", "redirect", "redirect_route", "gateway", "maintenance")
#: 120 bytes: a whole number of float32 rows for 1, 2, 3, 5 or 6 inputs, so a client that takes it for
#: raw vectors gets no length error to stumble on (the silent-garbage case).
MAINTENANCE_HTML = (
    "<html><body><h1>Down for maintenance</h1><p>Back soon.</p></body></html>".ljust(119) + "\n"
)


class NginxStartError(RuntimeError):
    """nginx is missing, refused its config, or did not listen in time (the message has its error log)."""


def nginx_binary() -> str | None:
    """Path of the nginx binary, or None (also looked up in /usr/sbin, which a non-root PATH may lack)."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


class NginxProxy:
    """nginx with one ``server`` block per case (see the module doc); ``start()`` / ``stop()``."""

    def __init__(
        self,
        upstream: tuple[str, int],
        gateway_upstream: tuple[str, int],
        *,
        small_body: str = "2k",
        gateway_timeout: float = 2.0,
        host: str = "127.0.0.1",
    ) -> None:
        self.upstream = upstream
        self.gateway_upstream = gateway_upstream
        self.small_body = small_body
        self.gateway_timeout = gateway_timeout
        self.host = host
        self.ports = {case: free_port(host) for case in CASES}
        self.dead_port = free_port(host)  # nothing listens here: the maintenance block's upstream
        self.folder: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, case: str) -> str:
        """``http://host:port`` of one case's server block."""
        return f"http://{self.host}:{self.ports[case]}"

    def config(self, folder: Path) -> str:
        """The nginx.conf text for ``folder`` (also written there by ``start()``)."""
        up = "{}:{}".format(*self.upstream)
        gw = "{}:{}".format(*self.gateway_upstream)
        t = f"{self.gateway_timeout:g}s"
        listen = f"listen {self.host}:{{}};"
        html = MAINTENANCE_HTML.replace("'", "\\'").replace("\n", "\\n")
        return nginx_conf(
            folder,
            f"""
    client_max_body_size 64m;
    proxy_http_version 1.1;
    proxy_set_header Host $host;
    proxy_set_header X-Forwarded-For $remote_addr;

    server {{ {listen.format(self.ports["plain"])}
        location / {{ proxy_pass http://{up}; }} }}
    server {{ {listen.format(self.ports["small_body"])}
        client_max_body_size {self.small_body};
        location / {{ proxy_pass http://{up}; }} }}
    server {{ {listen.format(self.ports["auth"])}
        auth_basic "vLLM";
        auth_basic_user_file {folder}/htpasswd;
        location / {{ proxy_pass http://{up}; }} }}
    server {{ {listen.format(self.ports["redirect"])}
        return 301 https://$host$request_uri; }}
    server {{ {listen.format(self.ports["redirect_route"])}
        location / {{ proxy_pass http://{up}; }}
        location = /v1/embeddings {{ return 307 https://$host$request_uri; }} }}
    server {{ {listen.format(self.ports["gateway"])}
        proxy_connect_timeout {t};
        proxy_read_timeout {t};
        proxy_send_timeout {t};
        location / {{ proxy_pass http://{gw}; }} }}
    server {{ {listen.format(self.ports["maintenance"])}
        location / {{ proxy_pass http://{up}; }}
        location /v1/embeddings {{
            proxy_pass http://{self.host}:{self.dead_port};
            error_page 502 503 504 = @maintenance; }}
        location @maintenance {{ default_type text/html; return 200 '{html}'; }} }}
""",
        )

    def start(self, timeout: float = 15.0) -> NginxProxy:
        """Write the config into a new temporary folder, start nginx, wait until every block listens."""
        binary = nginx_binary()
        if binary is None:
            raise NginxStartError("nginx is not installed (server-fixtures/setup installs it as root)")
        self.folder = Path(tempfile.mkdtemp(prefix="vllm-tasks-nginx-"))
        (self.folder / "tmp").mkdir()
        (self.folder / "htpasswd").write_text(f"{AUTH_USER}:{{PLAIN}}{AUTH_PASSWORD}\n")
        conf = self.folder / "nginx.conf"
        conf.write_text(self.config(self.folder))
        cmd = [binary, "-p", str(self.folder), "-c", str(conf), "-e", str(self.folder / "error.log")]
        self.process = subprocess.Popen(
            [*cmd, "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_pdeathsig,  # noqa: PLW1509 (nothing but prctl runs in the child)
        )
        deadline = time.monotonic() + timeout
        while not all(_listening(self.host, port) for port in self.ports.values()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                why = "exited" if self.process.poll() is not None else f"did not listen within {timeout:g} s"
                err = (
                    self.process.stderr.read().decode(errors="replace")
                    if self.process.poll() is not None
                    else ""
                )
                self.stop()
                raise NginxStartError(f"nginx {why}: {err}{self.error_log()}")
            time.sleep(0.05)
        return self

    def error_log(self) -> str:
        """The tail of nginx's error log ('' when there is none)."""
        path = self.folder / "error.log" if self.folder else None
        if path is None or not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        """SIGTERM (nginx's fast shutdown), SIGKILL after 5 s; then remove the temporary folder."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if process is not None and process.stderr is not None:
            process.stderr.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> NginxProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def nginx_conf(folder: Path, http: str) -> str:
    """A whole nginx.conf whose pid file, logs and temp folders are in ``folder`` (``start()`` makes
    ``folder/tmp``), with ``http`` (upstream and server blocks) inside its ``http`` block."""
    user = pwd.getpwuid(os.geteuid()).pw_name
    return f"""
{"user " + user + ";" if os.geteuid() == 0 else ""}
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/tmp/body;
    proxy_temp_path {folder}/tmp/proxy;
    fastcgi_temp_path {folder}/tmp/fastcgi;
    uwsgi_temp_path {folder}/tmp/uwsgi;
    scgi_temp_path {folder}/tmp/scgi;
    default_type application/octet-stream;
{http}
}}
"""


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _pdeathsig() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass
