"""One-shot `dask-certs`: a private CA and one cluster certificate for Dask's mutual TLS.

    python dask_certs.py /tls

Writes `ca.pem`, `cluster.pem` and `cluster-key.pem` (mode 600) into the folder unless they
exist already (a restart keeps the cluster's identity). The scheduler, the Dask workers and the
Prefect worker (the client) all present `cluster.pem` and accept only peers whose certificate
the CA signed, so nothing on the network can submit work without the key from this volume.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NAMES = ("dask-scheduler", "dask-worker", "prefect-worker", "localhost")
VALID_DAYS = 825


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_certificates(folder: Path) -> list[Path]:
    """Create the CA and the cluster certificate in `folder` (kept if present)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "ca.pem", folder / "cluster.pem", folder / "cluster-key.pem"]
    if all(p.exists() for p in paths):
        return paths
    now = dt.datetime.now(dt.UTC)
    until = now + dt.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("greylab dask CA"))
        .issuer_name(_name("greylab dask CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    san = [x509.DNSName(n) for n in NAMES] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("greylab dask cluster"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = paths
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(_pem_key(key))
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: dask_certs.py FOLDER")
    for path in make_certificates(Path(sys.argv[1])):
        print(f"dask-certs: {path}")
