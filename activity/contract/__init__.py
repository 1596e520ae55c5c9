"""The activity pool's behaviour contract (ADR-005 "测试与验收"), reusable by any implementation.

A test suite plugs an implementation in by defining a pytest fixture named ``make_pool`` that
returns a :data:`PoolFactory`, and importing the test classes::

    # tests/activity/test_contract.py
    from activity.contract import *  # noqa: F403  (the Test* classes)

    # tests/activity/conftest.py
    @pytest.fixture(params=["memory", "redis"])
    def make_pool(request): ...

No test is rewritten for a new implementation; differences between backends are data in the
harness (how server time moves), never a skip inside a test.
"""

from activity.contract.assignable import TestAssignable, TestAssignableInput
from activity.contract.boundaries import (
    TestExtractBoundaries,
    TestHealthBoundaries,
    TestOwnershipBoundaries,
    TestSweepBoundaries,
    TestUpsertBoundaries,
)
from activity.contract.concurrency import TestConcurrency
from activity.contract.deadlines import TestDeadlines
from activity.contract.extract import (
    TestExtract,
    TestExtractInput,
    TestExtractReplay,
    TestExtractScan,
)
from activity.contract.extract_union import TestExtractAnyOf, TestExtractAnyOfInput
from activity.contract.extractable import TestExtractable
from activity.contract.generation import TestGeneration
from activity.contract.harness import PoolFactory, PoolHarness
from activity.contract.health import TestHealth, TestHealthInput
from activity.contract.input_caps import TestInputCaps
from activity.contract.inspection import TestBrowse, TestProxyDetail, TestWorkerSessions
from activity.contract.outcomes import TestOutcome, TestOutcomeInput
from activity.contract.ownership import TestOwnership, TestOwnershipInput
from activity.contract.passive import TestPassiveHealth, TestPassiveHealthInput
from activity.contract.quota import TestQuota, TestQuotaInput
from activity.contract.quota_bound import TestQuotaBound
from activity.contract.rechecks import TestRecheckInput, TestRechecks
from activity.contract.revision import TestHoldingsRevision, TestWorkerRevisionSession
from activity.contract.runtime import TestRuntimeInput, TestWorkerRuntime
from activity.contract.slots import TestSlots
from activity.contract.sweep import TestSweep
from activity.contract.upsert import TestUpsert, TestUpsertInput

__all__ = [
    "PoolFactory",
    "PoolHarness",
    "TestAssignable",
    "TestAssignableInput",
    "TestBrowse",
    "TestConcurrency",
    "TestDeadlines",
    "TestExtract",
    "TestExtractAnyOf",
    "TestExtractAnyOfInput",
    "TestExtractBoundaries",
    "TestExtractInput",
    "TestExtractReplay",
    "TestExtractScan",
    "TestExtractable",
    "TestGeneration",
    "TestHealth",
    "TestHealthBoundaries",
    "TestHealthInput",
    "TestHoldingsRevision",
    "TestInputCaps",
    "TestOutcome",
    "TestOutcomeInput",
    "TestOwnership",
    "TestOwnershipBoundaries",
    "TestOwnershipInput",
    "TestPassiveHealth",
    "TestPassiveHealthInput",
    "TestProxyDetail",
    "TestQuota",
    "TestQuotaBound",
    "TestQuotaInput",
    "TestRecheckInput",
    "TestRechecks",
    "TestRuntimeInput",
    "TestSlots",
    "TestSweep",
    "TestSweepBoundaries",
    "TestUpsert",
    "TestUpsertBoundaries",
    "TestUpsertInput",
    "TestWorkerRevisionSession",
    "TestWorkerRuntime",
    "TestWorkerSessions",
]
