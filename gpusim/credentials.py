"""The simulated cluster's credentials: its certificate authority, the API server's serving
certificate, the admin's bearer token and one token per ServiceAccount.

What kubeadm sets up for a real cluster, made when a cluster's API server first starts and kept
beside the `ClusterState` (like `gpusim.hardware`), so an API server restarted on the same
cluster serves a certificate its clients still trust and takes the tokens they hold:

- a CA (`kubernetes`, ECDSA P-256, ten years) and a serving certificate it signs for
  127.0.0.1, `localhost` and the `kubernetes.default.svc` names kubeadm puts in its
  apiserver.crt (cmd/kubeadm/app/phases/certs `GetAPIServerAltNames`);
- the admin's token: kubeadm's admin.conf authenticates `kubernetes-admin` in the group
  `kubeadm:cluster-admins` (by client certificate; here by a bearer token, which kubectl
  and the `kubernetes` client send the same way);
- a token per ServiceAccount object, derived from the cluster's secret and the account's
  uid (a deleted and recreated account gets a new one, as with bound tokens), and written as
  the kubelet writes a projected `kube-api-access` volume: `token`, `ca.crt` and `namespace`
  in one directory (`mount`), which is what `rest.InClusterConfig` and the Python client's
  `InClusterConfigLoader` read.

Real ServiceAccount tokens are JWTs signed by the service-account key and checked by their
signature; these are opaque random strings the server looks up. Nothing a client does with a
token depends on that. The files live in a temporary directory that goes with the cluster
(or the process). This module makes and keeps secrets; it must never write to the cluster.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import shutil
import ssl
import tempfile
import threading
import weakref
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpusim.state import ClusterState

ADMIN_USER = "kubernetes-admin"
ADMIN_GROUPS = ("kubeadm:cluster-admins", "system:authenticated")
"""kubeadm's admin.conf identity since v1.29 (kubernetes/kubeadm#2414): not system:masters,
but a group bound to cluster-admin by the `kubeadm:cluster-admins` ClusterRoleBinding."""
SERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class Credentials:
    """One cluster's CA, serving certificate and tokens, and the directory holding their
    files (removed with the cluster)."""

    def __init__(self) -> None:
        now = datetime.now(UTC) - timedelta(minutes=5)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("kubernetes"))
            .issuer_name(_name("kubernetes"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=True,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        server_key = ec.generate_private_key(ec.SECP256R1())
        server_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("kube-apiserver"))
            .issuer_name(ca_cert.subject)
            .public_key(server_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + timedelta(days=365))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName(n) for n in SERVER_NAMES]
                    + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
        self.admin_token = secrets.token_urlsafe(32)
        self._secret = secrets.token_bytes(32)
        self.directory = Path(tempfile.mkdtemp(prefix="gpusim-credentials-"))
        self.ca_file = self._write("ca.crt", self.ca_pem)
        self.admin_token_file = self._write("admin.token", self.admin_token.encode())
        self._server_cert = self._write(
            "apiserver.crt", server_cert.public_bytes(serialization.Encoding.PEM)
        )
        self._server_key = self._write(
            "apiserver.key",
            server_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def _write(self, name: str, data: bytes) -> Path:
        path = self.directory / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    @property
    def ca_data(self) -> str:
        """The CA as a kubeconfig's `certificate-authority-data` holds it."""
        return base64.b64encode(self.ca_pem).decode()

    def server_context(self) -> ssl.SSLContext:
        """The TLS context the API server serves with (TLS 1.2 and later, as kube-apiserver's
        default minimum)."""
        with self._lock:
            if self._context is None:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.minimum_version = ssl.TLSVersion.TLSv1_2
                context.load_cert_chain(self._server_cert, self._server_key)
                self._context = context
            return self._context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this cluster's CA only, hostnames checked."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def token_for(self, namespace: str, name: str, uid: str) -> str:
        """The bearer token of the ServiceAccount `namespace/name` with that uid."""
        digest = hmac.new(
            self._secret, f"{namespace}/{name}/{uid}".encode(), hashlib.sha256
        ).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def mount(self, namespace: str, name: str, uid: str) -> Path:
        """The ServiceAccount's projected token volume, as the kubelet mounts it at
        /var/run/secrets/kubernetes.io/serviceaccount: `token`, `ca.crt`, `namespace`."""
        directory = self.directory / "serviceaccounts" / namespace / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "token").write_text(self.token_for(namespace, name, uid))
        (directory / "ca.crt").write_bytes(self.ca_pem)
        (directory / "namespace").write_text(namespace)
        return directory


_CREDENTIALS: weakref.WeakKeyDictionary[ClusterState, Credentials] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def credentials_of(cluster: ClusterState) -> Credentials:
    """The cluster's credentials, made on first use; their files go with the cluster."""
    with _LOCK:
        found = _CREDENTIALS.get(cluster)
        if found is None:
            found = _CREDENTIALS[cluster] = Credentials()
            weakref.finalize(cluster, shutil.rmtree, found.directory, True)
        return found
