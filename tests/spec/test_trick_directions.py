"""A trick's `directions` are data: validated against its signature when the catalog loads."""

import pytest

from grpo_lab.spec.tricks import load_catalog
from grpo_lab.util.yamlio import ConfigError

ENTRY = "tricks:\n  t:\n    dimension: kl\n    settings: {kl: {beta: 0.1}}\n    description: d\n    signature: [kl/*]\n"


def test_directions_load_with_their_check(tmp_path):
    p = tmp_path / "tricks.yaml"
    p.write_text(ENTRY + "    directions: {kl/beta: {move: up, check: every_step}}\n")
    d = load_catalog(str(p))["t"].directions["kl/beta"]
    assert (d.move, d.check) == ("up", "every_step")


def test_a_direction_outside_the_signature_or_misspelt_is_an_error_with_its_line(tmp_path):
    p = tmp_path / "tricks.yaml"
    p.write_text(ENTRY + "    directions: {loss/total: {move: down, check: first_step}}\n")
    with pytest.raises(ConfigError, match=r"direction of 'loss/total': not a metric of the signature"):
        load_catalog(str(p))
    p.write_text(ENTRY + "    directions: {kl/beta: {move: sideways, check: every_step}}\n")
    with pytest.raises(ConfigError, match=rf"{p}:\d+: field 'directions.kl/beta.move'"):
        load_catalog(str(p))
