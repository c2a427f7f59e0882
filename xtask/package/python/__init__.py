"""atlas-mcp-server: Atlas's MCP servers for docs and code.

The wheel installs the `atlas` and `atlas-pipeline` executables into the environment's
scripts folder; `atlas-mcp-server` (what `uvx atlas-mcp-server` runs) and
`python -m atlas_mcp_server` hand over to `atlas`.
"""

import os
import sys
import sysconfig


def _executable(name):
    exe = name + (".exe" if sys.platform == "win32" else "")
    folders = [os.path.dirname(os.path.abspath(sys.argv[0])), sysconfig.get_path("scripts")]
    try:
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for folder in folders:
        path = os.path.join(folder, exe)
        if os.path.isfile(path):
            return path
    sys.exit(f"atlas-mcp-server: error: {exe} is not installed beside this package; reinstall atlas-mcp-server")


def main():
    atlas = _executable("atlas")
    if sys.platform == "win32":
        import subprocess

        sys.exit(subprocess.call([atlas, *sys.argv[1:]]))
    os.execv(atlas, [atlas, *sys.argv[1:]])
