"""Fresh credentials for each local control plane: a CA, a serving certificate,
a service-account key pair, an admin bearer token, and kube-controller-manager's
client and serving certificates. Private material is written mode 0600."""

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
# The user Kubernetes' bootstrap RBAC policy grants the controller-manager's own permissions
# (system:kube-controller-manager); with --use-service-account-credentials each controller
# then acts as its own service account, as in kubeadm clusters.
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
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

    @property
    def ca_key(self) -> Path:
        """Also kube-controller-manager's --cluster-signing-key-file (it signs approved CSRs)."""
        return self.pki_dir / "ca.key"

    @property
    def controller_manager_client_cert(self) -> Path:
        return self.pki_dir / "controller-manager.crt"

    @property
    def controller_manager_client_key(self) -> Path:
        return self.pki_dir / "controller-manager.key"

    @property
    def controller_manager_serving_cert(self) -> Path:
        """Its HTTPS (/healthz, /metrics) on 127.0.0.1, signed by the CA so scrapers verify it."""
        return self.pki_dir / "controller-manager-serving.crt"

    @property
    def controller_manager_serving_key(self) -> Path:
        return self.pki_dir / "controller-manager-serving.key"

    def admin_token(self) -> str:
        return self.token_file.read_text().split(",", 1)[0]


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def create_credentials(pki_dir: Path, *, valid_days: int = 30) -> Credentials:
    """Write a new CA, a serving cert for 127.0.0.1/localhost/kubernetes.*, a service-account
    key pair, a ``system:masters`` bearer token, and kube-controller-manager's client cert
    (``system:kube-controller-manager``) and serving cert (127.0.0.1) into ``pki_dir``."""
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

    def leaf(common_name: str, usage, sans=()):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        cert = (
            builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)

    server_auth = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
    loopback = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    sans = [x509.DNSName(n) for n in SERVING_DNS_NAMES]
    sans += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address(SERVICE_IP))]
    serving = leaf("kube-apiserver", server_auth, sans)
    cm_client = leaf(CONTROLLER_MANAGER_USER, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH)
    cm_serving = leaf("kube-controller-manager", server_auth, loopback)

    # RSA for service-account tokens: every kube-apiserver version we build accepts RS256.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    write_atomic(creds.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM))
    write_atomic(creds.ca_key, _pem_key(ca_key), mode=0o600)
    for (cert, key), cert_path, key_path in (
        (serving, creds.serving_cert, creds.serving_key),
        (cm_client, creds.controller_manager_client_cert, creds.controller_manager_client_key),
        (cm_serving, creds.controller_manager_serving_cert, creds.controller_manager_serving_key),
    ):
        write_atomic(cert_path, cert)
        write_atomic(key_path, key, mode=0o600)
    write_atomic(creds.sa_private_key, _pem_key(sa_key), mode=0o600)
    write_atomic(
        creds.sa_public_key,
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    token = secrets.token_urlsafe(32)
    write_atomic(creds.token_file, f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n', mode=0o600)
    write_atomic(creds.admin_token_file, token, mode=0o600)
    return creds


def issue_client_certificate(
    creds: Credentials,
    common_name: str,
    organizations: tuple[str, ...],
    cert_path: Path,
    key_path: Path,
    *,
    valid_days: int = 30,
) -> None:
    """Sign a client certificate for user ``common_name`` in groups ``organizations`` with the
    instance's CA (as kubeadm does for a node's kubelet and for kube-apiserver's kubelet client),
    written to ``cert_path`` and ``key_path`` (0600)."""
    ca_cert = x509.load_pem_x509_certificate(creds.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(creds.ca_key.read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=valid_days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    write_atomic(key_path, _pem_key(key), mode=0o600)
