"""Settings: defaults, a TOML file, BZZZ_* environment variables; errors name the setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bzzz.config import Settings, load_settings
from bzzz.errors import ConfigError

STALLED = {
    "name": "stalled",
    "conditions": [{"type": "no_progress", "threshold": True, "timeframe": 600}],
    "actions": [{"type": "notify_human"}],
}


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bzzz.toml"
    path.write_text(text)
    return path


def config_error(environ: dict[str, str], config_file: Path | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_file, environ=environ)
    message = caught.value.message
    assert "\n" not in message
    return message


def test_defaults_need_no_configuration() -> None:
    settings = load_settings(environ={})

    assert settings.node.data_dir == Path.home() / ".bzzz"
    assert settings.node.http_port == 7331
    assert settings.node.http_host == "127.0.0.1"
    assert settings.bzzz.network_id == "main"
    assert settings.bzzz.nats_url == []
    assert settings.openai.default_model == "gpt-5"
    assert settings.conversation.max_active_threads == 100
    assert settings.agents.max_agents == 100_000
    assert settings.logging.level == "INFO"
    assert settings.database_url() == f"sqlite+aiosqlite:///{Path.home() / '.bzzz' / 'bzzz.db'}"


def test_a_toml_file_sets_every_section(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
[node]
data_dir = "/srv/bzzz"
http_port = 8000

[bzzz]
network_id = "team"
nats_url = ["nats://a:4222", "nats://b:4222"]

[openai]
default_model = "gpt-4o"
temperature = 0.2

[cost]
daily_limit = 5.0

[conversation]
max_active_threads = 7

[agents]
max_agents = 50

[logging]
level = "debug"

[webhooks]
max_age = 60
""",
    )

    settings = load_settings(path, environ={})

    assert settings.node.data_dir == Path("/srv/bzzz")
    assert settings.node.http_port == 8000
    assert settings.bzzz.network_id == "team"
    assert settings.bzzz.nats_url == ["nats://a:4222", "nats://b:4222"]
    assert (settings.openai.default_model, settings.openai.temperature) == ("gpt-4o", 0.2)
    assert settings.cost.daily_limit == 5.0
    assert settings.conversation.max_active_threads == 7
    assert settings.agents.max_agents == 50
    assert settings.logging.level == "DEBUG"
    assert settings.webhooks.max_age == 60
    assert settings.database_url() == "sqlite+aiosqlite:////srv/bzzz/bzzz.db"


def test_bzzz_config_names_the_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, '[bzzz]\nnetwork_id = "from-file"\n')

    settings = load_settings(environ={"BZZZ_CONFIG": str(path)})

    assert settings.bzzz.network_id == "from-file"


def test_the_short_environment_names_set_the_common_settings() -> None:
    settings = load_settings(
        environ={
            "BZZZ_DATA_DIR": "/data/bzzz",
            "BZZZ_NATS_URL": "nats://n1:4222, nats://n2:4222,nats://n3:4222",
            "BZZZ_DATABASE_URL": "postgresql+asyncpg://bzzz:pw@db:5432/bzzz",
            "BZZZ_NETWORK_ID": "prod",
            "BZZZ_HTTP_PORT": "9000",
        }
    )

    assert settings.node.data_dir == Path("/data/bzzz")
    assert settings.bzzz.nats_url == ["nats://n1:4222", "nats://n2:4222", "nats://n3:4222"]
    assert settings.database_url() == "postgresql+asyncpg://bzzz:pw@db:5432/bzzz"
    assert settings.bzzz.network_id == "prod"
    assert settings.node.http_port == 9000


def test_section_and_key_environment_names_reach_every_setting() -> None:
    settings = load_settings(
        environ={
            "BZZZ_COST__DAILY_LIMIT": "2.5",
            "BZZZ_CONVERSATION__MAX_ACTIVE_THREADS": "3",
            "BZZZ_WEBHOOKS__INITIAL_BACKOFF": "0.5",
            "BZZZ_BZZZ__PUBSUB_TOPICS": json.dumps(["bzzz/coordination/v1"]),
            "BZZZ_CONVERSATION__ESCALATION_RULES": json.dumps([STALLED]),
        }
    )

    assert settings.cost.daily_limit == 2.5
    assert settings.conversation.max_active_threads == 3
    assert settings.webhooks.initial_backoff == 0.5
    assert settings.bzzz.pubsub_topics == ["bzzz/coordination/v1"]
    [rule] = settings.conversation.escalation_rules
    assert rule.name == "stalled"
    assert rule.conditions[0].type == "no_progress"


