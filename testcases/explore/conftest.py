"""The explorer's tests take the implementations of the session's matrix (``--lw-override
implementation=...``), as the TCs do."""


def pytest_generate_tests(metafunc) -> None:
    if "explored_implementation" in metafunc.fixturenames:
        from harness.pytest_plugin import session_matrix

        metafunc.parametrize("explored_implementation", session_matrix(metafunc.config).implementations)
