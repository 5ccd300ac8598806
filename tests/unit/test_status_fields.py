"""The status fields built directly are what the result models dump, key for key and in order."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from controller.domain.results import BoundResource, Candidate
from controller.domain.status.fields import candidate_field, resource_field

text = st.sampled_from(["", "a", "team/share", "git://x/y"])


@given(
    st.builds(
        BoundResource,
        uri=text,
        type=text,
        alias=text,
        name=text,
        namespace=text,
        uid=text,
        attributes=st.dictionaries(text, text, max_size=2),
        grant=text,
    )
)
def test_resource_field_is_the_models_dump(resource: BoundResource) -> None:
    dumped = resource.model_dump(
        mode="json", by_alias=True, exclude_defaults=True, exclude={"attributes"}
    )
    assert json.dumps(resource_field(resource)) == json.dumps(dumped)


@given(st.builds(Candidate, uri=text, type=text, alias=text, reason=text))
def test_candidate_field_is_the_models_dump(candidate: Candidate) -> None:
    dumped = candidate.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    assert json.dumps(candidate_field(candidate)) == json.dumps(dumped)
