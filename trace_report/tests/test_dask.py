"""A run's ranks read on a Dask cluster (the `[dask]` extra): `read_ranks(paths, executor=client.get_executor())`
gives what reading them here gives, and a bad trace is named the same way. The cluster is a local one, two worker
processes of one thread each: what they send back crosses a process boundary, as from a cluster's machines."""

from __future__ import annotations

import pytest

from trace_report.errors import UsageError
from trace_report.ranks import read_ranks, skew
from trace_report.tests.test_reading import rank_set

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            yield client


def test_ranks_read_on_dask_workers_are_those_read_here(tmp_path, client):
    paths = rank_set(tmp_path, 4)
    here = read_ranks(paths, parallel=False)
    assert all(r.comm is not None and r.comm.collectives for r in here)  # collectives to compare, not only figures
    with distributed.get_task_stream(client) as tasks, client.get_executor() as executor:
        there = read_ranks(paths, executor=executor)
    workers = set(client.scheduler_info()["workers"])
    assert len(tasks.data) == len(paths) and {task["worker"] for task in tasks.data} <= workers  # read there
    assert [r.rank for r in there] == [0, 1, 2, 3]
    assert there == here  # each rank's figures, host and collectives, equal field by field
    assert skew(there).to_dict() == skew(here).to_dict()


def test_a_bad_rank_on_dask_workers_is_named_and_skip_bad_reads_the_others(tmp_path, client, capsys):
    paths = rank_set(tmp_path, 3, bad=1)
    with client.get_executor() as executor:
        with pytest.raises(UsageError) as err:
            read_ranks(paths, executor=executor)
        line = str(err.value)
        assert "run_rank1.json.gz" in line and "cut short" in line and "--skip_bad reads the other 2" in line
        capsys.readouterr()
        ranks = read_ranks(paths, executor=executor, skip_bad=True)
    assert [r.rank for r in ranks] == [0, 2]
    err = capsys.readouterr().err
    assert "skipped" in err and "run_rank1.json.gz" in err
    assert ranks == read_ranks(paths, parallel=False, skip_bad=True)


def test_each_ranks_tables_made_on_dask_workers_are_those_made_here(tmp_path, client):
    import trace_report

    paths = rank_set(tmp_path, 2)
    here = read_ranks(paths, parallel=False, per_rank=trace_report.rank_tables)
    with client.get_executor() as executor:
        there = read_ranks(paths, executor=executor, per_rank=trace_report.rank_tables)
    assert all(r.trace is None and r.extra for r in there) and [r.extra for r in there] == [r.extra for r in here]
