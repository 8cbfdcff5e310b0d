"""Throw-away certificate authorities for the TLS tests, made with the openssl command (helper, no tests).

`make_ca(dir, name)` creates a self-signed CA; `ca.issue(name, server=...)` a leaf certificate signed by
it (P-256 keys, valid two days; server certificates carry localhost and 127.0.0.1 as names).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


def openssl_missing() -> str | None:
    return None if shutil.which("openssl") else "the openssl command (needed to make test certificates) is missing"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class Leaf:
    cert: Path
    key: Path


@dataclass(frozen=True)
class CertificateAuthority:
    root: Path
    name: str
    cert: Path
    key: Path

    def issue(self, name: str, *, server: bool = False) -> Leaf:
        key, csr, cert = (self.root / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
        ext = self.root / f"{name}.ext"
        usage = "serverAuth" if server else "clientAuth"
        lines = ["basicConstraints=critical,CA:FALSE", f"extendedKeyUsage={usage}"]
        if server:
            lines.append("subjectAltName=DNS:localhost,IP:127.0.0.1")
        ext.write_text("\n".join(lines) + "\n")
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", key.name, "-out", csr.name, "-subj", f"/CN={name}", cwd=self.root)
        _openssl("x509", "-req", "-in", csr.name, "-CA", self.cert.name, "-CAkey", self.key.name, "-CAcreateserial",
                 "-out", cert.name, "-days", "2", "-extfile", ext.name, cwd=self.root)
        key.chmod(0o600)
        return Leaf(cert, key)


def make_ca(root: Path, name: str) -> CertificateAuthority:
    root.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.pem", "-subj", f"/CN={name}", "-days", "2",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=root)
    return CertificateAuthority(root, name, root / f"{name}-ca.pem", root / f"{name}-ca.key")