def test_the_environment_beats_the_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, '[bzzz]\nnetwork_id = "file"\n\n[node]\nhttp_port = 8000\n')

    settings = load_settings(
        path, environ={"BZZZ_NETWORK_ID": "env", "BZZZ_NODE__HTTP_PORT": "8001"}
    )

    assert settings.bzzz.network_id == "env"
    assert settings.node.http_port == 8001


def test_explicit_overrides_beat_the_environment() -> None:
    settings = load_settings(
        environ={"BZZZ_HTTP_PORT": "9000"}, overrides={"node": {"http_port": 9100}}
    )

    assert settings.node.http_port == 9100


def test_other_environment_variables_are_ignored() -> None:
    settings = load_settings(environ={"HOME": "/x", "BZZZ_TEST_PG_HOST": "db", "BZZZX": "1"})

    assert settings == load_settings(environ={})


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"BZZZ_HTTP_PORT": "abc"}, "BZZZ_HTTP_PORT"),
        ({"BZZZ_HTTP_PORT": "70000"}, "BZZZ_HTTP_PORT"),
        ({"BZZZ_NATS_URL": "http://n1:4222"}, "BZZZ_NATS_URL"),
        ({"BZZZ_DATABASE_URL": "mysql://db/bzzz"}, "BZZZ_DATABASE_URL"),
        ({"BZZZ_NETWORK_ID": "has spaces"}, "BZZZ_NETWORK_ID"),
        ({"BZZZ_LOG_LEVEL": "loud"}, "BZZZ_LOG_LEVEL"),
        ({"BZZZ_COST__DAILY_LIMIT": "-1"}, "BZZZ_COST__DAILY_LIMIT"),
        ({"BZZZ_NODE__NO_SUCH_KEY": "1"}, "BZZZ_NODE__NO_SUCH_KEY"),
        ({"BZZZ_NOSECTION__KEY": "1"}, "BZZZ_NOSECTION__KEY"),
    ],
)
def test_an_invalid_setting_is_one_line_naming_it(environ: dict[str, str], named: str) -> None:
    message = config_error(environ=environ)

    assert named in message
    assert message.startswith("invalid setting")


def test_an_invalid_setting_names_the_variable_that_was_set() -> None:
    assert "(BZZZ_NODE__HTTP_PORT)" in config_error(environ={"BZZZ_NODE__HTTP_PORT": "abc"})
    assert "(BZZZ_HTTP_PORT)" in config_error(environ={"BZZZ_HTTP_PORT": "abc"})


