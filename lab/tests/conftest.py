"""The lab's tests use the library tests' fixtures (``tests/helpers/fixtures.py``)."""

pytest_plugins = ["helpers.fixtures"]
