from django.db import models


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    MAINTAINER = "maintainer", "Maintainer"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


# Higher number, more rights. Every role has the rights of the roles below it.
ROLE_RANK = {Role.VIEWER: 10, Role.MEMBER: 20, Role.MAINTAINER: 30, Role.OWNER: 40}


class Action:
    """What a role may do inside a project. The table in docs/permissions.md mirrors this."""

    READ = "read"  # see the project, its workloads, logs, events, quotas, members
    SUBMIT = "submit"  # create, stop and delete workloads
    MANAGE_MEMBERS = "manage_members"  # add / change / remove members below owner
    EDIT_PROJECT = "edit_project"  # rename, change description
    MANAGE_OWNERS = "manage_owners"  # grant or revoke the owner role
    DELETE_PROJECT = "delete_project"
    READ_AUDIT = "read_audit"  # read the project's audit log
    MANAGE_DEPLOYMENT_KEYS = "manage_deployment_keys"  # create and revoke keys that call a deployment
    CALL_DEPLOYMENT = "call_deployment"  # call a deployment through the gateway with a token or session
    # open notebooks other members started, when the project turns shared_notebooks on
    OPEN_SHARED_NOTEBOOKS = "open_shared_notebooks"
    MANAGE_STORAGE = "manage_storage"  # delete volumes, datasets and models (their data goes with them)


MINIMUM_ROLE = {
    Action.READ: Role.VIEWER,
    Action.SUBMIT: Role.MEMBER,
    Action.MANAGE_MEMBERS: Role.MAINTAINER,
    Action.EDIT_PROJECT: Role.MAINTAINER,
    Action.MANAGE_OWNERS: Role.OWNER,
    Action.DELETE_PROJECT: Role.OWNER,
    Action.READ_AUDIT: Role.OWNER,
    Action.MANAGE_DEPLOYMENT_KEYS: Role.MAINTAINER,
    Action.CALL_DEPLOYMENT: Role.MEMBER,
    Action.OPEN_SHARED_NOTEBOOKS: Role.MAINTAINER,
    Action.MANAGE_STORAGE: Role.MAINTAINER,
}


def role_allows(role: str | None, action: str) -> bool:
    if role is None:
        return False
    return ROLE_RANK[Role(role)] >= ROLE_RANK[MINIMUM_ROLE[action]]


def may_call_deployment(role: str | None, *, public: bool) -> bool:
    """The one rule for who calls a deployment with their own API token or session, applied by
    the serving gateway (apps/deployments/access.py) and by the API, which shows the deployment's
    `endpoint` to exactly these people: members and above (`call_deployment`), and anyone who
    reads the project when the deployment is public (`public: true`). A viewer calls a private
    deployment only with a deployment key (docs/permissions.md)."""
    return role_allows(role, Action.CALL_DEPLOYMENT) or (public and role_allows(role, Action.READ))
