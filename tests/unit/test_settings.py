"""Settings: one validation for serve and for group configs, precedence flags > environment >
config file > defaults, and errors that name where the bad value came from."""

from __future__ import annotations

import tomllib

import pytest

from shareproxy.core import group_config as gc
from shareproxy.core.group_settings import GroupSettings
from shareproxy.settings import loader, model
from shareproxy.settings.problems import SettingsInvalid as Refused

PROBES = {
    "int": [
        -1, 0, 1, 2, 10, 11, 99, 100, 500, 999, 1000, 2000, 45_000, 100_000, 100_001,
        300_000, 300_001, 1_800_000, 1_800_001, 3_600_000, 3_600_001,
    ],
    "string": [
        "earliest", "latest", "yesterday", "by_duration:PT1H", "by_duration:forever",
        "read_committed", "read_uncommitted", "dirty",
    ],
    "boolean": [True, False],
    "double": [-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 10.0, 10.5, float("nan"), float("inf")],
}  # fmt: skip


@pytest.fixture(autouse=True)
def no_shareproxy_environment(monkeypatch):
    for name in [k for k in __import__("os").environ if k.upper().startswith("SHAREPROXY_")]:
        monkeypatch.delenv(name)


@pytest.mark.parametrize(("setting", "name"), sorted(model.GROUP_DEFAULTS.items()))
def test_serve_takes_exactly_the_values_a_group_config_takes(setting, name):
    defaults = GroupSettings().as_configs()
    kind = gc.DEFINITIONS[name].kind
    for value in PROBES[kind]:
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        try:
            gc.validate({name: text}, {}, defaults)
            group_ok = True
        except gc.GroupConfigError:
            group_ok = False
        try:
            loader.load({setting: value})
            serve_ok = True
        except Refused as exc:
            serve_ok = False
            assert str(exc).startswith(f"--{setting.replace('_', '-')} {value}: "), exc
        assert serve_ok == group_ok, (setting, value)


def test_serve_defaults_are_the_group_configs_defaults():
    assert loader.load().group_configs() == {n: d.default for n, d in gc.DEFINITIONS.items()}
    assert set(model.GROUP_DEFAULTS.values()) == set(gc.DEFINITIONS)


def test_a_heartbeat_interval_not_below_the_session_timeout_is_refused_as_in_group_configs():
    wide = {"group_share_max_heartbeat_interval_ms": 60_000}
    with pytest.raises(Refused, match=r"^--heartbeat-interval-ms 50000: must be below"):
        loader.load({"heartbeat_interval_ms": 50_000, **wide})
    assert loader.load({"heartbeat_interval_ms": 50_000, "session_timeout_ms": 60_000, **wide})


def test_a_longest_back_off_below_the_initial_one_is_refused_naming_the_one_given():
    with pytest.raises(Refused, match=r"^--redelivery-backoff-max-ms 500: must not be below"):
        loader.load({"redelivery_backoff_max_ms": 500, "redelivery_backoff_initial_ms": 1000})
    with pytest.raises(Refused, match=r"^--redelivery-backoff-initial-ms 90000: .* above"):
        loader.load({"redelivery_backoff_initial_ms": 90_000})
    loaded = loader.load({"redelivery_backoff_initial_ms": 500, "redelivery_backoff_multiplier": 3})
    assert loaded.group_configs()[gc.BACKOFF_MULTIPLIER] == "3.0"
    with pytest.raises(gc.GroupConfigError, match="must not be below"):
        gc.validate({gc.BACKOFF_INITIAL: "90000"}, {}, GroupSettings().as_configs())


