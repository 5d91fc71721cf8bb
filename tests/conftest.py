"""The suite's hooks; its fixtures are in ``helpers/fixtures.py`` (shared with
``lab/tests``)."""

import collections

pytest_plugins = ["helpers.fixtures"]


def pytest_collection_modifyitems(items):
  """Modules of slow tests only first, then the others with slow tests, each
  group with the most slow tests first; the order within a module is kept. The
  two workers take whole modules in this order (setup.cfg: --dist loadfile
  --no-loadscope-reorder), so the long modules start early and the quick ones
  even out the end."""
  tests, slow = collections.Counter(), collections.Counter()
  for item in items:
    tests[item.module.__name__] += 1
    slow[item.module.__name__] += bool(item.get_closest_marker("slow"))
  items.sort(key=lambda item: (slow[item.module.__name__] < tests[item.module.__name__],
                               -slow[item.module.__name__]))
