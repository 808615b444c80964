"""The fault suite: a harness that runs real nodes and Redis under faults and checks the
history of every call (docs/reliability.md). test_faults.py is its short tier in make test;
``make chaos`` (chaos.py) the long campaign."""