def test_group_defaults_lie_within_kafkas_bounds_which_the_operator_may_move():
    with pytest.raises(Refused, match=r"^--record-lock-duration-ms 1000: .*min.record.lock"):
        loader.load({"record_lock_duration_ms": 1000})
    moved = {"record_lock_duration_ms": 1000, "group_share_min_record_lock_duration_ms": 1000}
    assert loader.load(moved).group_bounds().min_record_lock_duration_ms == 1000
    with pytest.raises(Refused, match=r"^--group-share-min-session-timeout-ms 70000: .*above"):
        loader.load({"group_share_min_session_timeout_ms": 70_000})
    with pytest.raises(Refused, match=r"^--group-share-max-record-lock-duration-ms 10: "):
        loader.load({"group_share_max_record_lock_duration_ms": 10})  # Kafka's own range


@pytest.mark.parametrize(
    ("setting", "kafka_default", "low", "high"),
    [
        ("group_share_max_size", 200, 10, 1000),  # GroupCoordinatorConfig: between(10, 1000)
        ("group_share_max_share_sessions", 2000, 1, None),  # ShareGroupConfig: atLeast(1)
    ],
)
def test_kafkas_share_group_limits_keep_their_names_defaults_and_ranges(
    setting, kafka_default, low, high
):
    assert model.Settings.model_fields[setting].default == kafka_default
    flag = "--" + setting.replace("_", "-")
    assert getattr(loader.load({setting: low}), setting) == low
    with pytest.raises(Refused, match=f"^{flag} {low - 1}: "):
        loader.load({setting: low - 1})
    if high is not None:
        assert getattr(loader.load({setting: high}), setting) == high
        with pytest.raises(Refused, match=f"^{flag} {high + 1}: "):
            loader.load({setting: high + 1})


def test_flags_beat_environment_beat_file_beat_defaults(tmp_path, monkeypatch):
    toml = tmp_path / "proxy.toml"
    toml.write_text('delivery_count_limit = 7\nlisten = "127.0.0.1:1111"\nnode_id = 9\n')
    monkeypatch.setenv("SHAREPROXY_DELIVERY_COUNT_LIMIT", "4")
    monkeypatch.setenv("SHAREPROXY_LISTEN", "127.0.0.1:2222")
    s = loader.load({"delivery_count_limit": 3}, toml)
    assert s.delivery_count_limit == 3  # flag over environment and file
    assert s.listen == "127.0.0.1:2222"  # environment over file
    assert s.node_id == 9  # file over default
    assert s.state_url == model.DEFAULT_STATE_URL  # default


def test_yaml_files_are_read_too_and_unset_flags_do_not_override(tmp_path):
    yaml = tmp_path / "proxy.yaml"
    yaml.write_text("delivery_count_limit: 6\nauto_migrate: false\nlog_level: debug\n")
    s = loader.load({"delivery_count_limit": None}, yaml)
    assert (s.delivery_count_limit, s.auto_migrate, s.log_level) == (6, False, "DEBUG")


# the range a node with Kafka's default bounds accepts, and the settings that move it
DELIVERY_RANGE = (
    "[2, 10] (group.share.min.delivery.count.limit, group.share.max.delivery.count.limit)"
)


