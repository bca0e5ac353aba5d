import subprocess
import sys


def test_import_cairn_is_light():
    """Jobs import cairn at start-up: no Django, and no HTTP stack until the client is used."""
    code = (
        "import sys, cairn\n"
        "assert 'django' not in sys.modules\n"
        "assert 'requests' not in sys.modules and 'rich' not in sys.modules\n"
        "cairn.Client\n"
        "assert 'requests' in sys.modules and 'django' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
