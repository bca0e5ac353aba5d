"""Encryption at rest for cluster credentials (kubeconfigs, service-account tokens), and other
secrets kept in the database with the same key (`seal`: a notebook's token in Workload.runtime).

Fernet (AES-128-CBC + HMAC-SHA256) with a key derived by HKDF-SHA256 from
settings.CAIRN_ENCRYPTION_KEY when set, else from SECRET_KEY. Changing that secret makes stored
credentials unreadable: re-register the clusters (`decrypt` raises CredentialsUnreadable). The one
exception: what the public default SECRET_KEY encrypted stays readable, and is re-encrypted with
the current key (a data folder from before embedded mode made its own key).
"""
import base64
import logging

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.apps import apps as django_apps
from django.conf import settings

from config.secret_key import DEFAULT_SECRET_KEY

logger = logging.getLogger(__name__)

# The seam of encrypted columns ("app_label.Model", field): each app that stores a value encrypted
# here adds its own in its ready(), so `rotate_legacy` re-encrypts them without importing the app.
encrypted_fields: list[tuple[str, str]] = [("clusters.ClusterCredential", "encrypted_kubeconfig")]


class CredentialsUnreadable(Exception):
    """The stored credentials cannot be decrypted with the current key."""


def _derive(secret: str) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"cairn", info=b"cairn-cluster-credentials").derive(
        secret.encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))


def _secret() -> str:
    return getattr(settings, "CAIRN_ENCRYPTION_KEY", "") or settings.SECRET_KEY  # see config/settings/base.py


def _fernet() -> MultiFernet:
    """Encrypts with the current key. Also decrypts what the public default SECRET_KEY encrypted:
    rows of a data folder from before it had a key of its own (config/secret_key.py), which
    `rotate_legacy` re-encrypts after each migrate (`needs_rotation`, `rotate`)."""
    keys = [_derive(_secret())]
    if _secret() != DEFAULT_SECRET_KEY:
        keys.append(_derive(DEFAULT_SECRET_KEY))
    return MultiFernet(keys)


def needs_rotation(token: str) -> bool:
    """Whether `token` was encrypted with the public default key rather than the current one."""
    if not token or _secret() == DEFAULT_SECRET_KEY:
        return False
    try:
        _derive(_secret()).decrypt(token.encode())
        return False
    except InvalidToken:
        try:
            _derive(DEFAULT_SECRET_KEY).decrypt(token.encode())
            return True
        except InvalidToken:
            return False


def rotate(token: str) -> str:
    """`token` re-encrypted with the current key (InvalidToken when no known key opens it)."""
    return _fernet().rotate(token.encode()).decode()


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


SEALED_PREFIX = "fernet:"


def seal(plaintext: str) -> str:
    """A secret to keep in a JSON field (a notebook's token in Workload.runtime), encrypted with
    the credentials key and marked, so that a reader tells it from plain text stored before."""
    return SEALED_PREFIX + encrypt(plaintext)


def unseal(value: str) -> str:
    """The secret `seal` stored; a value without the mark is returned as it is (a row from before
    the data migration that seals them). CredentialsUnreadable when the key changed."""
    if not value.startswith(SEALED_PREFIX):
        return value
    try:
        return _fernet().decrypt(value[len(SEALED_PREFIX):].encode()).decode()
    except InvalidToken:
        raise CredentialsUnreadable("A stored secret cannot be decrypted (was CAIRN_ENCRYPTION_KEY or SECRET_KEY "
                                    "changed?).") from None


def rotate_legacy() -> int:
    """Re-encrypt with the current key what the public default SECRET_KEY encrypted (a data folder
    from before embedded mode made its own key), in every column of `encrypted_fields`; how many
    values. Compare-and-set per row: a value rewritten meanwhile is left to its writer."""
    count = 0
    for label, field in encrypted_fields:
        model = django_apps.get_model(label)
        for pk, token in model.objects.exclude(**{field: ""}).values_list("pk", field):
            if needs_rotation(token):
                count += model.objects.filter(pk=pk, **{field: token}).update(**{field: rotate(token)})
    if count:
        logger.warning("Re-encrypted %d stored credential(s) made with the public default SECRET_KEY with this "
                       "installation's key.", count)
    return count


def rotate_after_migrate(sender, app_config=None, **kwargs) -> None:
    if app_config is not None and app_config.label == "clusters":
        try:
            rotate_legacy()
        except Exception:  # noqa: BLE001 - a table not there yet (a partial migrate): next time
            logger.debug("credentials rotation skipped", exc_info=True)
