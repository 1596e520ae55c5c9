"""make run's launcher end to end: own servers, web + workers up, a readable terminal with the
full logs in files, Ctrl-C leaves nothing behind."""

import json
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from pool_admin.launcher import group_alive
from pool_admin.localservices import free_port

REPO = Path(__file__).resolve().parents[2]


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return None, ""


def uid_of(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def nobody_can_run_the_celery_app():
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import pool_admin.celery"],
            cwd=REPO,
            user="nobody",
            group=pwd.getpwnam("nobody").pw_gid,
            extra_groups=[],
            capture_output=True,
            timeout=60,
        )
    except PermissionError:
        return False
    return done.returncode == 0


def small_open_file_limit():
    # A real warning from a real child: a Celery worker logs one when its checks' sockets
    # would not fit under the hard limit (pool_admin/celery.py, room_for_connections).
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


CHILDREN = {
    "web (granian)": "web",
    "fetch worker": "fetch-worker",
    "check worker": "check-worker",
    "upkeep worker": "upkeep-worker",
    "celery beat": "celery-beat",
    "metrics consumer": "metrics-consumer",
    "gateway worker": "gateway-worker",
}
CELERY = ("fetch worker", "check worker", "upkeep worker", "celery beat")


def wait_for(lines, pattern, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, "".join(lines))
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {pattern!r} on the terminal in {timeout} s:\n{''.join(lines)}")


def pgid_of(pid):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError):
        return None


#: What the doctor must find well in a running make run (config and the metrics Redis warn there:
#: development secrets, no AOF).
DOCTOR_OK = {
    "postgres", "redis:pool", "redis:broker", "lua:pool", "lua:metrics", "clock",
    "celery:fetches", "celery:checks", "celery:celery", "beat", "metrics-consumer", "gateway",
    "alerts",
}  # fmt: skip


