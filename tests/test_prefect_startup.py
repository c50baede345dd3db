"""Issue 10.11: a release killed while Prefect starts its temporary API server leaves no
orphaned server behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from prefect_server import alive, uvicorn_children  # noqa: E402


@pytest.mark.prefect
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_kill_during_prefect_start_up_leaves_no_server(tmp_path, toy_contract, toy_parquet):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PYTHONPATH=str(ROOT), PREFECT_HOME=str(tmp_path / "prefect-home"),
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120")
    cli = subprocess.Popen(
        [sys.executable, "-m", "privfair.cli", "release", "--contract", str(toy_contract),
         "--data", str(toy_parquet), "--epsilon", "1", "--delta", "1e-9",
         "--out", str(tmp_path / "releases"), "--work-dir", str(tmp_path / "w")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while not servers and time.monotonic() < deadline and cli.poll() is None:
            time.sleep(0.05)
            servers = uvicorn_children(cli.pid)
        assert servers, "the CLI started no temporary Prefect server"
    finally:
        cli.send_signal(signal.SIGKILL)
        cli.wait()
    deadline = time.monotonic() + 15
    while any(alive(p) for p in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftover = [p for p in servers if alive(p)]
    for p in leftover:  # do not leave it running whatever the outcome
        os.kill(p, signal.SIGKILL)
    assert leftover == []


@pytest.mark.prefect
def test_prefect_data_stage_refusal_prints_one_line(tmp_path, toy_contract, toy_frame):
    """Issue 10.11: through Prefect (the default path) with Prefect's default INFO logging, a
    data-stage refusal prints exactly one line, no traceback (at 613a631: 49-94 lines)."""
    bad = tmp_path / "bad.parquet"
    toy_frame.drop(columns=["race"]).to_parquet(bad, index=False)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_API", "PREFECT_LOGGING"))}
    env.update(PYTHONPATH=str(ROOT), PREFECT_HOME=str(tmp_path / "prefect-home"))
    proc = subprocess.run(
        [sys.executable, "-m", "privfair.cli", "release", "--contract", str(toy_contract),
         "--data", str(bad), "--epsilon", "1", "--delta", "1e-9",
         "--out", str(tmp_path / "releases"), "--work-dir", str(tmp_path / "w")],
        env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"privfair: error: data file {bad}: missing column(s) ['race'] declared by contract "
        "'toy'"]
    assert proc.stdout == "" and not (tmp_path / "releases").exists()


def test_cli_import_loads_only_the_standard_library():
    """Issue 15: ``import privfair.cli`` (and the lazy package) loads no numpy, pandas or
    Prefect, so ``privfair release`` starts the temporary API server before they load."""
    code = ("import sys, privfair, privfair.cli\n"
            "print(sorted(m for m in ('numpy', 'pandas', 'prefect', 'pydantic') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "[]"


def test_lazy_package_exports_are_the_defining_modules_objects():
    import importlib

    import privfair

    assert sorted(privfair.__all__) == sorted(privfair._EXPORTS)
    for name in privfair.__all__:
        module = importlib.import_module(privfair._EXPORTS[name])
        assert getattr(privfair, name) is getattr(module, name)
    from privfair import FairSynthesizer, synthesize  # from-imports resolve too

    assert synthesize.__module__ == FairSynthesizer.__module__ == "privfair.synth.synthesizer"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        privfair.nope  # noqa: B018


def test_an_api_configured_in_the_environment_or_active_profile_gets_no_temporary_server(
        tmp_path, monkeypatch):
    """The operator's server (``PREFECT_API_URL`` set or ``prefect config set`` in the active
    profile) is used as it is: ``privfair release`` starts no server of its own."""
    from flows import temporary_server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILES_PATH", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    assert temporary_server.configured_api_url() is None  # no profiles file
    (tmp_path / "profiles.toml").write_text(
        'active = "ops"\n'
        '[profiles.ops]\nPREFECT_API_URL = "http://ops:4200/api"\n'
        '[profiles.other]\nPREFECT_LOGGING_LEVEL = "INFO"\n')
    assert temporary_server.configured_api_url() == "http://ops:4200/api"
    monkeypatch.setenv("PREFECT_PROFILE", "other")
    assert temporary_server.configured_api_url() is None
    monkeypatch.setenv("PREFECT_API_URL", "http://env:4200/api")
    assert temporary_server.configured_api_url() == "http://env:4200/api"
    assert temporary_server.start() is None


# --- a temporary server slow to start (issue 45.3) ------------------------------------------


def test_a_server_that_never_answers_ends_in_one_stated_line(monkeypatch, capsys):
    """The temporary server's wait is bounded by a stated timeout, says what it waits for,
    and ends in one line naming the setting and the fixes (simulated: a process that never
    listens, on a port nobody serves)."""
    from flows import temporary_server as temporary

    assert temporary.DEFAULT_STARTUP_TIMEOUT_S >= 120  # Prefect's 20 s timed out at load 8
    monkeypatch.setattr(temporary, "SAY_WAIT_AFTER_S", 0.2)
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = temporary.TemporaryServer(silent, f"http://127.0.0.1:{port}/api",
                                       __import__("tempfile").TemporaryFile())
    started = time.monotonic()
    with pytest.raises(temporary.ServerStartError) as failed:
        server.wait(timeout=1.0)
    assert 1.0 <= time.monotonic() - started < 10
    assert silent.poll() is not None  # stopped, not left behind
    line = str(failed.value)
    assert "did not answer within 1 s" in line and temporary.STARTUP_TIMEOUT_SETTING in line
    assert "--no-prefect" in line and "\n" not in line
    assert "waiting for the temporary Prefect API server to start (up to 1 s" in \
        capsys.readouterr().err


@pytest.mark.parametrize("source", ["ours", "prefect"])
def test_a_server_start_timeout_is_one_clear_line_not_an_internal_error(source, monkeypatch,
                                                                       capsys):
    """``privfair evaluate`` under load ended with ``internal error: RuntimeError: Timed out
    while attempting to connect to ephemeral Prefect API server`` (and the server's output):
    the failure, raised where the command runs its flow (simulated), is one line that names
    the stated timeout and the fixes."""
    from flows import temporary_server as temporary
    from privfair import cli

    monkeypatch.delenv(temporary.STARTUP_TIMEOUT_SETTING, raising=False)

    def slow_server(args):
        bound = temporary.startup_timeout_s()
        if source == "ours":
            raise temporary.ServerStartError(
                f"the temporary Prefect API server did not answer within {bound:g} s")
        try:  # what Prefect's own server raises, wrapped as a flow engine may wrap it
            raise RuntimeError(f"{temporary.PREFECT_STARTUP_TIMEOUT}. stderr: b'INFO:\\n"
                               "Started server process [123]\\nWaiting for application'")
        except RuntimeError as exc:
            raise ValueError("could not create the flow run") from exc

    monkeypatch.setattr(cli, "cmd_store_check", slow_server)
    code = cli.main(["store", "check", "--out", "somewhere"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "internal error" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("privfair: error: the temporary Prefect API server did not answer "
                          "within 120 s"), err
    assert "--no-prefect" in err or source == "ours"
    assert os.environ[temporary.STARTUP_TIMEOUT_SETTING] == "120"
