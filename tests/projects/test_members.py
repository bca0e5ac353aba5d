from apps.projects.models import Membership


def test_maintainer_cannot_grant_owner_but_owner_can(alice, bob, client_for, project):
    from tests.factories import MembershipFactory, UserFactory

    mia = UserFactory(username="mia")
    MembershipFactory(project=project, user=mia, role="maintainer")
    response = client_for(mia).patch("/api/v1/projects/vision/members/bob/", {"role": "owner"}, format="json")
    assert response.status_code == 403 and "owner" in response.json()["detail"]
    assert client_for(alice).patch("/api/v1/projects/vision/members/bob/", {"role": "owner"},
                                   format="json").status_code == 200
    assert Membership.objects.get(user=bob).role == "owner"


def test_the_last_owner_cannot_leave_or_be_demoted(alice, client_for):
    client = client_for(alice)
    assert client.delete("/api/v1/projects/vision/members/alice/").status_code == 409
    response = client.patch("/api/v1/projects/vision/members/alice/", {"role": "member"}, format="json")
    assert response.status_code == 409 and "at least one owner" in response.json()["detail"]


def test_adding_twice_is_409(alice, bob, client_for):
    response = client_for(alice).post("/api/v1/projects/vision/members/", {"username": "bob"}, format="json")
    assert response.status_code == 409


def test_creating_a_project_makes_you_owner_and_duplicate_slug_is_409(bob, client_for):
    client = client_for(bob)
    assert client.post("/api/v1/projects/", {"slug": "nlp", "name": "NLP"}, format="json").json()["role"] == "owner"
    assert client.post("/api/v1/projects/", {"slug": "nlp", "name": "NLP"}, format="json").status_code in (400, 409)
