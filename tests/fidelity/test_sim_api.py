"""The simulated API server at the HTTP level: Status bodies, patches, watches, evictions."""

from __future__ import annotations

import json
import threading
import urllib.error
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from gpusim.apiserver import SimulatedApiServer
from gpusim.resources import BY_KIND, ApiError
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.kubeapi import connection as kept_alive
from tests.helpers.kubeapi import urlopen


@pytest.fixture
def api() -> Iterator[SimulatedApiServer]:
    store = ClusterState()
    store.load(healthy_cluster(2, datetime.now(UTC))["items"])
    server = SimulatedApiServer(store).start()
    try:
        yield server
    finally:
        server.stop()


def call(
    api: SimulatedApiServer,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    try:
        with urlopen(
            api, path, method=method, data=data, headers={"Content-Type": content_type}
        ) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_discovery_offers_pods_eviction_in_policy_v1(api: SimulatedApiServer) -> None:
    _, core = call(api, "GET", "/api/v1")
    eviction = next(r for r in core["resources"] if r["name"] == "pods/eviction")
    assert (eviction["group"], eviction["version"], eviction["kind"]) == (
        "policy",
        "v1",
        "Eviction",
    )
    _, groups = call(api, "GET", "/apis")
    assert {"policy", "apps", "coordination.k8s.io"} <= {g["name"] for g in groups["groups"]}


@pytest.mark.parametrize(
    ("path", "code", "reason", "message"),
    [
        ("/api/v1/nodes/nope", 404, "NotFound", 'nodes "nope" not found'),
        ("/api/v1/widgets", 404, "NotFound", "the server could not find the requested resource"),
        (
            "/api/v1/pods?fieldSelector=spec.foo%3D1",
            400,
            "BadRequest",
            "field label not supported: spec.foo",
        ),
        ("/api/v1/pods?labelSelector=a%20in", 400, "BadRequest", "unable to parse requirement"),
    ],
)
def test_bad_requests_get_the_real_status_bodies(
    api: SimulatedApiServer, path: str, code: int, reason: str, message: str
) -> None:
    status, body = call(api, "GET", path)
    assert status == code
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == code
    assert body["reason"] == reason and message in body["message"]


def test_list_selects_by_label_and_field_and_pages(api: SimulatedApiServer) -> None:
    _, listing = call(
        api, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-a1&labelSelector=app"
    )
    assert listing["kind"] == "PodList"
    assert {p["spec"]["nodeName"] for p in listing["items"]} == {"gpu-a1"}
    assert len(listing["items"]) == 8  # 7 operator pods and the metrics agent carry `app`
    _, page = call(api, "GET", "/api/v1/pods?limit=5")
    assert len(page["items"]) == 5 and page["metadata"]["continue"]
    _, rest = call(api, "GET", f"/api/v1/pods?limit=100&continue={page['metadata']['continue']}")
    assert not (
        {p["metadata"]["name"] for p in page["items"]}
        & {p["metadata"]["name"] for p in rest["items"]}
    )


@pytest.mark.parametrize(
    ("content_type", "patch"),
    [
        ("application/merge-patch+json", {"spec": {"unschedulable": True}}),
        ("application/strategic-merge-patch+json", {"spec": {"unschedulable": True}}),
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/spec/unschedulable", "value": True}],
        ),
    ],
)
def test_patch_types(api: SimulatedApiServer, content_type: str, patch: Any) -> None:
    status, node = call(api, "PATCH", "/api/v1/nodes/gpu-a1", patch, content_type)
    assert status == 200 and node["spec"]["unschedulable"] is True
    assert api.store.get(BY_KIND["Node"], "", "gpu-a1")["spec"]["unschedulable"] is True


def test_strategic_merge_merges_conditions_by_type(api: SimulatedApiServer) -> None:
    patch = {
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        }
    }
    _, node = call(
        api, "PATCH", "/api/v1/nodes/gpu-a2/status", patch, "application/strategic-merge-patch+json"
    )
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions == {
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
        "Ready": "False",
    }


@pytest.mark.parametrize(
    ("content_type", "patch", "code"),
    [
        ("application/json-patch+json", [{"op": "remove", "path": "/spec/nothere"}], 422),
        ("application/json-patch+json", {"not": "a list"}, 422),
        ("application/apply-patch+yaml", {"spec": {}}, 415),
        ("application/merge-patch+json", b"{not json", 400),
    ],
)
def test_malformed_patches_change_nothing(
    api: SimulatedApiServer, content_type: str, patch: Any, code: int
) -> None:
    before = api.store.get(BY_KIND["Node"], "", "gpu-a1")
    status, body = call(api, "PATCH", "/api/v1/nodes/gpu-a1", patch, content_type)
    assert status == code and body["kind"] == "Status"
    assert api.store.get(BY_KIND["Node"], "", "gpu-a1") == before


