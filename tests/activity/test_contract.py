"""The activity contract suite, run against every implementation in conftest.FACTORIES."""

from activity.contract import *  # noqa: F403 - the Test* classes are the suite
