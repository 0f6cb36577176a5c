"""The environment is read once, when the settings are built: QUIZ_DATA_DIR among them."""

from pathlib import Path

import pytest

from quiz_servicekit.app import ServiceRuntime
from quiz_servicekit.settings import ServiceSettings


def test_data_dir_is_read_when_the_settings_are_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("QUIZ_DATA_DIR", str(tmp_path / "first"))
    settings = ServiceSettings()
    # Changed afterwards, the environment no longer reaches this service: it was read once.
    monkeypatch.setenv("QUIZ_DATA_DIR", str(tmp_path / "second"))
    runtime = ServiceRuntime(
        name="kit-data", version="0.1.0", description="d", settings=settings, needs_db=True
    )
    assert settings.data_dir == str(tmp_path / "first")
    expected = (tmp_path / "first").resolve() / "kit-data.db"
    assert runtime.resolve_database_url().endswith(str(expected))


def test_data_dir_defaults_to_dot_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUIZ_DATA_DIR", raising=False)
    assert ServiceSettings().data_dir == ".data"
