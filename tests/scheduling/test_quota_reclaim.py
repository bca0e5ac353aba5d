"""Cohort.reclaimable_for: the per-resource answer the victim searches use for a whole group of a
borrower's running work at once must be runs_borrowed's for every victim of the group."""
from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.scheduling.policy import QuotaState, Resources
from apps.scheduling.policy.quota import Cohort

NOMINAL = (4000, 8000, 16384)
usage = st.tuples(*(st.integers(0, 3 * n) for n in NOMINAL))


@settings(max_examples=300, deadline=None)
@given(used=st.lists(usage, min_size=2, max_size=2), claimed=usage,
       need=st.tuples(st.sampled_from([0, 1000]), st.sampled_from([0, 500]), st.sampled_from([0, 1024])))
def test_reclaimable_for_agrees_with_runs_borrowed(used, claimed, need):
    cohort = Cohort("p", [QuotaState(project=p, pool="p", nominal=Resources(*NOMINAL)) for p in ("a", "b")])
    for project, u in zip(("a", "b"), used, strict=True):
        cohort.add(project, u)
    cohort.claim("b", claimed)
    for project in ("a", "b", "nobody"):
        marks = cohort.reclaimable_for(project, need)
        for uses in product((0, 1), repeat=3):
            expected = cohort.runs_borrowed(project, uses, need)
            got = marks is not None and any(m and u for m, u in zip(marks, uses, strict=True))
            assert got == expected, (project, uses)
        if marks is not None:
            assert any(marks)


def test_a_project_within_its_nominal_has_nothing_reclaimable():
    cohort = Cohort("p", [QuotaState(project="a", pool="p", nominal=Resources(*NOMINAL))])
    cohort.add("a", (NOMINAL[0], 0, 0))
    assert cohort.reclaimable_for("a", (1000, 0, 0)) is None
    cohort.add("a", (1000, 0, 0))
    assert cohort.reclaimable_for("a", (1000, 0, 0)) == (True, False, False)
    assert cohort.reclaimable_for("a", (0, 500, 0)) is None  # it borrows GPUs only; CPU is not asked back