def test_an_invalid_file_setting_names_it(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[node]\nhttp_port = 'eighty'\n")

    message = config_error(config_file=path, environ={})

    assert "node.http_port" in message
    # Its true source: the file and the key, not a variable nobody set.
    assert f"({path}: [node] http_port)" in message
    assert "BZZZ_" not in message


def test_a_misspelt_file_key_is_named_with_its_file_and_a_suggestion(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[node]\nhttp_prot = 1\n")

    message = config_error(config_file=path, environ={})

    assert message == (
        f"invalid setting node.http_prot ({path}: [node] http_prot): "
        "Extra inputs are not permitted; did you mean http_port?"
    )


def test_a_misspelt_variable_is_named_with_a_suggestion() -> None:
    message = config_error(environ={"BZZZ_NODE__HTTP_PROT": "1"})

    assert message.startswith("invalid setting node.http_prot (BZZZ_NODE__HTTP_PROT)")
    assert message.endswith("did you mean http_port?")


def test_a_value_the_file_sets_but_the_environment_overrides_names_the_variable(
    tmp_path: Path,
) -> None:
    path = write_toml(tmp_path, "[node]\nhttp_port = 1\n")

    message = config_error(config_file=path, environ={"BZZZ_HTTP_PORT": "x"})

    assert "(BZZZ_HTTP_PORT)" in message


def test_unknown_short_variables_are_reported_with_the_nearest_setting() -> None:
    from bzzz.config import unknown_variables

    found = unknown_variables(
        {
            "BZZZ_DATADIR": "/x",
            "BZZZ_NATSURL": "nats://x",
            "BZZZ_PORT": "22007",
            "BZZZ_STREAM_REPLICAS": "3",
            "BZZZ_DATA_DIR": "/y",
            "BZZZ_ZZZ": "1",
        }
    )

    assert found == [
        "BZZZ_DATADIR is not a setting and is ignored; did you mean BZZZ_DATA_DIR?",
        "BZZZ_NATSURL is not a setting and is ignored; did you mean BZZZ_NATS_URL?",
        "BZZZ_PORT is not a setting and is ignored; did you mean BZZZ_HTTP_PORT?",
        # A setting without a short name is suggested by its section and key.
        "BZZZ_STREAM_REPLICAS is not a setting and is ignored; "
        "did you mean BZZZ_BZZZ__STREAM_REPLICAS?",
        "BZZZ_ZZZ is not a setting and is ignored",
    ]


def test_the_variables_of_the_projects_own_tools_are_not_reported() -> None:
    from bzzz.config import unknown_variables

    tools = {"BZZZ_TEST_PG_HOST": "db", "BZZZ_PUBLISH_ADDR": "0.0.0.0", "BZZZ_UI_SHOTS": "/s"}

    assert unknown_variables(tools | {"BZZZ_CONFIG": "/c.toml", "BZZZ_HTTP_PORT": "1"}) == []


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    message = config_error(config_file=tmp_path / "nope.toml", environ={})

    assert "nope.toml" in message
    assert "does not exist" in message


def test_a_config_file_that_is_not_toml_is_a_config_error(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[node\nhttp_port = 1\n")

    message = config_error(config_file=path, environ={})

    assert "not valid TOML" in message


def masked(**environ: str) -> str:
    settings: Settings = load_settings(environ=environ)
    return json.dumps(settings.masked())


def test_masked_hides_the_api_key_and_auth_tokens() -> None:
    shown = masked(BZZZ_OPENAI_API_KEY="sk-very-secret", BZZZ_AUTH_TOKENS="tok-one,tok-two")

    assert "sk-very-secret" not in shown
    assert "tok-one" not in shown and "tok-two" not in shown
    settings = json.loads(shown)
    assert settings["openai"]["api_key"] == "***"
    assert settings["node"]["auth_tokens"] == "***"


def test_masked_hides_the_database_password_but_keeps_the_rest() -> None:
    shown = json.loads(masked(BZZZ_DATABASE_URL="postgresql+asyncpg://bzzz:hunter2@db:5432/bzzz"))

    assert shown["node"]["database_url"] == "postgresql+asyncpg://bzzz:***@db:5432/bzzz"


def test_masked_hides_a_database_password_given_as_a_query_parameter() -> None:
    url = "postgresql+asyncpg://bzzz@db:5432/bzzz?password=hunter2&ssl=require"

    shown = masked(BZZZ_DATABASE_URL=url)

    assert "hunter2" not in shown
    assert "ssl=require" in shown


def test_masked_hides_credentials_in_nats_urls() -> None:
    shown = masked(BZZZ_NATS_URL="nats://user:s3cret@n1:4222,nats://t0ken@n2:4222,nats://n3:4222")

    assert "s3cret" not in shown
    assert "t0ken" not in shown
    assert json.loads(shown)["bzzz"]["nats_url"][2] == "nats://n3:4222"


def test_masked_leaves_settings_without_secrets_alone() -> None:
    shown = json.loads(masked(BZZZ_NETWORK_ID="team"))

    assert shown["bzzz"]["network_id"] == "team"
    assert shown["openai"]["api_key"] is None
    assert shown["node"]["auth_tokens"] == []
