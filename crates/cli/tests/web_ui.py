"""The web UI in a real headless Chromium, driven over WebDriver (Selenium).

Run by tests/web.rs: python web_ui.py REWIND WORKSPACE URL SESSION [SCREENSHOT_DIR], with
REWIND_HOME set. WORKSPACE holds a scripted session SESSION (see web.rs): checkpoints msg-1 and
msg-2, an edit (call-1) and a shell command under msg-1, an edit under msg-2, and an external
edit. Checks, through the page only: the token leaves the address; the checkpoints and epochs
are shown; an epoch's diff (unified and side by side); "Rewind to here" on msg-1 with its
preview and confirmation, after which the files on disk are msg-1's; Undo, after which they
are back; an epoch made by another process (the command line) appearing without a reload; the
sandbox toggle in the status panel (cancel changes nothing, confirm turns the sandbox off and is
recorded as the web UI's change, a change made from the command line shows without a reload).
Prints OK at the end; any failure raises (exit 1) with what was expected.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

REWIND, ROOT, URL, SESSION = sys.argv[1:5]
SHOTS = sys.argv[5] if len(sys.argv) > 5 else None


def chromium(profile):
    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("REWIND_CHROMIUM", "/usr/bin/chromium")
    for a in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,860",
              "--force-device-scale-factor=1", "--lang=en-US"]:
        opts.add_argument(a)
    # The page keeps an event stream open: wait for the document, not for the network to
    # settle (the test then waits for the page to say it is ready).
    opts.page_load_strategy = "eager"
    service = Service(executable_path=os.environ.get("REWIND_CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(options=opts, service=service)


def read(rel):
    try:
        with open(os.path.join(ROOT, rel)) as f:
            return f.read()
    except FileNotFoundError:
        return None


def expect(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: expected {want!r}, got {got!r}")


def main():
    with tempfile.TemporaryDirectory() as profile:
        d = chromium(profile)
        # A condition that finds an element the page re-renders before it reads its text
        # meets a stale reference: read it again (the page is live; it re-renders on events).
        wait = WebDriverWait(d, 20, ignored_exceptions=[StaleElementReferenceException])
        try:
            run(d, wait)
        except Exception:
            print("page text at failure:\n" + d.find_element(By.TAG_NAME, "body").text[:4000])
            raise
        finally:
            d.quit()
    print("OK")


def rows_text(d):
    return d.find_element(By.ID, "timeline").text


def row(d, wait, text):
    """The timeline row whose first line contains `text` (among the rows drawn)."""
    xpath = (f"//div[@id='timeline']//div[contains(concat(' ', @class, ' '), ' row ')]"
             f"[.//div[@class='line1'][contains(., '{text}')]]")
    return wait.until(EC.presence_of_element_located((By.XPATH, xpath)))


def click_row(d, wait, text, inside=".main"):
    """Clicks `inside` the row of `text`; again if the rows were drawn anew meanwhile (paths
    arriving, an event), which replaces their elements."""
    for _ in range(10):
        try:
            row(d, wait, text).find_element(By.CSS_SELECTOR, inside).click()
            return
        except StaleElementReferenceException:
            time.sleep(0.1)
    raise AssertionError(f"the row of {text!r} kept being redrawn")


def shot(d, name):
    if SHOTS:
        d.save_screenshot(os.path.join(SHOTS, name))


def run(d, wait):
    # The address with the token: exchanged for a cookie, and gone from the address bar.
    d.get(URL)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    if "token=" in d.current_url:
        raise AssertionError(f"the token is still in the address: {d.current_url}")
    cookies = d.get_cookies()
    if not any(c.get("httpOnly") and c.get("sameSite") == "Strict" for c in cookies):
        raise AssertionError(f"no HttpOnly SameSite=Strict cookie: {cookies}")
    # This page stays loaded until the end: a reload would lose the marker.
    d.execute_script("window.__noReload = 42")

    # The session's checkpoints and epochs.
    wait.until(EC.text_to_be_present_in_element((By.ID, "session-title"), SESSION))
    for text in ["msg-1", "msg-2", "call-1", "external", "HEAD"]:
        wait.until(EC.text_to_be_present_in_element((By.ID, "timeline"), text))
    # Paths are filled in from `show` as rows come on screen.
    wait.until(EC.text_to_be_present_in_element((By.ID, "timeline"), "c.txt"))

    # An epoch's diff: edit call-1 turned "one" into "two" in a.txt.
    click_row(d, wait, "call-1")
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#detail .dfile[data-path='a.txt']")))
    dels = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#detail tr.del td.t")]
    adds = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#detail tr.add td.t")]
    expect("removed lines", dels, ["one"])
    expect("added lines", adds, ["two"])
    d.find_element(By.CSS_SELECTOR, "#detail [data-view='split']").click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#detail table.dlines.split")))
    shot(d, "diff.png")
    d.find_element(By.CSS_SELECTOR, "#detail [data-view='unified']").click()

    # The whole timeline (with a checkpoint selected: what a rewind to it would undo).
    click_row(d, wait, "msg-1")
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#detail .dfile")))
    shot(d, "timeline.png")

    # Rewind to msg-1: the preview first, nothing written yet.
    before = {p: read(p) for p in ["a.txt", "c.txt", "d.txt"]}
    click_row(d, wait, "msg-1", "[data-act='rewind']")
    plan = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#plan table")))
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "#actions [data-act='confirm']")))
    text = d.find_element(By.ID, "plan").text
    for want in ["a.txt", "c.txt", "modify", "delete"]:
        if want not in text:
            raise AssertionError(f"the preview does not mention {want!r}:\n{text}")
    if "d.txt" in text:
        raise AssertionError(f"the preview would touch the external edit d.txt:\n{text}")
    expect("files after the preview", {p: read(p) for p in before}, before)
    shot(d, "preview.png")
    del plan

    # Confirm: the files on disk are msg-1's again; the external edit stays.
    d.find_element(By.CSS_SELECTOR, "#actions [data-act='confirm']").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "dialog-title"), "Rewound"))
    expect("a.txt after the rewind", read("a.txt"), "one\n")
    expect("c.txt after the rewind", read("c.txt"), None)
    expect("d.txt after the rewind", read("d.txt"), before["d.txt"])

    # Undo brings them back.
    d.find_element(By.CSS_SELECTOR, "#dialog [data-act='undo']").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "dialog-title"), "Undone"))
    expect("files after undo", {p: read(p) for p in before}, before)
    d.find_element(By.CSS_SELECTOR, "#dialog [data-act='close']").click()

    # Another process records an epoch: it appears without a reload.
    subprocess.run([REWIND, "-C", ROOT, "-s", SESSION, "exec", "--tool", "live-tool",
                    "--tool-call", "call-from-cli", "--", "sh", "-c", "echo live > e.txt"],
                   check=True, env={**os.environ, "REWIND_QUIET": "1"})
    wait.until(EC.text_to_be_present_in_element((By.ID, "timeline"), "call-from-cli"))
    expect("page not reloaded", d.execute_script("return window.__noReload"), 42)

    # The sandbox toggle: the status panel shows the mode; turning the sandbox off asks first.
    wait.until(EC.text_to_be_present_in_element((By.ID, "sandbox-mode"), "workspace-write"))
    toggle = (By.CSS_SELECTOR, "#status [data-act='sandbox-toggle']")
    wait.until(EC.element_to_be_clickable(toggle)).click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "dialog-title"), "Turn the sandbox off?"))
    consequence = d.find_element(By.ID, "sandbox-consequence").text
    if "no sandbox at all" not in consequence:
        raise AssertionError(f"the question does not say what full access means: {consequence!r}")
    shot(d, "sandbox.png")
    d.find_element(By.CSS_SELECTOR, "#dialog [data-act='cancel']").click()
    expect("mode after cancel", sandbox_mode(), "workspace-write")
    expect("mode changes after cancel", mode_changes(), [])

    wait.until(EC.element_to_be_clickable(toggle)).click()
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "#dialog [data-act='confirm-sandbox']"))).click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "dialog-title"), "Sandbox mode: danger-full-access"))
    expect("mode after confirming", sandbox_mode(), "danger-full-access")
    expect("mode changes after confirming", mode_changes(), [(None, "danger-full-access", "web")])
    d.find_element(By.CSS_SELECTOR, "#dialog [data-act='close']").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "sandbox-mode"), "off (danger-full-access)"))

    # Turned back on from the command line: the page follows without a reload.
    subprocess.run([REWIND, "-C", ROOT, "-s", SESSION, "sandbox", "mode", "workspace-write"],
                   check=True, env={**os.environ, "REWIND_QUIET": "1"}, stdout=subprocess.DEVNULL)
    wait.until(lambda d: d.find_element(By.ID, "sandbox-mode").text == "workspace-write")
    expect("page not reloaded", d.execute_script("return window.__noReload"), 42)


def rewind_json(*args):
    out = subprocess.run([REWIND, "-C", ROOT, "--json", *args], check=True, capture_output=True,
                         env={**os.environ, "REWIND_QUIET": "1"})
    return json.loads(out.stdout)


def sandbox_mode():
    return rewind_json("sandbox", "mode")["workspace_mode"]


def mode_changes():
    """(previous, value, front) of each change of the sandbox mode in the op log, oldest first."""
    items = rewind_json("log", "--all-sessions")["items"]
    return [(e.get("previous"), e["value"], e.get("front")) for e in reversed(items) if e["type"] == "setting"]


if __name__ == "__main__":
    main()
