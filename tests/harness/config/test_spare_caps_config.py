"""``spares.maxIdle`` and ``spares.maxMemoryMb`` in config.yaml: caps on all idle spares
together, written beside the roles' counts (role names are lowercase, so they cannot clash);
defaults when absent; errors name the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.settings import Config, parse_config
from harness.errors import ConfigError

FILE = Path("/srv/harness/config.yaml")


def parsed(spares: object) -> Config:
    return parse_config({"spares": spares}, file=FILE)


def test_the_caps_sit_beside_the_roles_counts_and_are_no_role() -> None:
    config = parsed({"developer": 2, "maxIdle": 3, "maxMemoryMb": 900})

    assert (config.spares_max_idle, config.spares_max_memory_mb) == (3, 900)
    assert config.spare_counts == {"developer": 2}


def test_caps_alone_keep_the_default_spare_and_no_caps_keep_the_defaults() -> None:
    capped = parsed({"maxIdle": 1})
    plain = parse_config({}, file=FILE)

    assert capped.spare_counts == {capped.default_role: 1}
    assert capped.spares_max_idle == 1
    assert (plain.spares_max_idle, plain.spares_max_memory_mb) == (8, 2048)
    assert parsed({}).spare_counts == {}  # `spares: {}` still keeps none


@pytest.mark.parametrize(
    ("spares", "field", "problem", "fix"),
    [
        (
            {"maxIdle": -1},
            "spares.maxIdle",
            "expected the most idle spares in all (those for follow-ups too), a whole number "
            "from 0 to 64, found an integer (-1)",
            "write `maxIdle: 8`",
        ),
        (
            {"maxMemoryMb": "1GB"},
            "spares.maxMemoryMb",
            "expected the most MB of resident memory that idle spares hold in all, a whole "
            "number from 100 to 1000000, found a string ('1GB')",
            "write `maxMemoryMb: 2048`",
        ),
        (
            {"maxIdel": 2},
            "spares.maxIdel",
            "unknown cap 'maxIdel'",
            "the caps are maxIdle and maxMemoryMb",
        ),
    ],
)
def test_a_cap_that_is_not_one_is_refused_naming_the_field_and_the_fix(
    spares: object, field: str, problem: str, fix: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parsed(spares)

    error = caught.value
    assert (error.file, error.field, error.problem) == (str(FILE), field, problem)
    assert error.fix.startswith(fix)