def test_update_with_a_stale_resource_version_conflicts(api: SimulatedApiServer) -> None:
    _, node = call(api, "GET", "/api/v1/nodes/gpu-a1")
    call(
        api,
        "PATCH",
        "/api/v1/nodes/gpu-a1",
        {"metadata": {"labels": {"x": "1"}}},
        "application/merge-patch+json",
    )
    status, body = call(api, "PUT", "/api/v1/nodes/gpu-a1", node)
    assert status == 409 and body["reason"] == "Conflict"


def test_pod_with_finalizers_stays_terminating_until_they_are_removed(
    api: SimulatedApiServer,
) -> None:
    path = "/api/v1/namespaces/ml/pods/train-llm-0-worker-0"
    call(
        api,
        "PATCH",
        path,
        {"metadata": {"finalizers": ["example.com/upload"]}},
        "application/merge-patch+json",
    )
    status, pod = call(api, "DELETE", path)
    assert status == 200 and pod["metadata"]["deletionTimestamp"]
    assert call(api, "GET", path)[0] == 200
    call(api, "PATCH", path, {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    assert call(api, "GET", path)[0] == 404


def test_eviction_honours_the_pdb_with_the_real_429_body(api: SimulatedApiServer) -> None:
    call(
        api,
        "PATCH",
        "/apis/policy/v1/namespaces/ml/poddisruptionbudgets/train-llm-0-pdb",
        {"spec": {"minAvailable": 2}},
        "application/merge-patch+json",
    )
    _, pdb = call(api, "GET", "/apis/policy/v1/namespaces/ml/poddisruptionbudgets/train-llm-0-pdb")
    assert pdb["status"]["disruptionsAllowed"] == 0 and pdb["status"]["currentHealthy"] == 2
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "train-llm-0-worker-0", "namespace": "ml"},
    }
    status, body = call(
        api, "POST", "/api/v1/namespaces/ml/pods/train-llm-0-worker-0/eviction", eviction
    )
    assert status == 429 and body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    call(
        api,
        "PATCH",
        "/apis/policy/v1/namespaces/ml/poddisruptionbudgets/train-llm-0-pdb",
        {"spec": {"minAvailable": 1}},
        "application/merge-patch+json",
    )
    status, _ = call(
        api, "POST", "/api/v1/namespaces/ml/pods/train-llm-0-worker-0/eviction", eviction
    )
    assert status == 201 and api.store.evictions == [("ml", "train-llm-0-worker-0")]
    assert call(api, "GET", "/api/v1/namespaces/ml/pods/train-llm-0-worker-0")[0] == 404


def _stream(api: SimulatedApiServer, path: str, want: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with urlopen(api, path) as response:
        for line in response:
            events.append(json.loads(line))
            if len(events) >= want:
                break
    return events


def test_watch_from_a_resource_version_sees_later_changes_with_bookmarks(
    api: SimulatedApiServer,
) -> None:
    _, listing = call(api, "GET", "/api/v1/nodes")
    rv = listing["metadata"]["resourceVersion"]
    timer = threading.Timer(
        0.3,
        lambda: api.store.patch(
            BY_KIND["Node"],
            "",
            "gpu-a2",
            "application/merge-patch+json",
            {"spec": {"unschedulable": True}},
        ),
    )
    timer.start()
    events = _stream(
        api, f"/api/v1/nodes?watch=true&resourceVersion={rv}&allowWatchBookmarks=true", 2
    )
    assert events[0]["type"] == "BOOKMARK"
    assert events[1]["type"] == "MODIFIED" and events[1]["object"]["metadata"]["name"] == "gpu-a2"
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) > int(rv)


def test_watch_from_a_version_too_old_is_410_gone() -> None:
    store = ClusterState(history=100)
    store.load(healthy_cluster(2, datetime.now(UTC))["items"])
    for i in range(200):  # push the history past its window
        store.patch(
            BY_KIND["Node"],
            "",
            "gpu-a1",
            "application/merge-patch+json",
            {"metadata": {"labels": {"n": str(i)}}},
        )
    server = SimulatedApiServer(store).start()
    try:
        # As the real API server: 200, then an ERROR event holding the 410 Status.
        [event] = _stream(server, "/api/v1/nodes?watch=true&resourceVersion=1001", 1)
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    finally:
        server.stop()


