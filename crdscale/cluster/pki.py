"""Fresh credentials for each local control plane: a CA, a serving certificate,
a service-account key pair and an admin bearer token. Private material is
written mode 0600."""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from crdscale.fsutil import write_atomic

ADMIN_USER = "crdscale-admin"
SERVICE_IP = "10.0.0.1"  # first address of --service-cluster-ip-range=10.0.0.0/24
SERVING_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class Credentials:
    """Paths of one instance's credentials (all under ``pki_dir``)."""

    pki_dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.pki_dir / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.pki_dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.pki_dir / "apiserver.key"

    @property
    def sa_public_key(self) -> Path:
        return self.pki_dir / "sa.pub"

    @property
    def sa_private_key(self) -> Path:
        return self.pki_dir / "sa.key"

    @property
    def token_file(self) -> Path:
        """kube-apiserver's --token-auth-file (CSV)."""
        return self.pki_dir / "tokens.csv"

    @property
    def admin_token_file(self) -> Path:
        """The bare admin token, for clients that read a credentials file (Prometheus)."""
        return self.pki_dir / "admin.token"

    def admin_token(self) -> str:
        return self.token_file.read_text().split(",", 1)[0]


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def create_credentials(pki_dir: Path, *, valid_days: int = 30) -> Credentials:
    """Write a new CA, a serving cert for 127.0.0.1/localhost/kubernetes.*, a service-account
    key pair and a ``system:masters`` bearer token into ``pki_dir``."""
    creds = Credentials(pki_dir)
    pki_dir.mkdir(parents=True, exist_ok=True)
    pki_dir.chmod(0o700)
    now = dt.datetime.now(dt.timezone.utc)
    not_before = now - dt.timedelta(minutes=5)  # tolerate small clock differences
    not_after = now + dt.timedelta(days=valid_days)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "crdscale-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName(n) for n in SERVING_DNS_NAMES]
    sans += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address(SERVICE_IP))]
    serving_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    # RSA for service-account tokens: every kube-apiserver version we build accepts RS256.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    write_atomic(creds.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM))
    write_atomic(pki_dir / "ca.key", _pem_key(ca_key), mode=0o600)
    write_atomic(creds.serving_cert, serving_cert.public_bytes(serialization.Encoding.PEM))
    write_atomic(creds.serving_key, _pem_key(serving_key), mode=0o600)
    write_atomic(creds.sa_private_key, _pem_key(sa_key), mode=0o600)
    write_atomic(
        creds.sa_public_key,
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    token = secrets.token_urlsafe(32)
    write_atomic(creds.token_file, f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n', mode=0o600)
    write_atomic(creds.admin_token_file, token, mode=0o600)
    return creds
