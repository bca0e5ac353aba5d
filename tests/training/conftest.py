from tests.tracking.conftest import token_client  # noqa: F401 - the run-token client fixture
