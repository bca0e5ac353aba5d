"""apps/projects/wsauth.py without sockets: the periodic access check of all the open sockets of a
process is a few queries, whatever their number, and decides like the per-message check."""
import pytest
from django.test import Client
from django.utils import timezone

from apps.accounts.models import ApiToken
from apps.projects.wsauth import (
    NOT_MEMBER,
    SESSION_ENDED,
    TOKEN_ENDED,
    USER_INACTIVE,
    Credentials,
    access_refusal,
    access_refusals,
)
from tests.factories import UserFactory, make_token

pytestmark = pytest.mark.django_db


def _session_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_periodic_check_of_many_sockets_costs_a_few_queries(project, alice, bob, charlie,
                                                                django_assert_max_num_queries):
    def token_credentials(user, **fields):
        token = make_token(user, **fields)
        return Credentials(user_id=user.pk, password=user.password,
                           token_id=ApiToken.objects.get(prefix=token.split("_")[1]).pk)

    session_key = _session_client(bob).cookies["sessionid"].value
    gone = UserFactory(username="gone", is_active=False)
    sockets = [(token_credentials(alice), project.pk) for _ in range(20)] + [
        (token_credentials(bob, revoked_at=timezone.now()), project.pk),
        (token_credentials(charlie), project.pk),
        (token_credentials(gone), project.pk),
        (Credentials(user_id=bob.pk, password=bob.password, session_key=session_key), project.pk),
        (Credentials(user_id=bob.pk, password=bob.password, session_key="nope"), project.pk),
    ]
    with django_assert_max_num_queries(5):
        refusals = access_refusals(sockets)
    assert refusals == [None] * 20 + [TOKEN_ENDED, NOT_MEMBER, USER_INACTIVE, None, SESSION_ENDED]
    for (credentials, project_id), refusal in zip(sockets, refusals, strict=True):
        assert access_refusal(credentials, project_id) == refusal


def test_every_refusal_fits_a_close_frame():
    import apps.projects.wsauth as wsauth

    refusals = [v for v in vars(wsauth).values() if isinstance(v, wsauth.Refusal)]
    assert len(refusals) >= 10
    for refusal in refusals:
        assert refusal.code in (1011, 4401, 4403, 4404) and 0 < len(refusal.reason.encode()) <= 123
