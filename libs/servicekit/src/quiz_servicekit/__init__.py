"""quiz_servicekit: what every service is built on (see docs/service-anatomy.md).

app (runtime, lifespan, ServiceRef, run_service), db (Database, @transaction/@read_only),
migrate (run_env, upgrade), http and edge (catch-all, body limit, JSON guard, errors), micro
(NATS endpoints from the catalog), natsio (connect, request), llm (LlmClient), auth (JWT),
metrics (ServiceMetrics, MetricSet), settings, telemetry; the concurrency mechanisms services
share: group_commit (GroupCommit), singleflight (SingleFlight), tasks (TaskSet), lease (KvLease)
and lease_time (a lease's arithmetic, pure).
"""
