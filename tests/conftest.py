import gc
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TINY_FAST = str(ROOT / "tests" / "data" / "tiny-fast.yaml")

# The CLI's console reads COLUMNS once, when grpo_lab.cli is imported; xdist's workers set it (80)
# and a shell may too: the CLI tests read its output as a pipe gives it (no COLUMNS).
os.environ.pop("COLUMNS", None)
# Warm-started tiny models are cached across test runs (CI sets its own folder).
os.environ.setdefault("GRPO_LAB_CACHE", str(ROOT / ".cache"))


def tiny_cfg(after: dict | None = None, **over):
    """A run config for a few fast steps on the small test model; `after` applies over its tricks."""
    from grpo_lab.spec.config import resolve

    base = {
        "model": TINY_FAST, "task": "math", "levels": 2, "steps": 4, "checkpoint_every": 2,
        "sampling": {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6},
        "eval": {"every": 2, "problems": 8, "samples": 2, "k": [1, 2]},
    }
    from grpo_lab.util.dicts import deep_merge

    return resolve(deep_merge(base, over), overrides=after)


@pytest.fixture
def make_cfg():
    return tiny_cfg


CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SECTION_IDS = ["recommend", "glance", "verdicts", "curves", "compute", "samples", "length", "stability",
               "interactions", "costs", "environment", "runs", "reproduce"]
SCREENSHOT_COPY = Path("/tmp/report_screenshot.png")

needs_chromium = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="headless browser check needs Chromium: apt-get install chromium chromium-driver")


@pytest.fixture
def driver():  # type: ignore[no-untyped-def]
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """A real PostgreSQL 16 server (pgserver's bundled binaries, a dev dependency), for the session."""
    pgserver = pytest.importorskip("pgserver", reason="the dev extra installs a bundled PostgreSQL (pgserver)")
    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield server
    server.cleanup()


@pytest.fixture(params=["sqlite", "postgresql"])
def registry_url(request, tmp_path):
    """The registry's SQLAlchemy URL on each backend a cluster user would point --db at; a fresh database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    server = request.getfixturevalue("postgres")
    name = f"t_{tmp_path.name.lower().replace('-', '_')[:40]}_{os.getpid()}"
    server.psql(f"CREATE DATABASE {name};")
    uri = server.get_uri(name)  # postgresql://postgres:@/NAME?host=SOCKET_DIR
    yield uri.replace("postgresql://", "postgresql+psycopg://", 1)
    gc.collect()  # sessions a test left open give their connections back while the server still runs
