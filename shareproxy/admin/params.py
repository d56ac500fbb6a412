"""What REST paths and bodies may hold. Names are checked by the rules the Kafka listener and
the CLI use (core/names.py): a name the proxy cannot take is a 422 naming the problem, never a
500 from the store. Request bodies name every field they take."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from shareproxy.core.names import (
    group_id_problem,
    principal_problem,
    require,
    topic_name_problem,
    user_name_problem,
)


def _checked(problem_of: Callable[[str], str | None]) -> AfterValidator:
    def check(value: str) -> str:
        require(problem_of(value))
        return value

    return AfterValidator(check)


GroupId = Annotated[str, _checked(group_id_problem)]
TopicName = Annotated[str, _checked(topic_name_problem)]
UserName = Annotated[str, _checked(user_name_problem)]
Principal = Annotated[str, _checked(principal_problem)]


class Strict(BaseModel):
    """A request body: a field the schema does not name is refused (422), not ignored, so a
    misspelt option never silently does the default."""

    model_config = ConfigDict(extra="forbid")


class Exact(Strict):
    """A request body the runtime takes exactly as the schema says: no value coerced ("1" is
    not a count, 1024.0 not a size)."""

    model_config = ConfigDict(extra="forbid", strict=True)
