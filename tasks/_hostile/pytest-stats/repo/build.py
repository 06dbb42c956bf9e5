"""The install step: writes stats/_version.py (as a package's build would)."""
import os

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "stats", "_version.py"), "w") as f:
    f.write('VERSION = "1.0"\n')
print("built stats 1.0")