@pytest.mark.parametrize(
    ("setting", "flags", "named"),
    [
        ("delivery_count_limit", {}, (2, 10)),
        ("record_lock_duration_ms", {}, (15_000, 60_000)),
        (
            "record_lock_duration_ms",
            {"group_share_min_record_lock_duration_ms": 1000},
            (1000, 60_000),
        ),
        ("session_timeout_ms", {"group_share_max_session_timeout_ms": 10**9}, (45_000, 1_800_000)),
        ("heartbeat_interval_ms", {"group_share_min_heartbeat_interval_ms": 1}, (100, 15_000)),
    ],
)
def test_a_value_out_of_range_names_the_one_range_that_accepts_it(setting, flags, named):
    """Whether past Kafka's hard range or only the node's bounds, a refusal names the range in
    force (the bounds clipped to the hard range), and each end of it is then accepted."""
    low, high = named
    for wrong in (low - 1, high + 1, 10**10):
        with pytest.raises(Refused, match=rf"{wrong} is outside \[{low}, {high}\] \("):
            loader.load({**flags, setting: wrong})
    for fine in (low, high):
        assert getattr(loader.load({**flags, setting: fine}), setting) == fine


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("flag", f"--delivery-count-limit 50: 50 is outside {DELIVERY_RANGE}"),
        ("env", f"SHAREPROXY_DELIVERY_COUNT_LIMIT=50: 50 is outside {DELIVERY_RANGE}"),
        ("file", f"delivery_count_limit = 50 in {{file}}: 50 is outside {DELIVERY_RANGE}"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_source(where, expected, tmp_path, monkeypatch):
    toml = tmp_path / "proxy.toml"
    toml.write_text("delivery_count_limit = 50\n" if where == "file" else "")
    if where == "env":
        monkeypatch.setenv("SHAREPROXY_DELIVERY_COUNT_LIMIT", "50")
    flags = {"delivery_count_limit": 50} if where == "flag" else {}
    with pytest.raises(Refused) as caught:
        loader.load(flags, toml)
    assert str(caught.value) == expected.format(file=toml)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("proxy.toml", "bogus = 1\n", "unknown setting 'bogus' in {file}"),
        ("proxy.toml", "listen = \n", "--config {file}: not valid TOML: Invalid value"),
        ("proxy.yaml", "listen: [\n", "--config {file}: not valid YAML: "),
        ("proxy.ini", "listen=x\n", "--config {file}: use a .toml, .yaml or .yml file"),
        ("missing.toml", None, "--config {file}: no such file"),
    ],
)
def test_config_file_mistakes_name_the_file(name, content, expected, tmp_path):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(Refused) as caught:
        loader.load({}, path)
    assert str(caught.value).startswith(expected.format(file=path)), caught.value
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"auto_offset_reset": "yesterday"}, "--auto-offset-reset yesterday: "),
        ({"log_format": "xml"}, "--log-format xml: "),
        ({"listen": "nowhere"}, "--listen nowhere: 'nowhere' is not HOST:PORT"),
        ({"ssl_certfile": "/no/such.pem"}, "--ssl-certfile /no/such.pem: no such file"),
        ({"listeners": "SSL://127.0.0.1:0"}, "--listeners SSL://127.0.0.1:0: "),
        ({"state_url": "mysql://h/db"}, "--state-url mysql://h/db: unsupported state store"),
        ({"upstream_security_protocol": "SASL_SSL"}, "--upstream-security-protocol SASL_SSL: "),
        ({"sasl_enabled_mechanisms": "GSSAPI"}, "--sasl-enabled-mechanisms GSSAPI: unknown"),
        ({"node_id": "one"}, "--node-id one: "),
    ],
)
def test_bad_flags_are_one_line_naming_flag_and_value(flags, expected):
    with pytest.raises(Refused) as caught:
        loader.load(flags)
    assert str(caught.value).startswith(expected), caught.value
    assert "\n" not in str(caught.value)


def test_every_setting_is_documented_and_print_config_reads_back(tmp_path, monkeypatch):
    assert all(f.description for f in model.Settings.model_fields.values())
    monkeypatch.setenv("SHAREPROXY_UPSTREAM_SASL_PASSWORD", "never-Shown-1")
    s = loader.load({"node_id": 7, "listeners": "PLAINTEXT://127.0.0.1:0", "fail_fast": True})
    text = loader.render(s)
    assert "never-Shown-1" not in text
    assert set(tomllib.loads(text)) <= set(model.Settings.model_fields)
    path = tmp_path / "printed.toml"
    path.write_text(text)
    again = loader.load({}, path)
    assert again.model_dump() == s.model_dump()
    assert again.upstream_sasl_password == s.upstream_sasl_password  # read from the variable
    monkeypatch.delenv("SHAREPROXY_UPSTREAM_SASL_PASSWORD")
    with pytest.raises(Refused, match=r"names \$\{SHAREPROXY_UPSTREAM_SASL_PASS"):
        loader.load({}, path)
