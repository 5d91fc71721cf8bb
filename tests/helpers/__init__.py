"""What several test modules share that is not a fixture: script text for child
processes, patterns of log lines, small objects to test against. Test modules
import from here (``from helpers.X import ...``; tests/ is on ``sys.path`` as
pytest's rootdir-conftest folder), never from one another."""
