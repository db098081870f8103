"""The hostile harness: every public entry point (``registry.REGISTRY``) attacked with hostile answers
(``answers.ANSWER_CASES``, through ``FakeVLLM.mutate`` and transient faults) and hostile inputs.

An attacked call may only give the right result (the same call's on a clean server), refuse a row (jobs), or
raise a typed error (``vt.VLLMTasksError`` or the entry's documented one) within ``run.TIME_LIMIT`` seconds.
The tests: tests/unit/test_hostile_registry.py (the registry covers the public surface),
tests/component/test_hostile_answers.py and tests/component/test_hostile_inputs.py.
"""

from . import registry  # noqa: F401  (first: the registry imports the modules that register into it)
