"""The doctor on a Sentinel-managed Redis (tests/harness/sentinel.py: a primary, a replica and
three Sentinels, quorum 2): what it says as the deployment loses its replica, then its
Sentinels one by one."""

from __future__ import annotations

import pytest

from pool_admin.doctor import stores
from pool_admin.doctor.findings import Status
from tests.harness.metrics import wait_until
from tests.harness.sentinel import SentinelDeployment

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_sentinels_answering_then_the_replica_lost_then_the_quorum(tmp_path):
    with SentinelDeployment(tmp_path) as deployment:
        check = stores.check_sentinels("pool", deployment.url)
        primary = deployment.master_port()
        (finding,) = check()
        assert (finding.name, finding.status) == ("sentinel:pool", Status.OK)
        assert finding.summary == (
            f"3 of 3 Sentinels answer; master 'pool' at 127.0.0.1:{primary}, 1 replica(s) up"
        )
        (reached,) = stores.check_redis("pool", deployment.url)()
        assert reached.status is Status.OK
        assert "master 'pool' through Sentinel" in reached.summary

        deployment.replica.kill()
        wait_until(lambda: "no replica" in check()[0].summary, 10, "the replica marked down")
        assert check()[0].status is Status.WARN

        silent = deployment.sentinels[0]
        silent.kill()
        (finding,) = check()
        assert finding.status is Status.WARN
        assert finding.summary.startswith("2 of 3 Sentinels answer;")
        assert finding.summary.endswith(f"silent: 127.0.0.1:{silent.port}")

        deployment.sentinels[1].kill()
        # The last Sentinel counts the others out once they are silent past down-after.
        wait_until(lambda: check()[0].status is Status.FAIL, 10, "the quorum lost")
        (finding,) = check()
        assert finding.summary.startswith("1 of 3 Sentinels answer;")
        assert "too few Sentinels to agree on a failover (CKQUORUM)" in finding.summary

        deployment.sentinels[2].kill()
        (finding,) = check()
        assert finding.status is Status.FAIL
        assert finding.summary.startswith("no Sentinel answers (")
