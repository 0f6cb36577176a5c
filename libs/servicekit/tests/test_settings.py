"""The environment is read once, when the settings are built: QUIZ_DATA_DIR among them; a
refusal to start names the variable as it is set."""

from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from quiz_servicekit.app import ServiceRuntime
from quiz_servicekit.settings import ServiceSettings, refusal_reason


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


class _Refusing(BaseSettings):
    """Settings as a service writes them: a prefix, an alias beside the prefixed name."""

    model_config = SettingsConfigDict(env_prefix="KIT_", extra="ignore", populate_by_name=True)
    port: int = 0
    prices: dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("KIT_MODEL_PRICES", "MODEL_PRICES")
    )
    cap: float = Field(default=1.0, ge=0, validation_alias=AliasChoices("KIT_CAP", "CAP"))


def _refusal(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as refused:
        _Refusing()
    return refusal_reason(refused.value, _Refusing)


def test_a_variable_that_is_not_json_is_named_as_it_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _refusal(monkeypatch, MODEL_PRICES="nonsense").startswith(
        "MODEL_PRICES is not valid JSON (Expecting value"
    )


def test_each_invalid_variable_is_named_with_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _refusal(monkeypatch, KIT_PORT="eighty", CAP="-1") == (
        "KIT_PORT: Input should be a valid integer, unable to parse string as an integer "
        "(got 'eighty'); CAP: Input should be greater than or equal to 0 (got '-1')"
    )


def test_a_service_refusal_is_given_as_it_says() -> None:
    said = "no price for model(s) x: set MODEL_PRICES"
    assert refusal_reason(ValueError(said), _Refusing) == said
