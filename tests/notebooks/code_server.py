"""The real code-server for the `ide: vscode` tests: `make code-server` installs it (`make test`
does), and a test that needs it fails, saying so, where it is missing."""
import pytest


def require_code_server() -> str:
    from apps.notebooks.commands import code_server_path

    binary = code_server_path()
    if binary is None:
        pytest.fail("The VS Code notebook tests need code-server: run `make code-server` "
                    "(docs/notebooks.md, 'VS Code').", pytrace=False)
    return binary
