"""Driver of test_spark_cluster.py's speculation tests, in its own process (one SparkContext
per process; the test process may already hold test_spark's local one).

    python spark_speculation_driver.py MASTER_URL EVENT_LOG_DIR MARKER_DIR ROWS ENV_JSON OUT...

For each OUT (a folder or object-store URL), one job writes ROWS rows in two partitions with
df.write.format("recordflow") under speculative execution. The first attempt of partition 0
stalls until a speculative copy of it has started (the copy leaves a marker file; at most
STALL_LIMIT seconds), so Spark itself launches the copy on the other worker's host and the
copy wins. ENV_JSON: environment for the executors and the driver (object store settings).
Prints one JSON line: the application id and each write's seconds.
"""

import json
import os
import sys
import time

from pyspark.sql import SparkSession

import recordflow.spark as rfs

STALL_LIMIT = 60.0


def slow_first_attempt(marker_dir: str, job: int):
    def run(batches):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        marker = os.path.join(marker_dir, f"copy-started-{job}")
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            deadline = time.monotonic() + STALL_LIMIT
            while not os.path.exists(marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(3.0)  # the copy finishes and commits meanwhile; Spark kills this one
        elif ctx.partitionId() == 0:
            open(marker, "w").close()
        yield from batches
    return run


def main() -> int:
    master, event_dir, marker_dir, rows, env_json, *outs = sys.argv[1:]
    env = json.loads(env_json)
    conf = {
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
        "spark.pyspark.python": sys.executable, "spark.task.maxFailures": "4",
        "spark.speculation": "true", "spark.speculation.interval": "100ms",
        "spark.speculation.quantile": "0.5", "spark.speculation.multiplier": "1.5",
        "spark.speculation.minTaskRuntime": "500ms",
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": "file://" + event_dir,
        "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
        # The wait after each write reads running tasks from the status store, which by default
        # records a task's start only if the executor's entry was not written in the last
        # 100 ms. 0: every task start and end is written.
        "spark.ui.liveUpdate.period": "0",
    }
    for k, v in env.items():
        conf[f"spark.executorEnv.{k}"] = v
    os.environ.update(env)  # the driver's commit reaches the store too
    b = SparkSession.builder.master(master).appName("recordflow-speculation")
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rfs.register(spark)
    # Both executors (one per host) must be up before the job, or both tasks start on one.
    jsc = spark.sparkContext._jsc.sc()
    deadline = time.monotonic() + 90
    while jsc.getExecutorMemoryStatus().size() < 3:  # the driver and two executors
        if time.monotonic() > deadline:
            raise SystemExit("the two executors did not register within 90 s")
        time.sleep(0.2)
    # Warm up: a Python worker on each executor, so the fast partition's runtime (what the
    # speculation threshold is a multiple of) is the write, not a Python start-up.
    spark.sparkContext.parallelize(range(4), 2).map(lambda x: x).collect()
    tracker = jsc.statusTracker()
    jobs = spark.sparkContext.statusTracker()
    seconds = []
    for job, out in enumerate(outs):
        df = (spark.range(0, int(rows), 1, 2)
              .selectExpr("id as i", "cast(repeat('x', cast(id % 40 as int)) as binary) as b")
              .mapInArrow(slow_first_attempt(marker_dir, job), "i long, b binary"))
        group = f"write-{job}"
        spark.sparkContext.setJobGroup(group, group)
        t0 = time.monotonic()
        df.write.format("recordflow").mode("append").save(out)
        seconds.append(time.monotonic() - t0)
        # The losing attempt ends (killed) before the next job and before the application
        # stops, so its end is in the event log and the folder checks see its aftermath. The
        # status store is fed by the listener bus, which may lag the scheduler (a loaded host:
        # 2.5 s seen): first wait until the store has the write's jobs as ended, so it has
        # every task start of them, then until no task runs.
        deadline = time.monotonic() + STALL_LIMIT
        while True:
            ids = jobs.getJobIdsForGroup(group)
            infos = [jobs.getJobInfo(i) for i in ids]
            if ids and all(x is not None and x.status == "SUCCEEDED" for x in infos):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the status store never saw the write's jobs end: {infos}")
            time.sleep(0.1)
        while any(e.numRunningTasks() for e in tracker.getExecutorInfos()):
            if time.monotonic() > deadline:
                raise SystemExit("the losing attempt still runs")
            time.sleep(0.2)
    app = spark.sparkContext.applicationId
    spark.stop()
    print(json.dumps({"app": app, "seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
