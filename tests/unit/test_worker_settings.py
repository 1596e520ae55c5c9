"""``python -m gateway_runtime``'s settings: each bad one a clear error naming the setting,
never the token."""

from __future__ import annotations

import pytest

from gateway_runtime.__main__ import ConfigError, _parser, main, settings_from
from gateway_runtime.server.config import Limits
from gateway_runtime.server.worker import Bind

TOKEN = "pw_0123456789ab_abcdefghijklmnopqrstuvwxyz0123456789"


def settings(argv: list[str], env: dict[str, str] | None = None):
    args = _parser().parse_args(["--control-url", "http://127.0.0.1:8000", *argv])
    return settings_from(args, env if env is not None else {"GATEWAY_TOKEN": TOKEN})


def test_defaults_and_flags():
    made = settings(["--http-bind", "0.0.0.0:3128", "--socks-bind", "[::1]:1080"])
    assert made.http == Bind("0.0.0.0", 3128)
    assert made.socks == Bind("::1", 1080) and str(made.socks) == "[::1]:1080"
    assert made.metrics is None
    assert made.limits.deny_ports == frozenset({25, 465, 587})
    assert TOKEN not in repr(made)


def test_the_token_from_a_file(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    assert settings(["--token-file", str(path)], {}).token == TOKEN


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        ([], {}, "no worker token"),
        ([], {"GATEWAY_TOKEN": "two words"}, "spaces or control characters"),
        (["--token-file", "/nonexistent/token"], {}, "cannot read the token file"),
        (["--http-bind", "8899"], None, "host:port"),
        (["--http-bind", "127.0.0.1:70000"], None, "host:port"),
        (["--deny-ports", "25,x"], None, "whole port numbers"),
        (["--deny-ports", "0"], None, "TCP ports"),
        (["--max-connections", "0"], None, "max_connections"),
        (["--connect-timeout", "0"], None, "connect_timeout"),
    ],
)
def test_bad_settings_are_named(argv, env, says):
    with pytest.raises(ConfigError, match=says) as raised:
        settings(argv, env)
    assert TOKEN not in str(raised.value)


def test_a_control_url_is_required(capsys):
    assert main(["--http-bind", "127.0.0.1:0"]) == 2
    assert "--control-url" in capsys.readouterr().err


def test_limits_refuse_nonsense():
    with pytest.raises(ValueError, match="connect_attempts"):
        Limits(connect_attempts=0)
    with pytest.raises(ValueError, match="tunnel_idle_timeout"):
        Limits(tunnel_idle_timeout=-1)
