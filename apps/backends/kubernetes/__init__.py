"""The Kubernetes backend. The only package in Cairn that imports `kubernetes`.

manifests.py  pure builders: a workload (as plain data) -> the objects Cairn creates
status.py     pure mapping: pods, jobs, nodes as the API returns them -> Cairn's view
client.py     API clients from a cluster's stored credentials; retries with backoff
backend.py    the Backend: launch (idempotent create / adopt), signal (stop), observe, logs
informer.py   list + watch caches with resourceVersion bookkeeping, re-list on 410
reconciler.py the level-triggered pass: workloads and node inventory from the caches
"""
