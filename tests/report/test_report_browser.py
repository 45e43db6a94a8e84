"""Open the HTML report in headless Chromium: headings shown, images decoded, console clean.

Needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import SCREENSHOT_COPY, SECTION_IDS, needs_chromium

pytestmark = needs_chromium


def test_report_renders_in_chromium(driver, written: tuple[Path, Path],  # type: ignore[no-untyped-def]
                                    tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(written[0].resolve().as_uri())
    for section in SECTION_IDS:
        heading = driver.find_element(By.CSS_SELECTOR, f"section#{section} > h2")
        assert heading.is_displayed() and heading.text.strip(), section
    images = driver.find_elements(By.TAG_NAME, "img")
    assert len(images) == 7  # the forest, 2 curve + 2 length figures, the timeline, the heatmap
    for image in images:
        assert driver.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", image) > 0
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not severe, severe
    # A full-page screenshot: grow the window to the page height first.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(int(height) + 100, 16000))
    shot = tmp_path / "report_screenshot.png"
    assert driver.save_screenshot(str(shot))
    shutil.copyfile(shot, SCREENSHOT_COPY)
