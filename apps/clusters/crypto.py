"""Encryption at rest for cluster credentials (kubeconfigs, service-account tokens).

Fernet (AES-128-CBC + HMAC-SHA256) with a key derived by HKDF-SHA256 from
settings.CAIRN_ENCRYPTION_KEY when set, else from SECRET_KEY. Changing that secret makes stored
credentials unreadable: re-register the clusters (`decrypt` raises CredentialsUnreadable).
"""
import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class CredentialsUnreadable(Exception):
    """The stored credentials cannot be decrypted with the current key."""


def _fernet() -> Fernet:
    secret = getattr(settings, "CAIRN_ENCRYPTION_KEY", "") or settings.SECRET_KEY  # see config/settings/base.py
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"cairn", info=b"cairn-cluster-credentials").derive(
        secret.encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise CredentialsUnreadable(
            "The cluster's stored credentials cannot be decrypted (was CAIRN_ENCRYPTION_KEY or SECRET_KEY "
            "changed?). Register the cluster's credentials again."
        ) from None
