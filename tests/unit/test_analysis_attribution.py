"""The attribution table, row by row, with real kube-apiserver frame names."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.analysis.attribution import (
    OTHER,
    RULES,
    attribute,
    attribution_table,
    cause_totals,
    classify_stack,
    rules_table,
)
from crdscale.analysis.pprof.testing import synthetic_profile, truncate_stacks
from crdscale.collect.pprof import read_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "profiles"

ROOT = ["net/http.(*conn).serve", "runtime.goexit"]
ALLOC = ["runtime.mallocgc", "runtime.newobject"]  # what sits between a Go frame and the allocator

# (cause, stack from leaf to root): one row per rule, real frame names.
ROWS = [
    (
        "zap-counters",
        [
            "go.uber.org/zap/zapcore.newCounters",
            "go.uber.org/zap/zapcore.NewSamplerWithOptions",
            "go.etcd.io/etcd/client/pkg/v3/logutil.CreateDefaultZapLogger",
            "go.etcd.io/etcd/client/v3.New",
        ],
    ),
    (
        "watch-cache",
        [
            "encoding/json.(*decodeState).object",
            "k8s.io/apimachinery/pkg/runtime/serializer/json.(*Serializer).Decode",
            "k8s.io/apiserver/pkg/storage/etcd3.decodeListItem",
            "k8s.io/apiserver/pkg/storage/etcd3.(*store).GetList",
            "k8s.io/apiserver/pkg/storage/cacher.(*listerWatcher).List",
            "k8s.io/client-go/tools/cache.(*Reflector).list",
        ],
    ),
    (
        "watch-cache",
        [
            "k8s.io/apiserver/pkg/storage/cacher.newWatchCache",
            "k8s.io/apiserver/pkg/storage/cacher.NewCacherFromConfig",
            "k8s.io/apiextensions-apiserver/pkg/registry/customresource.NewStorage",
        ],
    ),
    (
        "informer-cache",
        [
            "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.(*JSONSchemaProps).Unmarshal",
            "k8s.io/apimachinery/pkg/runtime/serializer/protobuf.(*Serializer).Decode",
            "k8s.io/client-go/tools/pager.(*ListPager).List",
            "k8s.io/client-go/tools/cache.(*Reflector).list",
        ],
    ),
    (
        "etcd-client",
        [
            "google.golang.org/grpc/internal/transport.newBufWriter",
            "google.golang.org/grpc/internal/transport.NewHTTP2Client",
            "google.golang.org/grpc.(*addrConn).createTransport",
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor",
        ],
    ),
    (
        "etcd-client",
        [
            "go.etcd.io/etcd/client/v3.newClient",
            "go.etcd.io/etcd/client/v3.New",
            "k8s.io/apiserver/pkg/storage/storagebackend/factory.newETCD3Client",
        ],
    ),
    (
        "cel",
        [
            "github.com/google/cel-go/checker.(*checker).check",
            "github.com/google/cel-go/cel.(*Env).Compile",
            "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel.Compile",
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor",
        ],
    ),
    (
        "cel",
        [
            "k8s.io/apiserver/pkg/cel/environment.(*EnvSet).Extend",
            "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel.Compile",
        ],
    ),
    (
        "ssa-typeconverter",
        [
            "sigs.k8s.io/structured-merge-diff/v6/schema.(*Schema).FindNamedType",
            "k8s.io/kube-openapi/pkg/schemaconv.ToSchemaFromOpenAPI",
            "k8s.io/apimachinery/pkg/util/managedfields.NewTypeConverter",
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor",
        ],
    ),
    (
        "openapi",
        [
            "k8s.io/kube-openapi/pkg/validation/spec.(*Schema).UnmarshalJSON",
            "encoding/json.Unmarshal",
            "k8s.io/kube-openapi/pkg/builder.(*openAPI).buildDefinitionRecursively",
        ],
    ),
    (
        "openapi",
        [
            "k8s.io/kube-openapi/pkg/builder3.BuildOpenAPISpecFromRoutes",
            "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder.BuildOpenAPIV3",
        ],
    ),
    ("openapi", ["k8s.io/kube-openapi/pkg/handler.(*OpenAPIService).UpdateSpec"]),
    ("openapi", ["k8s.io/kube-openapi/pkg/schemamutation.(*Walker).WalkSchema"]),
    ("openapi", ["k8s.io/kube-aggregator/pkg/controllers/openapi/aggregator.(*specAggregator).buildMergeSpecLocked"]),
    (
        "openapi",
        [
            "k8s.io/apiextensions-apiserver/pkg/controller/openapi/v2.ToStructuralOpenAPIV2",
            "k8s.io/apiextensions-apiserver/pkg/controller/openapi.(*Controller).updateSpecLocked",
        ],
    ),
    ("openapi", ["k8s.io/kube-openapi/pkg/handler3.(*OpenAPIService).UpdateGroupVersion"]),
    (
        "discovery",
        [
            "k8s.io/apiserver/pkg/endpoints/discovery/aggregated.(*resourceDiscoveryManager).AddGroupVersion",
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*DiscoveryController).sync",
        ],
    ),
    (
        "crd-schema",
        [
            "k8s.io/apiextensions-apiserver/pkg/apiserver/schema.NewStructural",
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor",
        ],
    ),
    (
        "crd-schema",
        [
            "k8s.io/apiextensions-apiserver/pkg/apiserver/validation.NewSchemaValidator",
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor",
        ],
    ),
    ("crd-schema", ["k8s.io/kube-openapi/pkg/validation/validate.NewSchemaValidator"]),
    (
        "crd-schema",
        ["k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting.PruneNonNullableNullsWithoutDefaults"],
    ),
    (
        "crd-handler",
        [
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor",
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).ServeHTTP",
        ],
    ),
    ("crd-handler", ["k8s.io/apiextensions-apiserver/pkg/registry/customresource.NewStrategy"]),
    (
        "jsonschemaprops",
        [
            "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps",
            "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor",
        ],
    ),
    ("jsonschemaprops", ["k8s.io/apiextensions-apiserver/pkg/apis/apiextensions.(*JSONSchemaProps).DeepCopyInto"]),
    (
        "metrics",
        [
            "github.com/prometheus/client_golang/prometheus.(*MetricVec).GetMetricWithLabelValues",
            "k8s.io/component-base/metrics.(*CounterVec).WithLabelValues",
        ],
    ),
    ("endpoints", ["k8s.io/apiserver/pkg/endpoints/handlers.ListResource.func1"]),
    ("decoding", ["encoding/json.(*decodeState).literalStore", "sigs.k8s.io/json.UnmarshalCaseSensitivePreserveInts"]),
    ("decoding", ["github.com/gogo/protobuf/proto.Unmarshal"]),
    ("goroutines", ["runtime.malg", "runtime.newproc1", "runtime.newproc.func1", "runtime.systemstack"]),
    (
        "openapi",
        [
            "k8s.io/apiextensions-apiserver/pkg/apiserver/schema.(*Structural).ToKubeOpenAPI",
            "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder.(*builder).buildKubeNative",
        ],
    ),
    (
        "crd-schema",
        [
            "k8s.io/apiextensions-apiserver/pkg/apiserver/schema.(*Structural).ToKubeOpenAPI",
            "k8s.io/apiextensions-apiserver/pkg/apiserver/validation.NewSchemaValidatorFromOpenAPI",
        ],
    ),
    (OTHER, ["golang.org/x/net/html.map.init.1", "golang.org/x/net/html.init", "runtime.doInit1"]),
]


def test_every_rule_has_a_row():
    assert {r.name for r in RULES} <= {cause for cause, _ in ROWS}


@pytest.mark.parametrize("cause,stack", ROWS, ids=[f"{c}:{s[0].rsplit('/', 1)[-1]}" for c, s in ROWS])
def test_rule_row(cause, stack):
    assert classify_stack(ALLOC + stack + ROOT) == cause


def test_rules_are_readable_data():
    table = rules_table()
    assert list(table.columns) == ["order", "cause", "decides", "pattern", "why"]
    assert set(table["decides"]) <= {"leaf", "any"}
    assert all(len(why) > 10 and "\n" not in why for why in table["why"])


@pytest.mark.parametrize(
    "stack,cause",
    [
        # "any" context wins wherever it is: the cacher keeps what JSON decoded.
        (
            ["encoding/json.(*decodeState).object", "k8s.io/apiserver/pkg/storage/cacher.(*Cacher).startCaching"],
            "watch-cache",
        ),
        # Leaf rules: the component nearest the allocation decides.
        (["github.com/google/cel-go/cel.NewEnv", "k8s.io/kube-openapi/pkg/builder3.BuildOpenAPISpecFromRoutes"], "cel"),
        (
            ["k8s.io/kube-openapi/pkg/builder3.BuildOpenAPISpecFromRoutes", "github.com/google/cel-go/cel.NewEnv"],
            "openapi",
        ),
        # JSON decoding only claims what no component did.
        (
            ["encoding/json.(*decodeState).object", "k8s.io/kube-openapi/pkg/handler.(*OpenAPIService).UpdateSpec"],
            "openapi",
        ),
        # zap's counters inside an etcd client created by the CRD handler are zap's.
        (
            [
                "go.uber.org/zap/zapcore.newCounters",
                "go.etcd.io/etcd/client/v3.New",
                "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor",
            ],
            "zap-counters",
        ),
        # The DiscoveryController is in the CRD handler's package but is discovery.
        (["k8s.io/apiextensions-apiserver/pkg/apiserver.(*DiscoveryController).sync"], "discovery"),
    ],
)
def test_precedence(stack, cause):
    assert classify_stack(stack) == cause


def test_vectorized_attribution_equals_reference():
    stacks = [(ALLOC + stack + ROOT, [1, 100 + i]) for i, (_cause, stack) in enumerate(ROWS)]
    profile = synthetic_profile(stacks)
    result = attribute(profile)
    assert list(result["cause"]) == [cause for cause, _ in ROWS]
    # The deciding frame is reported, and it matches the cause's pattern.
    by_name = {r.name: r for r in RULES}
    for cause, frame in zip(result["cause"], result["frame"]):
        if cause != OTHER:
            assert by_name[cause].matches(frame)


def test_unattributed_is_always_reported():
    profile = synthetic_profile([(["main.f", "main.main"], [1, 64])])
    table = attribution_table(profile)
    assert table.loc[table["cause"] == OTHER, "share"].item() == 1.0
    totals = cause_totals(profile)
    assert OTHER in totals.index and "zap-counters" in totals.index


def test_truncated_stacks_still_attribute():
    """Stacks cut at 32 frames (Go < 1.23 heap profiles) keep their cause when a
    matching frame is among the 32 nearest the leaf."""
    deep = ["k8s.io/kube-openapi/pkg/builder.(*openAPI).buildDefinitionRecursively"] * 40
    stack = (
        ALLOC
        + ["k8s.io/kube-openapi/pkg/validation/spec.(*Schema).WithProperties"]
        + deep
        + ["k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).getOrCreateServingInfoFor"]
        + ROOT
    )
    profile = synthetic_profile([(stack, [1, 4096])])
    assert attribute(truncate_stacks(profile, 32))["cause"].item() == "openapi"


def test_attribution_on_a_real_profile_sums_to_total():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    totals = cause_totals(profile)
    assert int(totals["inuse_space"].sum()) == profile.total("inuse_space")


def test_real_kube_apiserver_profile_survives_32_frame_truncation():
    """Heap profiles from Go < 1.23 keep only 32 frames; the causes must hardly move."""
    profile = read_profile(DATA / "kube-apiserver-heap-crds0060.pb.gz")
    assert (profile.stacks.groupby("sample").size() > 32).any()  # the test means something
    full = cause_totals(profile)["inuse_space"]
    cut = cause_totals(truncate_stacks(profile, 32))["inuse_space"]
    total = full.sum()
    for cause in ("openapi", "crd-schema", "crd-handler", "watch-cache", "etcd-client"):
        assert abs(cut[cause] - full[cause]) <= 0.05 * max(full[cause], 1)
    assert cut[OTHER] - full[OTHER] <= 0.02 * total


def test_real_kube_apiserver_profile_is_mostly_attributed():
    profile = read_profile(DATA / "kube-apiserver-heap-crds0060.pb.gz")
    table = attribution_table(profile, "inuse_space").set_index("cause")
    assert table.loc["openapi", "value"] > 0
    assert table.loc[OTHER, "share"] < 0.25
