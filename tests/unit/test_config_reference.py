"""docs/configuration.md lists every setting both daemons accept, as scripts/gen_config_reference.py renders it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_reference", ROOT / "scripts" / "gen_config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_configuration_reference_is_fresh() -> None:
    fresh = _generator().render()
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == fresh, "docs/configuration.md is stale: run `python scripts/gen_config_reference.py` and commit"


def test_every_accepted_key_is_in_the_reference() -> None:
    gen = _generator()
    from sluicegate.agent import settings as agent
    from sluicegate.controller import settings as controller

    controller_keys = gen.known_keys(controller.load_settings, controller.SettingsError)
    agent_keys = gen.known_keys(agent.load_settings, agent.SettingsError)
    # The probe really reads the loaders' lists: a few keys each is known to accept.
    assert {"listen", "pkiDir", "podSecurity", "auditLog"} <= controller_keys
    assert {"controller", "dataDir", "podUsers", "restartBackoff"} <= agent_keys
    assert set(gen.CONTROLLER) == controller_keys
    assert set(gen.AGENT) == agent_keys
    text = (ROOT / "docs" / "configuration.md").read_text()
    for key in controller_keys | agent_keys:
        assert f"| `{key}` |" in text, key


def test_a_new_setting_without_a_row_fails_by_name() -> None:
    gen = _generator()
    with pytest.raises(SystemExit, match=r"undocumented \['newSetting'\]"):
        gen.check_table("controller", gen.CONTROLLER, {*gen.CONTROLLER, "newSetting"})


@pytest.mark.parametrize(("seconds", "text"), [(0.5, "`500ms`"), (40, "`40s`"), (300, "`5m`"), (86400, "`24h`"),
                                               (90, "`90s`"), (1.5, "`1.5s`"), (None, "(none)")])
def test_durations_read_as_in_the_settings_files(seconds: float | None, text: str) -> None:
    assert _generator().duration(seconds) == text
