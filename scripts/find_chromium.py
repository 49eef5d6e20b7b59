"""Print the path of a Chromium/Chrome binary for the browser tests, or explain how to install one (exit 1)."""
import os, shutil, sys

CANDIDATES = ('chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable')

def find_chromium() -> str | None:
    "The browser named by $CHROMIUM, else the first Chromium or Chrome on PATH."
    if os.environ.get('CHROMIUM'): return os.environ['CHROMIUM'] if os.access(os.environ['CHROMIUM'], os.X_OK) else None
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)

if __name__ == '__main__':
    path = find_chromium()
    if path: print(path)
    else:
        print("No Chromium found for the browser tests. Install it (Debian/Ubuntu: apt-get install chromium; "
              "macOS: brew install --cask chromium) or set CHROMIUM=/path/to/chrome.", file=sys.stderr)
        sys.exit(1)
