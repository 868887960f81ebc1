"""
The start-up hook at the path that ``.pth`` files written before it moved to
`elmo_plugin.patches.startup_hook` run (an environment keeps its ``.pth`` until it reinstalls).
It runs that file by its path, as the ``.pth`` line does (importing the package here would import
AllenNLP in the middle of its own import), and never fails: without it, no repair.
"""
import os
import runpy

try:
    find_spec = runpy.run_path(
        os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "patches", "startup_hook.py")
    )["find_spec"]
except Exception:  # the hook never stops AllenNLP from importing

    def find_spec(name, path=None, target=None):  # type: ignore[no-untyped-def]
        return None
