"""One word, one meaning: `memorized` is the default verdict (p <= 0.01 against the null); WikiMem's readings are
`rank1_any` (some template ranks a true value first), `rank1_all` (every template) and a canary's `rank1`, in the
API's facts, cohort statistics and the forget set. The old names stay one release, marked deprecated."""

from __future__ import annotations

import json

from app.forget_set.service import CSV_FIELDS
from app.nulls.schemas import CohortNumbers
from app.subjects.schemas import CanaryRead, FactResultRead


def test_the_readings_have_their_own_names_and_the_old_ones_are_deprecated():
    canary = CanaryRead(
        template_index=0,
        kind="base",
        template="{subject} works as {value}.",
        rank=1,
        memorized=True,
        lead_margin=0.5,
        z_star=2.0,
        generic_subject="a person",
        similar_names=["A B"],
    )
    fact = FactResultRead(
        property="P106",
        label="occupation",
        values=["chemist"],
        share=0.5,
        strict=False,
        lenient=True,
        z_star=2.0,
        n_templates=2,
        counterfactuals=[],
        canaries=[canary],
    )
    dumped = fact.model_dump(mode="json")
    assert (dumped["rank1_any"], dumped["rank1_all"]) == (True, False) and dumped["canaries"][0]["rank1"] is True
    cohort = CohortNumbers(
        subjects=1, facts=2, mean_memorization=0.5, strict=0.0, lenient=0.5, z_star=None, zero_memorization=0.0
    ).model_dump()
    assert (cohort["rank1_any"], cohort["rank1_all"]) == (0.5, 0.0)
    assert {"rank1_any", "rank1_all", "lenient", "strict"} <= set(CSV_FIELDS)


def test_the_api_document_marks_the_old_names_deprecated():
    from app.openapi_export import render

    schemas = json.loads(render())["components"]["schemas"]
    facts = schemas["FactResultRead"]["properties"]
    assert facts["lenient"]["deprecated"] and facts["strict"]["deprecated"]
    assert not facts["rank1_any"].get("deprecated") and "not the verdict" in facts["rank1_any"]["description"]
    assert schemas["CanaryRead"]["properties"]["memorized"]["deprecated"]