def doctor_passes(env: dict[str, str], within_s: float = 40) -> bool:
    """Whether ``manage.py doctor --json`` exits 0 with every ``DOCTOR_OK`` check ok within
    ``within_s`` (a worker just started has not reported yet); its last findings printed when
    it does not."""
    deadline = time.monotonic() + within_s
    while True:
        done = subprocess.run(
            [sys.executable, "manage.py", "doctor", "--json"],
            cwd=REPO, env={**env, "POOL_DEV": "1"}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        found = {c["name"]: c["status"] for c in json.loads(done.stdout)["checks"]}
        if done.returncode == 0 and all(found.get(name) == "ok" for name in DOCTOR_OK):
            return True
        if time.monotonic() > deadline:
            print(done.stdout, done.stderr)
            return False
        time.sleep(2)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_launcher_starts_everything_and_sigint_stops_everything():
    run_dir = Path(tempfile.mkdtemp(prefix="pp-launch-"))
    run_dir.chmod(0o755)  # the postgres OS user must reach run_dir/postgres
    web = f"127.0.0.1:{free_port()}"
    unset = ("METRICS_REDIS_URL", "CELERY_BROKER_URL", "DEMO_API_KEY", "RUN_USER")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(
        RUN_DIR=str(run_dir),
        WEB_BIND=web,
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",  # nothing answers: it starts its own
        DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/pool_admin",
        ADMIN_PASSWORD="Launcher-Test-Pass-1",
        RUN_STATUS_INTERVAL_S="2",
        # Free ports: another make run on the machine must not make this one fail.
        GATEWAY_BIND=f"127.0.0.1:{free_port()}",
        GATEWAY_SOCKS_BIND=f"127.0.0.1:{free_port()}",
        GATEWAY_METRICS_BIND=f"127.0.0.1:{free_port()}",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pool_admin.launcher"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=small_open_file_limit,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    groups: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            status, _ = get(f"http://{web}/readyz")
            if status == 200:
                break
            time.sleep(0.5)
        assert status == 200, "".join(lines)
        # The launcher starts the gateway worker, then prints the banner, once it sees /healthz:
        # maybe after this test saw /readyz.
        wait_for(lines, r"gateway    curl -x .+\n", 20)
        status, html = get(f"http://{web}/admin/login/")
        assert status == 200 and "Proxy Pool" in html
        assert get(f"http://{web}/static/admin/css/base.css")[0] == 200  # whitenoise

        started = dict(re.findall(r"started (.+?) pid=(\d+)", "".join(lines)))
        assert {"redis-server", "postgres", *CHILDREN} <= set(started)
        groups = {g for g in (pgid_of(int(pid)) for pid in started.values()) if g}

        # One line per child as it starts, with its log file, which holds its output.
        logs = run_dir / "logs"
        starts = re.findall(
            r"launcher: started (.+?) pid=\d+(?: user=\S+)? log=(\S+)\n", "".join(lines)
        )
        assert sorted(starts) == sorted(
            (name, str(logs / f"{slug}.log")) for name, slug in CHILDREN.items()
        )
        # The banner: the admin, and an extract and a gateway curl with the demo key generated now.
        output = "".join(lines)
        assert (
            f"admin      http://{web}/admin/   user admin, password from ADMIN_PASSWORD" in output
        )
        key = re.search(
            r'extract    curl -s -H "Authorization: Bearer (pp_[\w-]+)" .+ http://\S+/api/v1/extract\n',
            output,
        )[1]
        assert (
            f'gateway    curl -x http://{env["GATEWAY_BIND"]} --proxy-user "demo:{key}" http://{web}/healthz'
            in output
        )
        # Shown as soon as it was made too, before anything can stop the run short of a banner.
        shown = f"launcher: ensure_demo generated the demo client's key: {key} (store it now)\n"
        assert output.index(shown) < output.index("launcher: started web")
        doctor_line = re.search(r"doctor     POOL_DEV=1 \S+ manage.py doctor(.*)\n", output)
        assert doctor_line and "DATABASE_URL, REDIS_URL" in doctor_line[1], output
        inventory = urllib.request.Request(
            f"http://{web}/api/v1/inventory", headers={"Authorization": f"Bearer {key}"}
        )
        with urllib.request.urlopen(inventory, timeout=5) as response:
            assert response.status == 200
        # After it: a child's warning, prefixed with its name, and the status line.
        wait_for(lines, r"\nfetch worker: .*WARNING.*open files limited to 1024", 20)
        wait_for(
            lines, r"\nstatus: pool \d+ proxies, \d+ not extracted \| extract calls \S+/min", 10
        )

        # Celery runs unprivileged when the launcher is root, unless its interpreter is out of
        # the unprivileged user's reach (then it says so, once).
        uids = {name: uid_of(int(started[name])) for name in CELERY}
        if os.geteuid() == 0:
            falls_back = "warning: Celery runs as root: user nobody cannot import" in output
            assert falls_back == (not nobody_can_run_the_celery_app()), output
            expected = 0 if falls_back else pwd.getpwnam("nobody").pw_uid
            assert uids == dict.fromkeys(CELERY, expected)
            assert output.count("Celery runs as root") == int(falls_back)
        else:
            assert uids == dict.fromkeys(CELERY, os.geteuid())

        # The doctor finds nothing failing in a running make run (a worker, beat, the consumer
        # and the gateway worker each leave their first trace within seconds of the banner).
        assert doctor_passes(env), "".join(lines)

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=45) == 0
        reader.join(timeout=5)
        output = "".join(lines)
        assert "all stopped" in output
        assert not [g for g in groups if group_alive(g)], output
        assert "Launcher-Test-Pass-1" not in output
        # The gateway worker starts once the web server answers, so it never finds it away.
        assert "control plane: unreachable" not in output
        # Neither Celery's banner nor its line per task on the terminal; both in its logs.
        for noise in ("-------------- fetches@", "[tasks]", "Task pool_admin.", "succeeded in"):
            assert noise not in output
        fetch_log = (logs / "fetch-worker.log").read_text()
        assert "-------------- fetches@" in fetch_log and "[tasks]" in fetch_log
        assert "Task pool_admin." in (logs / "upkeep-worker.log").read_text()
        assert "Listening at" in (logs / "web.log").read_text()
        # No secret in any log file: neither the password given nor the key generated.
        written = {path.name: path.read_text(errors="replace") for path in logs.iterdir()}
        assert {"setup.log", *(f"{slug}.log" for slug in CHILDREN.values())} <= set(written)
        for name, text in written.items():
            assert "Launcher-Test-Pass-1" not in text and key not in text, name
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for group in groups:  # a failed run must not leave servers behind either
            if group_alive(group):
                os.killpg(group, signal.SIGKILL)
        if proc.stdout:
            proc.stdout.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def test_fetches_and_upkeep_run_on_workers_of_their_own():
    """A vendor call holds its fetch's thread up to its deadline: fetches go to the fetch
    worker's queue, a thread each; dispatches, rechecks, sweeps and ownership expiry to the
    upkeep worker's, so no fetch delays them (issue 22)."""
    from django.conf import settings

    from pool_admin.celery import app
    from pool_admin.launcher import child_commands

    def queue_of(task: str) -> str:
        return app.amqp.router.route({}, task, args=(), kwargs={})["queue"].name

    assert queue_of("pool_admin.fetch_upstream") == settings.FETCH_QUEUE
    assert queue_of("pool_admin.check_upstream") == settings.CHECK_QUEUE
    upkeep = ("dispatch_fetches", "dispatch_checks", "sweep_pool", "expire_ownership",
              "heartbeat", "keep_usage_bounded")  # fmt: skip
    for task in upkeep:
        assert queue_of(f"pool_admin.{task}") == settings.CELERY_TASK_DEFAULT_QUEUE
    assert (
        len({settings.FETCH_QUEUE, settings.CHECK_QUEUE, settings.CELERY_TASK_DEFAULT_QUEUE}) == 3
    )
    commands = dict(child_commands("127.0.0.1:8000"))

    def option(argv: list[str], name: str) -> str:
        return argv[argv.index(name) + 1]

    fetch, upkeep_worker = commands["fetch worker"], commands["upkeep worker"]
    assert (option(fetch, "-Q"), option(fetch, "--pool")) == (settings.FETCH_QUEUE, "threads")
    assert option(fetch, "--concurrency") == str(settings.FETCH_WORKER_THREADS)
    assert option(upkeep_worker, "-Q") == settings.CELERY_TASK_DEFAULT_QUEUE
    assert option(upkeep_worker, "--pool") == "threads"
    check_worker = commands["check worker"]
    assert (option(check_worker, "-Q"), option(check_worker, "--pool")) == ("checks", "threads")


def test_a_worker_raises_its_open_file_limit_to_what_its_checks_need():
    """32 threads of 200 checks each need thousands of sockets: the soft limit is raised (up
    to the hard one), and a hard limit below the need is said."""
    import resource

    from pool_admin.celery import room_for_connections

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        assert room_for_connections(512) == 512 == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_failed_setup_step_shows_the_end_of_its_log(tmp_path):
    """The step's output is in setup.log; its failure brings the log's last lines to the
    terminal (bounded), so the error is seen without opening the file."""
    from pool_admin.run_setup import LaunchError, manage

    log = tmp_path / "logs" / "setup.log"
    with pytest.raises(LaunchError) as failed:
        manage("ensure_demo", "--base-url", "ftp://nowhere", log_path=log)
    message = str(failed.value)
    assert message.startswith(f"manage.py ensure_demo failed with exit 1; the end of {log}:\n")
    assert (
        "    CommandError: --base-url must be http(s)://host:port, got 'ftp://nowhere'" in message
    )
    assert "--base-url must be" in log.read_text()
    assert len(message.splitlines()) <= 31


def test_a_bad_status_interval_stops_the_launcher_before_it_starts_anything(tmp_path):
    env = {**os.environ, "RUN_DIR": str(tmp_path / "run"), "RUN_STATUS_INTERVAL_S": "soon"}
    done = subprocess.run(
        [sys.executable, "-m", "pool_admin.launcher"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "RUN_STATUS_INTERVAL_S must be" in done.stdout, done.stdout + done.stderr
    assert not (tmp_path / "run").exists()
