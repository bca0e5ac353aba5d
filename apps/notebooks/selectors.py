"""Reads for notebooks."""
from urllib.parse import urlencode

from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.models import Workload


def notebook_login_url(*, workload: Workload) -> str | None:
    """The address that opens the running notebook and logs its visitor in (its token in the query
    string, which Jupyter swaps for a cookie and drops from the address bar); None when it is not
    running or the backend has not said where it listens.

    Only the `open` action hands it out, to the notebook's creator only. Until Cairn proxies
    notebooks this is the one place the token leaves Cairn.
    """
    runtime = workload.runtime if isinstance(workload.runtime, dict) else {}
    url, token = runtime.get("url"), runtime.get("token")
    if workload.kind != Kind.NOTEBOOK or workload.status != WorkloadStatus.RUNNING:
        return None
    if not isinstance(url, str) or not url or not isinstance(token, str) or not token:
        return None
    return f"{url}{'&' if '?' in url else '?'}{urlencode({'token': token})}"