def test_a_pod_slow_to_stop_stays_terminating_for_its_shutdown_time(
    api: SimulatedApiServer,
) -> None:
    import time

    from gpusim.state import SHUTDOWN_ANNOTATION

    path = "/api/v1/namespaces/ml/pods/train-llm-0-worker-0"
    call(
        api,
        "PATCH",
        path,
        {"metadata": {"annotations": {SHUTDOWN_ANNOTATION: "0.6"}}},
        "application/merge-patch+json",
    )
    status, pod = call(api, "DELETE", path)
    assert status == 200 and pod["metadata"]["deletionTimestamp"]
    assert call(api, "GET", path)[0] == 200
    deadline = time.monotonic() + 10
    while call(api, "GET", path)[0] == 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert call(api, "GET", path)[0] == 404


def test_a_budget_remembers_the_pods_it_let_go() -> None:
    from gpusim import objects

    store = ClusterState()
    now = datetime.now(UTC)
    pods = [
        objects.pod(
            f"web-{i}",
            "apps",
            "gpu-a1",
            now,
            labels={"app": "web"},
            owner_ref=objects.owner("ReplicaSet", "web"),
        )
        for i in range(3)
    ]
    budget = objects.pdb("web", "apps", {"app": "web"}, min_available=0, healthy=3)
    budget["spec"] = {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    store.load([objects.node("gpu-a1", "p", now), *pods, budget])
    store.evict("apps", "web-0", {})
    # The evicted pod still counts as expected until a replacement exists: one at a time.
    with pytest.raises(ApiError) as blocked:
        store.evict("apps", "web-1", {})
    assert blocked.value.code == 429
    replacement = objects.pod(
        "web-3",
        "apps",
        "gpu-a1",
        now,
        labels={"app": "web"},
        owner_ref=objects.owner("ReplicaSet", "web"),
    )
    store.create(BY_KIND["Pod"], "apps", replacement)
    assert (
        store.get(BY_KIND["PodDisruptionBudget"], "apps", "web")["status"]["disruptionsAllowed"]
        == 1
    )


def test_a_watch_that_falls_behind_gets_410_not_a_silent_gap() -> None:
    store = ClusterState(history=10)
    store.load(healthy_cluster(2, datetime.now(UTC))["items"])
    since = store.resource_version
    events = store.watch(BY_KIND["Node"], "", since, timeout_s=2)
    for i in range(30):
        store.patch(
            BY_KIND["Node"],
            "",
            "gpu-a1",
            "application/merge-patch+json",
            {"metadata": {"labels": {"n": str(i)}}},
        )
    kinds = [e.type for e in events]
    assert kinds == ["ERROR"]


def test_the_first_write_is_after_an_empty_stores_version() -> None:
    store = ClusterState()
    empty = store.resource_version
    store.load(healthy_cluster(1, datetime.now(UTC))["items"][:1])
    assert store.resource_version > empty


def test_every_page_reports_the_first_pages_version(api: SimulatedApiServer) -> None:
    _, first = call(api, "GET", "/api/v1/pods?limit=5")
    call(
        api,
        "PATCH",
        "/api/v1/nodes/gpu-a1",
        {"metadata": {"labels": {"x": "1"}}},
        "application/merge-patch+json",
    )
    _, rest = call(api, "GET", f"/api/v1/pods?limit=500&continue={first['metadata']['continue']}")
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    _, whole = call(api, "GET", "/api/v1/pods")
    names = [p["metadata"]["name"] for p in first["items"] + rest["items"]]
    assert names == [p["metadata"]["name"] for p in whole["items"]]


def test_an_error_before_the_body_is_read_does_not_poison_the_connection(
    api: SimulatedApiServer,
) -> None:
    connection = kept_alive(api)
    auth = {"Authorization": f"Bearer {api.admin_token}"}
    connection.request(
        "POST",
        "/api/v1/namespaces/ml/pods/p/binding",
        body=json.dumps({"x": 1}),
        headers={"Content-Type": "application/json", **auth},
    )
    first = connection.getresponse()
    assert first.status == 404 and json.loads(first.read())["kind"] == "Status"
    connection.request("GET", "/api/v1/nodes/gpu-a1", headers=auth)
    second = connection.getresponse()
    assert second.status == 200 and json.loads(second.read())["metadata"]["name"] == "gpu-a1"
    connection.close()


def test_stop_without_start_returns() -> None:
    SimulatedApiServer(ClusterState()).stop()


def test_a_patch_naming_a_stale_resource_version_conflicts(api: SimulatedApiServer) -> None:
    _, node = call(api, "GET", "/api/v1/nodes/gpu-a1")
    stale = node["metadata"]["resourceVersion"]
    call(
        api,
        "PATCH",
        "/api/v1/nodes/gpu-a1",
        {"metadata": {"labels": {"x": "1"}}},
        "application/merge-patch+json",
    )
    status, body = call(
        api,
        "PATCH",
        "/api/v1/nodes/gpu-a1",
        {"metadata": {"resourceVersion": stale}, "spec": {"taints": []}},
        "application/strategic-merge-patch+json",
    )
    assert status == 409 and body["reason"] == "Conflict"
